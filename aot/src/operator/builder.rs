//! [`AotOpBuilder`]: everything an operator definition can say, recorded as given; `build`
//! (in `load.rs`) checks it and loads the library.

use std::fmt;
use std::sync::Arc;

use super::backward::Backward;
use super::rules::{DTypeRule, ShapeRule};
use super::{AotOp, AotOptions, Target};
use crate::attrs::{AttrValue, Attrs};
use crate::compile::CompileOptions;
use crate::dtype::DType;
use crate::error::AotResult;
use crate::isolate::Isolation;
use crate::tensor::{Shape, Tensor, TensorSpec};
use crate::whitelist::Whitelist;

/// Something usable as a fixed shape: `[2, 3]`, `vec![4]`, `&[5usize][..]`.
pub trait IntoShape {
    /// The shape.
    fn into_shape(self) -> Shape;
}

macro_rules! into_shape {
    ($($t:ty),*) => {$(
        impl IntoShape for Vec<$t> {
            fn into_shape(self) -> Shape { self.into_iter().map(|d| d as i64).collect() }
        }
        impl IntoShape for &[$t] {
            fn into_shape(self) -> Shape { self.iter().map(|&d| d as i64).collect() }
        }
        impl<const N: usize> IntoShape for [$t; N] {
            fn into_shape(self) -> Shape { self.iter().map(|&d| d as i64).collect() }
        }
    )*};
}
into_shape!(i32, i64, u32, u64, usize);

/// Defines an [`AotOp`]. Everything but the function is optional; see the module docs.
#[derive(Clone)]
pub struct AotOpBuilder {
    pub(super) func: String,
    pub(super) shapes: ShapeRule,
    pub(super) dtypes: DTypeRule,
    pub(super) attrs: Attrs,
    pub(super) num_inputs: Option<usize>,
    pub(super) inputs: Vec<TensorSpec>,
    pub(super) num_outputs: Option<usize>,
    pub(super) tuple_infer: bool,
    pub(super) data_dependent: bool,
    pub(super) backward: Option<Backward>,
    pub(super) options: AotOptions,
    pub(super) target: Option<Target>,
    pub(super) isolation: Option<Isolation>,
}

impl AotOpBuilder {
    /// Starts a definition of `"path:Func"`: a shared library, or a `.cc`/`.cpp`/`.cu` source
    /// compiled automatically.
    pub fn new(func: impl Into<String>) -> Self {
        AotOpBuilder {
            func: func.into(),
            shapes: ShapeRule::Library,
            dtypes: DTypeRule::Library,
            attrs: Attrs::new(),
            num_inputs: None,
            inputs: Vec::new(),
            num_outputs: None,
            tuple_infer: false,
            data_dependent: false,
            backward: None,
            options: AotOptions::default(),
            target: None,
            isolation: None,
        }
    }

    /// One output of a fixed shape.
    pub fn out_shape(mut self, shape: impl IntoShape) -> Self {
        self.shapes = ShapeRule::Fixed(vec![shape.into_shape()]);
        self
    }

    /// Several outputs of fixed shapes.
    pub fn out_shapes<S: IntoShape>(mut self, shapes: impl IntoIterator<Item = S>) -> Self {
        self.shapes = ShapeRule::Fixed(shapes.into_iter().map(IntoShape::into_shape).collect());
        self
    }

    /// One output whose shape a closure computes from the input shapes
    /// (MindSpore's `out_shape=lambda x, _: x`).
    pub fn infer_shape(mut self, f: impl Fn(&[Shape]) -> Shape + Send + Sync + 'static) -> Self {
        self.shapes = ShapeRule::Fn(Arc::new(move |s, _| Ok(vec![f(s)])));
        self
    }

    /// Several outputs whose shapes a closure computes from the input shapes.
    pub fn infer_shapes(
        mut self,
        f: impl Fn(&[Shape]) -> Vec<Shape> + Send + Sync + 'static,
    ) -> Self {
        self.shapes = ShapeRule::Fn(Arc::new(move |s, _| Ok(f(s))));
        self
    }

    /// Output shapes from a fallible closure that also sees the attributes.
    pub fn try_infer_shapes(
        mut self,
        f: impl Fn(&[Shape], &Attrs) -> Result<Vec<Shape>, String> + Send + Sync + 'static,
    ) -> Self {
        self.shapes = ShapeRule::Fn(Arc::new(f));
        self
    }

    /// One output of a fixed dtype.
    pub fn out_dtype(mut self, dtype: DType) -> Self {
        self.dtypes = DTypeRule::Fixed(vec![dtype]);
        self
    }

    /// Several outputs of fixed dtypes.
    pub fn out_dtypes(mut self, dtypes: impl IntoIterator<Item = DType>) -> Self {
        self.dtypes = DTypeRule::Fixed(dtypes.into_iter().collect());
        self
    }

    /// One output whose dtype a closure computes from the input dtypes.
    pub fn infer_dtype(mut self, f: impl Fn(&[DType]) -> DType + Send + Sync + 'static) -> Self {
        self.dtypes = DTypeRule::Fn(Arc::new(move |d, _| Ok(vec![f(d)])));
        self
    }

    /// Several outputs whose dtypes a closure computes from the input dtypes.
    pub fn infer_dtypes(
        mut self,
        f: impl Fn(&[DType]) -> Vec<DType> + Send + Sync + 'static,
    ) -> Self {
        self.dtypes = DTypeRule::Fn(Arc::new(move |d, _| Ok(f(d))));
        self
    }

    /// Output dtypes from a fallible closure that also sees the attributes.
    pub fn try_infer_dtypes(
        mut self,
        f: impl Fn(&[DType], &Attrs) -> Result<Vec<DType>, String> + Send + Sync + 'static,
    ) -> Self {
        self.dtypes = DTypeRule::Fn(Arc::new(f));
        self
    }

    /// Sets an attribute, read by the kernel with `extra->Attr<T>(name)`.
    pub fn attr(mut self, name: impl Into<String>, value: impl Into<AttrValue>) -> Self {
        self.attrs.set(name, value);
        self
    }

    /// Sets several attributes.
    pub fn attrs(mut self, attrs: &Attrs) -> Self {
        self.attrs = self.attrs.merged(attrs);
        self
    }

    /// Declares the next input: its dtype and shape (dims may be `DYN_DIM`, or the whole
    /// shape `[DYN_RANK]`). A call whose input has another dtype, rank or size is an
    /// [`AotError::Input`](crate::AotError::Input) before the C++ runs (the C++ trusts the
    /// shapes it is given). Declaring inputs sets [`num_inputs`](Self::num_inputs) to their
    /// count.
    pub fn input(mut self, spec: TensorSpec) -> Self {
        self.inputs.push(spec);
        self
    }

    /// The number of inputs; calls with another count are rejected before any C code runs.
    pub fn num_inputs(mut self, n: usize) -> Self {
        self.num_inputs = Some(n);
        self
    }

    /// The number of outputs. With more than one, the library's `FuncInferShape` and
    /// `FuncInferType` are called in their tuple forms (`std::vector<std::vector<int64_t>>`,
    /// `std::vector<TypeId>`).
    pub fn num_outputs(mut self, n: usize) -> Self {
        self.num_outputs = Some(n);
        self
    }

    /// Calls the library's inference functions in their tuple forms even for one output.
    pub fn tuple_infer(mut self) -> Self {
        self.tuple_infer = true;
        self
    }

    /// Data-dependent output shapes (GE): inferred shapes are upper bounds; the kernel gets, after
    /// the workspaces, one `uint64_t` shape buffer per output (`[ndim, d0, d1, …]`, pre-filled
    /// with the upper bound) and the runtime trims each output to what the kernel wrote.
    pub fn data_dependent_shapes(mut self) -> Self {
        self.data_dependent = true;
        self
    }

    /// A backward written in Rust: `(inputs, outputs, douts) → input gradients`.
    pub fn backward(
        mut self,
        f: impl Fn(&[Tensor], &[Tensor], &[Tensor]) -> AotResult<Vec<Tensor>> + Send + Sync + 'static,
    ) -> Self {
        self.backward = Some(Backward::Fn(Arc::new(f)));
        self
    }

    /// A backward implemented by another AOT operator, called with
    /// `(inputs…, outputs…, douts…)` and returning one gradient per input.
    pub fn backward_op(mut self, op: AotOp) -> Self {
        self.backward = Some(Backward::Op(op));
        self
    }

    /// Where the operator runs. Sources decide by suffix (`.cu` is CUDA); a prebuilt library
    /// is CPU unless set here, as MindSpore decides by its device target.
    pub fn target(mut self, target: Target) -> Self {
        self.target = Some(target);
        self
    }

    /// Runs `FuncInit` and `Func` in a worker process (CPU operators; also
    /// `TRITIUM_AOT_ISOLATE=1`): a segfault, abort, `exit` or a call past the timeout (60 s)
    /// becomes an [`AotError::Worker`](crate::AotError::Worker) naming the function and the
    /// signal, and the next call starts a fresh worker (which runs `FuncInit` again). Tensors
    /// travel through shared memory; `FuncInferShape`/`FuncInferType` still run in this
    /// process.
    pub fn isolated(self) -> Self {
        self.isolated_with(Isolation::default())
    }

    /// [`AotOpBuilder::isolated`] with another timeout.
    pub fn isolated_with(mut self, isolation: Isolation) -> Self {
        self.isolation = Some(isolation);
        self
    }

    /// Checked mode (see [`AotOptions::checked`]).
    pub fn checked(mut self, on: bool) -> Self {
        self.options.checked = on;
        self
    }

    /// Replaces all options.
    pub fn options(mut self, options: AotOptions) -> Self {
        self.options = options;
        self
    }

    /// Replaces the compile options.
    pub fn compile_options(mut self, compile: CompileOptions) -> Self {
        self.options.compile = compile;
        self
    }

    /// Uses this whitelist instead of `TRITIUM_AOT_WHITELIST`.
    pub fn whitelist(mut self, whitelist: Whitelist) -> Self {
        self.options.whitelist = Some(whitelist);
        self
    }

    /// The flags a package records (see [`AotOp::flags`]).
    pub(crate) fn set_flags(
        mut self,
        num_inputs: Option<usize>,
        num_outputs: Option<usize>,
        tuple: bool,
        data_dependent: bool,
    ) -> Self {
        self.num_inputs = num_inputs;
        self.num_outputs = num_outputs;
        self.tuple_infer = tuple;
        self.data_dependent = data_dependent;
        self
    }

    /// Points the definition at a package's library, written to disk.
    pub(crate) fn set_func(mut self, func: String) -> Self {
        self.func = func;
        self
    }
}

impl fmt::Debug for AotOpBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AotOpBuilder")
            .field("func", &self.func)
            .field("attrs", &self.attrs)
            .field("num_inputs", &self.num_inputs)
            .field("num_outputs", &self.num_outputs)
            .field("data_dependent", &self.data_dependent)
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}
