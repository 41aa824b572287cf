//! Softmax over the last dim as a candle custom op on Tritium's kernels
//! ([`tritium_kernels::softmax`]: Triton's tutorial 02 forward, and its backward
//! `dx = y · (dy − Σ y·dy)`): `x.apply_op1(SoftmaxLastDim)`, or [`softmax_last_dim`],
//! computed in f32 whatever the dtype, differentiable under candle's autograd.

use crate::launches::{check_dy, forwards, Inputs, LaunchWith, Launches};
use crate::on::{On, Out, Rows};
use crate::op::{op_error, to_i32, KernelFloat};
use candle_core::{CustomOp1, CustomOp2, Layout, Result, Shape, Tensor};
use tritium::dsl::trace::lang::next_power_of_2;
use tritium_kernels::softmax::{softmax, softmax_bwd};

/// The op's name, in its errors.
const OP: &str = "tritium-softmax";

/// Softmax over the last dim of a tensor of any layout and rank ≥ 1.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SoftmaxLastDim;

/// [`SoftmaxLastDim`]'s gradient for `y` (the softmax) and `dy`.
#[derive(Debug, Clone, Copy)]
struct SoftmaxGrad;

/// Softmax over `x`'s last dim (`candle_nn::ops::softmax_last_dim`), differentiable.
pub fn softmax_last_dim(x: &Tensor) -> Result<Tensor> {
    x.apply_op1(SoftmaxLastDim)
}

/// Rows and their length.
fn rows_of(dims: &[usize]) -> Result<(usize, usize)> {
    match dims.split_last() {
        Some((&n, rest)) => Ok((rest.iter().product(), n)),
        None => Err(op_error(
            OP,
            "takes a tensor of at least one dim, got a scalar",
        )),
    }
}

/// The forward launch: `y` from `x`'s rows, one program per row.
struct Forward {
    rows: usize,
    n: i32,
}

impl LaunchWith for Forward {
    type Output<T: KernelFloat> = T;

    fn with<T: KernelFloat>(
        &self,
        on: &On,
        r: &[Rows<'_, T>],
        outs: &mut [Out<'_, T>],
    ) -> tritium::Result<()> {
        let (n, block) = (self.n, next_power_of_2(self.n as usize));
        let (device, options) = (on.device(), on.options());
        softmax::launch_explicit(
            device,
            self.rows,
            options,
            &mut outs[0],
            &r[0],
            n,
            n,
            n,
            block,
        )
    }
}

/// The backward launch: `dx = y · (dy − Σ y·dy)` from `y` and `dy`.
struct Backward {
    rows: usize,
    n: i32,
}

impl LaunchWith for Backward {
    type Output<T: KernelFloat> = T;

    fn with<T: KernelFloat>(
        &self,
        on: &On,
        r: &[Rows<'_, T>],
        outs: &mut [Out<'_, T>],
    ) -> tritium::Result<()> {
        let (n, block) = (self.n, next_power_of_2(self.n as usize));
        let (device, options) = (on.device(), on.options());
        let (dx, y, dy) = (&mut outs[0], &r[0], &r[1]);
        softmax_bwd::launch_with(device, self.rows, options, dx, y, dy, n, n, n, n, block)
    }
}

impl SoftmaxLastDim {
    fn forward<S: Launches>(&self, xs: &S, xl: &Layout) -> Result<(S, Shape)> {
        let (rows, n) = rows_of(xl.dims())?;
        let inputs = Inputs::new(OP, &[("x", xs, xl)])?;
        let n = to_i32(OP, "the last dim", n)?;
        let y = S::launch(inputs, &[rows * n as usize], Forward { rows, n })?;
        Ok((y, xl.shape().clone()))
    }
}

impl CustomOp1 for SoftmaxLastDim {
    fn name(&self) -> &'static str {
        OP
    }

    forwards!(forward(xs, xl));

    fn bwd(&self, _x: &Tensor, y: &Tensor, dy: &Tensor) -> Result<Option<Tensor>> {
        Ok(Some(y.apply_op2_no_bwd(dy, &SoftmaxGrad)?))
    }
}

impl SoftmaxGrad {
    fn forward<S: Launches>(&self, ys: &S, yl: &Layout, ds: &S, dl: &Layout) -> Result<(S, Shape)> {
        check_dy(OP, dl, "y", yl.dims())?;
        let (rows, n) = rows_of(yl.dims())?;
        let inputs = Inputs::new(OP, &[("y", ys, yl), ("dy", ds, dl)])?;
        let n = to_i32(OP, "the last dim", n)?;
        let dx = S::launch(inputs, &[rows * n as usize], Backward { rows, n })?;
        Ok((dx, yl.shape().clone()))
    }
}

impl CustomOp2 for SoftmaxGrad {
    fn name(&self) -> &'static str {
        OP
    }

    forwards!(forward(ys, yl, ds, dl));
}
