//! Kernels as candle custom ops in a few lines: implement [`UnaryKernel`] (one input) or
//! [`BinaryKernel`] (two of one shape) with the launches of a forward kernel and, for
//! autograd, a backward one, and [`KernelOp`] is the candle op: the dtype (f32, f16, bf16)
//! picked at run time, inputs read where they lie when row-major, the output of the
//! input's shape and dtype made without a copy, shapes and dtypes checked, errors as
//! candle errors naming the op.
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

/// One input, one output of the input's shape and dtype (an activation, a row-wise norm
/// without weights, …).
pub trait UnaryKernel: Clone + Send + Sync + 'static {
    /// The op's name, in candle's graph and in errors.
    fn name(&self) -> &'static str;

    /// The input's name, in errors.
    fn input_name(&self) -> &'static str {
        "x"
    }

    /// Writes `y` (row-major, `x.len()` elements) from `x`.
    fn forward<T: Float + WithDType>(&self, x: &Rows<T>, y: &mut [T]) -> tritium::Result<()>;

    /// Writes `dx` from `x` and the output's gradient `dy` (all of `x`'s shape). Without
    /// it, the op has no backward: autograd through it is an error naming it.
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

/// Two inputs of one shape and dtype, one output of that shape and dtype (a gated
/// activation, an elementwise product, …).
pub trait BinaryKernel: Clone + Send + Sync + 'static {
    /// The op's name, in candle's graph and in errors.
    fn name(&self) -> &'static str;

    /// The inputs' names, in errors.
    fn input_names(&self) -> [&'static str; 2] {
        ["a", "b"]
    }

    /// Writes `y` (row-major, `a.len()` elements) from `a` and `b`.
    fn forward<T: Float + WithDType>(
        &self,
        a: &Rows<T>,
        b: &Rows<T>,
        y: &mut [T],
    ) -> tritium::Result<()>;

    /// Writes `da` and `db` from `a`, `b` and the output's gradient `dy`. Without it, the
    /// op has no backward: autograd through it is an error naming it.
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

/// Every layout has the first one's shape (names as in [`same_dtype`]).
fn same_shape(op: &str, layouts: &[(&str, &Layout)]) -> Result<()> {
    let (first, l) = layouts[0];
    match layouts.iter().find(|(_, m)| m.dims() != l.dims()) {
        Some((name, m)) => Err(op_error(
            op,
            format!(
                "{name} must have {first}'s shape {:?}, got {:?}",
                l.dims(),
                m.dims()
            ),
        )),
        None => Ok(()),
    }
}

/// The storages and layouts a launch reads, checked to share one shape and dtype.
struct Inputs<'a> {
    op: &'static str,
    all: Vec<(&'a CpuStorage, &'a Layout)>,
}

impl<'a> Inputs<'a> {
    fn new(op: &'static str, named: &[(&str, &'a CpuStorage, &'a Layout)]) -> Result<Self> {
        let layouts: Vec<(&str, &Layout)> = named.iter().map(|(n, _, l)| (*n, *l)).collect();
        same_shape(op, &layouts)?;
        let dtypes: Vec<_> = named.iter().map(|(n, s, _)| (*n, s.dtype())).collect();
        same_dtype(op, &dtypes)?;
        Ok(Inputs {
            op,
            all: named.iter().map(|(_, s, l)| (*s, *l)).collect(),
        })
    }

    fn shape(&self) -> &Shape {
        self.all[0].1.shape()
    }

    /// Runs `f` with every input as [`Rows`] of the inputs' float type and `outputs`
    /// zeroed buffers of the inputs' element count; the buffers, one after the other, as
    /// one storage.
    fn launch<F>(self, outputs: usize, f: F) -> Result<CpuStorage>
    where
        F: for<'r> LaunchWith<'r>,
    {
        let dtype = self.all[0].0.dtype();
        let op = self.op;
        dispatch(
            op,
            dtype,
            Run {
                inputs: self,
                outputs,
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
        out: &mut [T],
        n: usize,
    ) -> tritium::Result<()>;
}

struct Run<'a, F> {
    inputs: Inputs<'a>,
    outputs: usize,
    f: F,
}

impl<'a, F: for<'r> LaunchWith<'r>> PerFloat for Run<'a, F> {
    type Output = CpuStorage;

    fn run<T: Float + WithDType>(self) -> Result<CpuStorage> {
        let n = self.inputs.shape().elem_count();
        let mut out = zeros::<T>(n * self.outputs);
        if n > 0 {
            let rows = (self.inputs.all.iter())
                .map(|(s, l)| cpu_array::<T>(s, l))
                .collect::<Result<Vec<_>>>()?;
            self.f.with(&rows, &mut out, n).map_err(candle_error)?;
        }
        Ok(T::to_cpu_storage_owned(out))
    }
}

struct Forward1<'k, K>(&'k K);
impl<'r, K: UnaryKernel> LaunchWith<'r> for Forward1<'_, K> {
    fn with<T: Float + WithDType>(
        &self,
        r: &[Rows<'r, T>],
        out: &mut [T],
        _: usize,
    ) -> tritium::Result<()> {
        self.0.forward(&r[0], out)
    }
}

struct Backward1<'k, K>(&'k K);
impl<'r, K: UnaryKernel> LaunchWith<'r> for Backward1<'_, K> {
    fn with<T: Float + WithDType>(
        &self,
        r: &[Rows<'r, T>],
        out: &mut [T],
        _: usize,
    ) -> tritium::Result<()> {
        self.0.backward(&r[0], &r[1], out)
    }
}

struct Forward2<'k, K>(&'k K);
impl<'r, K: BinaryKernel> LaunchWith<'r> for Forward2<'_, K> {
    fn with<T: Float + WithDType>(
        &self,
        r: &[Rows<'r, T>],
        out: &mut [T],
        _: usize,
    ) -> tritium::Result<()> {
        self.0.forward(&r[0], &r[1], out)
    }
}

struct Backward2<'k, K>(&'k K);
impl<'r, K: BinaryKernel> LaunchWith<'r> for Backward2<'_, K> {
    fn with<T: Float + WithDType>(
        &self,
        r: &[Rows<'r, T>],
        out: &mut [T],
        n: usize,
    ) -> tritium::Result<()> {
        let (da, db) = out.split_at_mut(n);
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
        let inputs = Inputs::new(self.0.name(), &[(self.0.input_name(), s, l)])?;
        let shape = inputs.shape().clone();
        Ok((inputs.launch(1, Forward1(&self.0))?, shape))
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
        let x = self.0.input_name();
        let inputs = Inputs::new(self.0.name(), &[(x, xs, xl), ("dy", ds, dl)])?;
        let shape = inputs.shape().clone();
        Ok((inputs.launch(1, Backward1(&self.0))?, shape))
    }
}

/// A binary kernel's gradients: `(a, b, dy) → [da, db]` stacked along a new first dim.
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
        let [an, bn] = self.0.input_names();
        let names: &[(&str, &CpuStorage, &Layout)] = &[(an, a, al), (bn, b, bl)];
        let inputs = Inputs::new(self.0.name(), names)?;
        let shape = inputs.shape().clone();
        Ok((inputs.launch(1, Forward2(&self.0))?, shape))
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
        Ok((Some(grads.get(0)?), Some(grads.get(1)?)))
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
        let [an, bn] = self.0.input_names();
        let names: &[(&str, &CpuStorage, &Layout)] = &[(an, a, al), (bn, b, bl), ("dy", d, dl)];
        let inputs = Inputs::new(self.0.name(), names)?;
        let mut dims = vec![2];
        dims.extend_from_slice(inputs.shape().dims());
        Ok((inputs.launch(2, Backward2(&self.0))?, Shape::from(dims)))
    }
}
