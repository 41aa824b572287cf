//! Kernels as candle custom ops in a few lines: implement [`UnaryKernel`] (one input) or
//! [`BinaryKernel`] (two) with the launches of a forward kernel and, for autograd, a
//! backward one, and [`KernelOp`] is the candle op: the dtype (f32, f16, bf16) picked at
//! run time, inputs read where they lie when row-major, the output (of the input's shape,
//! or of the kernel's `output_shape`: a reduction, a product of differently shaped
//! operands) made without a copy, shapes and dtypes checked, errors as candle errors
//! naming the op.
//!
//! ```ignore
//! #[derive(Clone)]
//! struct Gelu;
//! impl UnaryKernel for Gelu {
//!     fn name(&self) -> &'static str { "gelu" }
//!     fn forward<T: Float + WithDType>(&self, x: &Rows<T>, y: &mut [T]) -> tritium::Result<()> {
//!         let n = y.len();
//!         gelu_erf::launch(&Device::cpu(), n.div_ceil(1024), y, x, n as i32, 1024)
//!     }
//!     fn backward<T: Float + WithDType>(&self, x: &Rows<T>, dy: &Rows<T>, dx: &mut [T]) -> tritium::Result<()> {
//!         let n = dx.len();
//!         gelu_erf_bwd::launch(&Device::cpu(), n.div_ceil(1024), dx, x, dy, n as i32, 1024)
//!     }
//! }
//! let y = x.apply_op1(KernelOp(Gelu))?; // differentiable under candle's autograd
//! ```

use crate::candle_error;
use crate::op::{cpu_array, dispatch, op_error, same_dtype, zeros, PerFloat};
use candle_core::backend::BackendStorage;
use candle_core::{
    CpuStorage, CustomOp1, CustomOp2, CustomOp3, Layout, Result, Shape, Tensor, WithDType,
};
use ndarray::{CowArray, IxDyn};
use tritium::dsl::trace::Float;

/// A kernel's input: the tensor's elements row-major in its shape (its storage where it is
/// so, else a copy). A kernel's `Ptr<T>` parameter takes `&Rows<T>`.
pub type Rows<'a, T> = CowArray<'a, T, IxDyn>;

/// One input, one output of the input's dtype: of its shape (an activation, a row-wise
/// norm without weights, …) or of [`UnaryKernel::output_shape`] (a reduction, …).
pub trait UnaryKernel: Clone + Send + Sync + 'static {
    /// The op's name, in candle's graph and in errors.
    fn name(&self) -> &'static str;

    /// The input's name, in errors.
    fn input_name(&self) -> &'static str {
        "x"
    }

    /// The output's shape for an input of shape `x` (by default `x`'s), or what is wrong
    /// with `x` (the op's error then).
    fn output_shape(&self, x: &[usize]) -> std::result::Result<Vec<usize>, String> {
        Ok(x.to_vec())
    }

    /// Writes `y` (row-major, [`UnaryKernel::output_shape`]'s elements) from `x`.
    fn forward<T: Float + WithDType>(&self, x: &Rows<T>, y: &mut [T]) -> tritium::Result<()>;

    /// Writes `dx` (of `x`'s shape) from `x` and the output's gradient `dy` (of the
    /// output's shape). Without it, the op has no backward: autograd through it is an
    /// error naming it.
    fn backward<T: Float + WithDType>(
        &self,
        x: &Rows<T>,
        dy: &Rows<T>,
        dx: &mut [T],
    ) -> tritium::Result<()> {
        let _ = (x, dy, dx);
        Err(no_backward(self.name()))
    }
}

/// Two inputs of one dtype, one output of that dtype: by default the inputs have one
/// shape, the output's (a gated activation, an elementwise product, …); a kernel whose
/// operands or output differ in shape (a row scaling, a product) says so in
/// [`BinaryKernel::output_shape`].
pub trait BinaryKernel: Clone + Send + Sync + 'static {
    /// The op's name, in candle's graph and in errors.
    fn name(&self) -> &'static str;

    /// The inputs' names, in errors.
    fn input_names(&self) -> [&'static str; 2] {
        ["a", "b"]
    }

    /// The output's shape for inputs of shapes `a` and `b` (by default: `a`'s, which `b`
    /// must have), or what is wrong with them (the op's error then).
    fn output_shape(&self, a: &[usize], b: &[usize]) -> std::result::Result<Vec<usize>, String> {
        let [an, bn] = self.input_names();
        match a == b {
            true => Ok(a.to_vec()),
            false => Err(format!("{bn} must have {an}'s shape {a:?}, got {b:?}")),
        }
    }

    /// Writes `y` (row-major, [`BinaryKernel::output_shape`]'s elements) from `a` and `b`.
    fn forward<T: Float + WithDType>(
        &self,
        a: &Rows<T>,
        b: &Rows<T>,
        y: &mut [T],
    ) -> tritium::Result<()>;

    /// Writes `da` and `db` (of `a`'s and `b`'s shapes) from `a`, `b` and the output's
    /// gradient `dy`. Without it, the op has no backward: autograd through it is an error
    /// naming it.
    fn backward<T: Float + WithDType>(
        &self,
        a: &Rows<T>,
        b: &Rows<T>,
        dy: &Rows<T>,
        da: &mut [T],
        db: &mut [T],
    ) -> tritium::Result<()> {
        let _ = (a, b, dy, da, db);
        Err(no_backward(self.name()))
    }
}

/// The candle op of a [`UnaryKernel`] (`x.apply_op1(KernelOp(k))`) or a [`BinaryKernel`]
/// (`a.apply_op2(&b, KernelOp(k))`), differentiable where the kernel has a backward.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KernelOp<K>(pub K);

fn no_backward(name: &str) -> tritium::Error {
    tritium::Error::Launch {
        kernel: name.into(),
        message: "has no backward kernel (UnaryKernel/BinaryKernel::backward)".into(),
    }
}

/// `shape` or the op's error naming what was wrong.
fn shape_of(op: &str, shape: std::result::Result<Vec<usize>, String>) -> Result<Shape> {
    shape.map(Shape::from).map_err(|m| op_error(op, m))
}

/// A gradient `dy` must have the op's output shape.
fn check_dy(op: &str, dy: &Layout, out: &Shape) -> Result<()> {
    match dy.dims() == out.dims() {
        true => Ok(()),
        false => Err(op_error(
            op,
            format!(
                "dy must have the output's shape {:?}, got {:?}",
                out.dims(),
                dy.dims()
            ),
        )),
    }
}

/// The storages and layouts a launch reads, checked to share one dtype.
struct Inputs<'a> {
    op: &'static str,
    all: Vec<(&'a CpuStorage, &'a Layout)>,
}

impl<'a> Inputs<'a> {
    fn new(op: &'static str, named: &[(&str, &'a CpuStorage, &'a Layout)]) -> Result<Self> {
        let dtypes: Vec<_> = named.iter().map(|(n, s, _)| (*n, s.dtype())).collect();
        same_dtype(op, &dtypes)?;
        Ok(Inputs {
            op,
            all: named.iter().map(|(_, s, l)| (*s, *l)).collect(),
        })
    }

    fn elems(&self, k: usize) -> usize {
        self.all[k].1.shape().elem_count()
    }

    /// Runs `f` with every input as [`Rows`] of the inputs' float type and zeroed output
    /// buffers of `lens` elements, one after the other; gives them as one storage.
    fn launch<F>(self, lens: &[usize], f: F) -> Result<CpuStorage>
    where
        F: for<'r> LaunchWith<'r>,
    {
        let dtype = self.all[0].0.dtype();
        let op = self.op;
        let lens = lens.to_vec();
        dispatch(
            op,
            dtype,
            Run {
                inputs: self,
                lens,
                f,
            },
        )
    }
}

/// What a launch does with the inputs' rows and its output buffers, for any float type.
trait LaunchWith<'r> {
    fn with<T: Float + WithDType>(
        &self,
        rows: &[Rows<'r, T>],
        outs: &mut [&mut [T]],
    ) -> tritium::Result<()>;
}

struct Run<'a, F> {
    inputs: Inputs<'a>,
    lens: Vec<usize>,
    f: F,
}

impl<'a, F: for<'r> LaunchWith<'r>> PerFloat for Run<'a, F> {
    type Output = CpuStorage;

    fn run<T: Float + WithDType>(self) -> Result<CpuStorage> {
        let total = self.lens.iter().sum();
        let mut out = zeros::<T>(total);
        if total > 0 {
            let rows = (self.inputs.all.iter())
                .map(|(s, l)| cpu_array::<T>(s, l))
                .collect::<Result<Vec<_>>>()?;
            let mut outs = Vec::with_capacity(self.lens.len());
            let mut rest = out.as_mut_slice();
            for &n in &self.lens {
                let (one, more) = rest.split_at_mut(n);
                outs.push(one);
                rest = more;
            }
            self.f.with(&rows, &mut outs).map_err(candle_error)?;
        }
        Ok(T::to_cpu_storage_owned(out))
    }
}

struct Forward1<'k, K>(&'k K);
impl<'r, K: UnaryKernel> LaunchWith<'r> for Forward1<'_, K> {
    fn with<T: Float + WithDType>(
        &self,
        r: &[Rows<'r, T>],
        outs: &mut [&mut [T]],
    ) -> tritium::Result<()> {
        self.0.forward(&r[0], outs[0])
    }
}

struct Backward1<'k, K>(&'k K);
impl<'r, K: UnaryKernel> LaunchWith<'r> for Backward1<'_, K> {
    fn with<T: Float + WithDType>(
        &self,
        r: &[Rows<'r, T>],
        outs: &mut [&mut [T]],
    ) -> tritium::Result<()> {
        self.0.backward(&r[0], &r[1], outs[0])
    }
}

struct Forward2<'k, K>(&'k K);
impl<'r, K: BinaryKernel> LaunchWith<'r> for Forward2<'_, K> {
    fn with<T: Float + WithDType>(
        &self,
        r: &[Rows<'r, T>],
        outs: &mut [&mut [T]],
    ) -> tritium::Result<()> {
        self.0.forward(&r[0], &r[1], outs[0])
    }
}

struct Backward2<'k, K>(&'k K);
impl<'r, K: BinaryKernel> LaunchWith<'r> for Backward2<'_, K> {
    fn with<T: Float + WithDType>(
        &self,
        r: &[Rows<'r, T>],
        outs: &mut [&mut [T]],
    ) -> tritium::Result<()> {
        let [da, db] = outs else {
            unreachable!("two gradients")
        };
        self.0.backward(&r[0], &r[1], &r[2], da, db)
    }
}

/// A unary kernel's gradient: `(x, dy) → dx`.
#[derive(Clone)]
struct Grad<K>(K);

impl<K: UnaryKernel> CustomOp1 for KernelOp<K> {
    fn name(&self) -> &'static str {
        self.0.name()
    }

    fn cpu_fwd(&self, s: &CpuStorage, l: &Layout) -> Result<(CpuStorage, Shape)> {
        let op = self.0.name();
        let shape = shape_of(op, self.0.output_shape(l.dims()))?;
        let inputs = Inputs::new(op, &[(self.0.input_name(), s, l)])?;
        Ok((
            inputs.launch(&[shape.elem_count()], Forward1(&self.0))?,
            shape,
        ))
    }

    fn bwd(&self, x: &Tensor, _y: &Tensor, dy: &Tensor) -> Result<Option<Tensor>> {
        let dy = dy.to_dtype(x.dtype())?;
        Ok(Some(x.apply_op2_no_bwd(&dy, &Grad(self.0.clone()))?))
    }
}

impl<K: UnaryKernel> CustomOp2 for Grad<K> {
    fn name(&self) -> &'static str {
        self.0.name()
    }

    fn cpu_fwd(
        &self,
        xs: &CpuStorage,
        xl: &Layout,
        ds: &CpuStorage,
        dl: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        let (op, x) = (self.0.name(), self.0.input_name());
        check_dy(op, dl, &shape_of(op, self.0.output_shape(xl.dims()))?)?;
        let inputs = Inputs::new(op, &[(x, xs, xl), ("dy", ds, dl)])?;
        let lens = [inputs.elems(0)];
        Ok((
            inputs.launch(&lens, Backward1(&self.0))?,
            xl.shape().clone(),
        ))
    }
}

/// A binary kernel's gradients: `(a, b, dy) → da, db` flattened one after the other.
#[derive(Clone)]
struct Grads<K>(K);

impl<K: BinaryKernel> CustomOp2 for KernelOp<K> {
    fn name(&self) -> &'static str {
        self.0.name()
    }

    fn cpu_fwd(
        &self,
        a: &CpuStorage,
        al: &Layout,
        b: &CpuStorage,
        bl: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        let ([an, bn], op) = (self.0.input_names(), self.0.name());
        let shape = shape_of(op, self.0.output_shape(al.dims(), bl.dims()))?;
        let names: &[(&str, &CpuStorage, &Layout)] = &[(an, a, al), (bn, b, bl)];
        let inputs = Inputs::new(op, names)?;
        Ok((
            inputs.launch(&[shape.elem_count()], Forward2(&self.0))?,
            shape,
        ))
    }

    fn bwd(
        &self,
        a: &Tensor,
        b: &Tensor,
        _y: &Tensor,
        dy: &Tensor,
    ) -> Result<(Option<Tensor>, Option<Tensor>)> {
        let dy = dy.to_dtype(a.dtype())?;
        let grads = a.apply_op3_no_bwd(b, &dy, &Grads(self.0.clone()))?;
        let na = a.elem_count();
        let da = grads.narrow(0, 0, na)?.reshape(a.shape())?;
        let db = grads.narrow(0, na, b.elem_count())?.reshape(b.shape())?;
        Ok((Some(da), Some(db)))
    }
}

impl<K: BinaryKernel> CustomOp3 for Grads<K> {
    fn name(&self) -> &'static str {
        self.0.name()
    }

    fn cpu_fwd(
        &self,
        a: &CpuStorage,
        al: &Layout,
        b: &CpuStorage,
        bl: &Layout,
        d: &CpuStorage,
        dl: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        let ([an, bn], op) = (self.0.input_names(), self.0.name());
        check_dy(
            op,
            dl,
            &shape_of(op, self.0.output_shape(al.dims(), bl.dims()))?,
        )?;
        let names: &[(&str, &CpuStorage, &Layout)] = &[(an, a, al), (bn, b, bl), ("dy", d, dl)];
        let inputs = Inputs::new(op, names)?;
        let lens = [inputs.elems(0), inputs.elems(1)];
        let total = Shape::from(lens[0] + lens[1]);
        Ok((inputs.launch(&lens, Backward2(&self.0))?, total))
    }
}
