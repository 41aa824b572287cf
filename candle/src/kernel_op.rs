//! Kernels as candle custom ops in a few lines: implement [`UnaryKernel`] (one input) or
//! [`BinaryKernel`] (two) with the launches of a forward kernel and, for autograd, a
//! backward one, and [`KernelOp`] is the candle op: the dtype (f32, f16, bf16) picked at
//! run time, inputs read where they lie when row-major, the output (of the input's shape,
//! or of the kernel's `output_shape`: a reduction, a product of differently shaped
//! operands) made without a copy, shapes and dtypes checked, errors as candle errors
//! naming the op. The same launches serve CPU tensors (`cpu_fwd`) and, with the `cuda`
//! feature, CUDA ones (`cuda_fwd`): a kernel launches on [`On::device`] with
//! [`On::options`] (for CUDA, candle's device and stream), reading [`Rows`] and writing
//! [`Out`] buffers of either.
//!
//! ```ignore
//! #[derive(Clone)]
//! struct Gelu;
//! impl UnaryKernel for Gelu {
//!     fn name(&self) -> &'static str { "gelu" }
//!     fn forward<T: KernelFloat>(&self, on: &On, x: &Rows<T>, y: &mut Out<T>) -> tritium::Result<()> {
//!         let n = y.len();
//!         gelu_erf::launch_with(on.device(), n.div_ceil(1024), on.options(), y, x, n as i32, 1024)
//!     }
//!     fn backward<T: KernelFloat>(&self, on: &On, x: &Rows<T>, dy: &Rows<T>, dx: &mut Out<T>) -> tritium::Result<()> {
//!         let n = dx.len();
//!         gelu_erf_bwd::launch_with(on.device(), n.div_ceil(1024), on.options(), dx, x, dy, n as i32, 1024)
//!     }
//! }
//! let y = x.apply_op1(KernelOp(Gelu))?; // differentiable under candle's autograd
//! ```

use crate::launches::{check_dy, forwards, Inputs, LaunchWith, Launches};
pub use crate::on::{On, Out, Rows};
use crate::op::{op_error, KernelFloat};
use candle_core::{CustomOp1, CustomOp2, CustomOp3, Layout, Result, Shape, Tensor};

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

    /// Writes `y` (row-major, [`UnaryKernel::output_shape`]'s elements) from `x`, launching
    /// on `on`.
    fn forward<T: KernelFloat>(&self, on: &On, x: &Rows<T>, y: &mut Out<T>) -> tritium::Result<()>;

    /// Writes `dx` (of `x`'s shape) from `x` and the output's gradient `dy` (of the
    /// output's shape). Without it, the op has no backward: autograd through it is an
    /// error naming it.
    fn backward<T: KernelFloat>(
        &self,
        on: &On,
        x: &Rows<T>,
        dy: &Rows<T>,
        dx: &mut Out<T>,
    ) -> tritium::Result<()> {
        let _ = (on, x, dy, dx);
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

    /// Writes `y` (row-major, [`BinaryKernel::output_shape`]'s elements) from `a` and `b`,
    /// launching on `on`.
    fn forward<T: KernelFloat>(
        &self,
        on: &On,
        a: &Rows<T>,
        b: &Rows<T>,
        y: &mut Out<T>,
    ) -> tritium::Result<()>;

    /// Writes `da` and `db` (of `a`'s and `b`'s shapes) from `a`, `b` and the output's
    /// gradient `dy`. Without it, the op has no backward: autograd through it is an error
    /// naming it.
    fn backward<T: KernelFloat>(
        &self,
        on: &On,
        a: &Rows<T>,
        b: &Rows<T>,
        dy: &Rows<T>,
        da: &mut Out<T>,
        db: &mut Out<T>,
    ) -> tritium::Result<()> {
        let _ = (on, a, b, dy, da, db);
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

struct Forward1<'k, K>(&'k K);
impl<K: UnaryKernel> LaunchWith for Forward1<'_, K> {
    type Output<T: KernelFloat> = T;

    fn with<T: KernelFloat>(
        &self,
        on: &On,
        r: &[Rows<'_, T>],
        outs: &mut [Out<'_, T>],
    ) -> tritium::Result<()> {
        self.0.forward(on, &r[0], &mut outs[0])
    }
}

struct Backward1<'k, K>(&'k K);
impl<K: UnaryKernel> LaunchWith for Backward1<'_, K> {
    type Output<T: KernelFloat> = T;

    fn with<T: KernelFloat>(
        &self,
        on: &On,
        r: &[Rows<'_, T>],
        outs: &mut [Out<'_, T>],
    ) -> tritium::Result<()> {
        self.0.backward(on, &r[0], &r[1], &mut outs[0])
    }
}

struct Forward2<'k, K>(&'k K);
impl<K: BinaryKernel> LaunchWith for Forward2<'_, K> {
    type Output<T: KernelFloat> = T;

    fn with<T: KernelFloat>(
        &self,
        on: &On,
        r: &[Rows<'_, T>],
        outs: &mut [Out<'_, T>],
    ) -> tritium::Result<()> {
        self.0.forward(on, &r[0], &r[1], &mut outs[0])
    }
}

struct Backward2<'k, K>(&'k K);
impl<K: BinaryKernel> LaunchWith for Backward2<'_, K> {
    type Output<T: KernelFloat> = T;

    fn with<T: KernelFloat>(
        &self,
        on: &On,
        r: &[Rows<'_, T>],
        outs: &mut [Out<'_, T>],
    ) -> tritium::Result<()> {
        let [da, db] = outs else {
            unreachable!("two gradients")
        };
        self.0.backward(on, &r[0], &r[1], &r[2], da, db)
    }
}

/// A unary kernel's gradient: `(x, dy) → dx`.
#[derive(Clone)]
struct Grad<K>(K);

impl<K: UnaryKernel> KernelOp<K> {
    fn forward<S: Launches>(&self, s: &S, l: &Layout) -> Result<(S, Shape)> {
        let op = self.0.name();
        let shape = shape_of(op, self.0.output_shape(l.dims()))?;
        let inputs = Inputs::new(op, &[(self.0.input_name(), s, l)])?;
        let out = S::launch(inputs, &[shape.elem_count()], Forward1(&self.0))?;
        Ok((out, shape))
    }
}

impl<K: UnaryKernel> CustomOp1 for KernelOp<K> {
    fn name(&self) -> &'static str {
        self.0.name()
    }

    forwards!(forward(s, l));

    fn bwd(&self, x: &Tensor, _y: &Tensor, dy: &Tensor) -> Result<Option<Tensor>> {
        let dy = dy.to_dtype(x.dtype())?;
        Ok(Some(x.apply_op2_no_bwd(&dy, &Grad(self.0.clone()))?))
    }
}

impl<K: UnaryKernel> Grad<K> {
    fn forward<S: Launches>(&self, xs: &S, xl: &Layout, ds: &S, dl: &Layout) -> Result<(S, Shape)> {
        let (op, x) = (self.0.name(), self.0.input_name());
        let out_shape = shape_of(op, self.0.output_shape(xl.dims()))?;
        check_dy(op, dl, "the output", out_shape.dims())?;
        let inputs = Inputs::new(op, &[(x, xs, xl), ("dy", ds, dl)])?;
        let lens = [inputs.elems(0)];
        Ok((
            S::launch(inputs, &lens, Backward1(&self.0))?,
            xl.shape().clone(),
        ))
    }
}

impl<K: UnaryKernel> CustomOp2 for Grad<K> {
    fn name(&self) -> &'static str {
        self.0.name()
    }

    forwards!(forward(xs, xl, ds, dl));
}

/// A binary kernel's gradients: `(a, b, dy) → da, db` flattened one after the other.
#[derive(Clone)]
struct Grads<K>(K);

impl<K: BinaryKernel> KernelOp<K> {
    fn forward2<S: Launches>(&self, a: &S, al: &Layout, b: &S, bl: &Layout) -> Result<(S, Shape)> {
        let ([an, bn], op) = (self.0.input_names(), self.0.name());
        let shape = shape_of(op, self.0.output_shape(al.dims(), bl.dims()))?;
        let inputs = Inputs::new(op, &[(an, a, al), (bn, b, bl)])?;
        let out = S::launch(inputs, &[shape.elem_count()], Forward2(&self.0))?;
        Ok((out, shape))
    }
}

impl<K: BinaryKernel> CustomOp2 for KernelOp<K> {
    fn name(&self) -> &'static str {
        self.0.name()
    }

    forwards!(forward2(a, al, b, bl));

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

impl<K: BinaryKernel> Grads<K> {
    #[allow(clippy::too_many_arguments)]
    fn forward<S: Launches>(
        &self,
        a: &S,
        al: &Layout,
        b: &S,
        bl: &Layout,
        d: &S,
        dl: &Layout,
    ) -> Result<(S, Shape)> {
        let ([an, bn], op) = (self.0.input_names(), self.0.name());
        let out_shape = shape_of(op, self.0.output_shape(al.dims(), bl.dims()))?;
        check_dy(op, dl, "the output", out_shape.dims())?;
        let inputs = Inputs::new(op, &[(an, a, al), (bn, b, bl), ("dy", d, dl)])?;
        let lens = [inputs.elems(0), inputs.elems(1)];
        let total = Shape::from(lens[0] + lens[1]);
        Ok((S::launch(inputs, &lens, Backward2(&self.0))?, total))
    }
}

impl<K: BinaryKernel> CustomOp3 for Grads<K> {
    fn name(&self) -> &'static str {
        self.0.name()
    }

    forwards!(forward(a, al, b, bl, d, dl));
}
