//! RMSNorm as a candle custom op on Tritium's kernels ([`tritium_kernels::rms_norm`]):
//! `x.apply_op2(&w, RmsNorm { eps })`, or [`rms_norm`], normalizes `x` over its last dim
//! and scales by `w`, with its backward (`dx` and `dw`) under candle's autograd.

use crate::launches::{check_dy, forwards, Inputs, LaunchWith, Launches};
use crate::on::{On, Out, Rows};
use crate::op::{op_error, to_i32, KernelFloat};
use candle_core::{CustomOp2, CustomOp3, Layout, Result, Shape, Tensor};
use tritium::dsl::trace::lang::next_power_of_2;
use tritium_kernels::rms_norm::{rms_norm_bwd, rms_norm_bwd_dw, rms_norm_fwd};

/// The op's name, in its errors.
const OP: &str = "tritium-rms-norm";

/// `x / sqrt(mean(x²) + eps) · w` over the last dim (Llama's RMSNorm).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RmsNorm {
    /// Added to the mean square.
    pub eps: f32,
}

/// `x` normalized over its last dim and scaled by `w` (`[n]`), differentiable in both.
pub fn rms_norm(x: &Tensor, w: &Tensor, eps: f32) -> Result<Tensor> {
    x.apply_op2(w, RmsNorm { eps })
}

/// [`RmsNorm`]'s gradients `dx` and `dw` (one after the other) for `x`, `w` and `dy`.
#[derive(Debug, Clone, Copy)]
struct RmsNormGrad(RmsNorm);

/// Rows and their length: `x`'s last dim must be `w`'s one dim.
fn rows_of(x: &[usize], w: &[usize]) -> Result<(usize, i32)> {
    let n = x.last().copied().unwrap_or(1);
    if w != [n] {
        return Err(op_error(
            OP,
            format!("w must have shape [{n}] (x's last dim), got {w:?}"),
        ));
    }
    let rows = x[..x.len().saturating_sub(1)].iter().product();
    Ok((rows, to_i32(OP, "the last dim", n)?))
}

/// Elements per program: the row, rounded up to a power of two.
fn block(n: i32) -> usize {
    next_power_of_2(n.max(1) as usize)
}

/// Rows of `dw`'s partial sums per step, and its columns per program.
fn dw_blocks(n: i32) -> (usize, usize) {
    (16, block(n).min(128))
}

/// The forward launch: `y` from `x` and `w`, one program per row.
struct Forward {
    rows: usize,
    n: i32,
    eps: f32,
}

impl LaunchWith for Forward {
    type Output<T: KernelFloat> = T;

    fn with<T: KernelFloat>(
        &self,
        on: &On,
        r: &[Rows<'_, T>],
        outs: &mut [Out<'_, T>],
    ) -> tritium::Result<()> {
        let (device, options) = (on.device(), on.options());
        let (rows, n, eps) = (self.rows, self.n, self.eps);
        let mut rstd = on.zeros::<f32>(rows)?;
        let (y, x, w) = (&mut outs[0], &r[0], &r[1]);
        rms_norm_fwd::launch_with(device, rows, options, y, &mut rstd, x, w, n, eps, block(n))
    }
}

/// The backward launches: the forward's `rstd` again, then `dx` and each row's share of
/// `dw`, then `dw` as their column sums.
struct Backward {
    rows: usize,
    /// `rows` as the column sums' `i32`.
    rows_i32: i32,
    n: i32,
    eps: f32,
}

impl LaunchWith for Backward {
    type Output<T: KernelFloat> = T;

    fn with<T: KernelFloat>(
        &self,
        on: &On,
        r: &[Rows<'_, T>],
        outs: &mut [Out<'_, T>],
    ) -> tritium::Result<()> {
        let (device, options) = (on.device(), on.options());
        let (rows, n, eps) = (self.rows, self.n, self.eps);
        let (x, w, dy) = (&r[0], &r[1], &r[2]);
        let [dx, dw] = outs else {
            unreachable!("two gradients")
        };
        let (mut y, mut rstd) = (on.zeros::<T>(rows * n as usize)?, on.zeros::<f32>(rows)?);
        let b = block(n);
        rms_norm_fwd::launch_with(device, rows, options, &mut y, &mut rstd, x, w, n, eps, b)?;
        let mut dw_rows = on.zeros::<f32>(rows * n as usize)?;
        let rstd = &rstd;
        rms_norm_bwd::launch_with(
            device,
            rows,
            options,
            dx,
            &mut dw_rows,
            dy,
            x,
            w,
            rstd,
            n,
            b,
        )?;
        let (block_m, block_n) = dw_blocks(n);
        let grid = (n as usize).div_ceil(block_n);
        let m = self.rows_i32;
        rms_norm_bwd_dw::launch_with(device, grid, options, dw, &dw_rows, m, n, block_m, block_n)
    }
}

impl RmsNorm {
    fn forward<S: Launches>(&self, xs: &S, xl: &Layout, ws: &S, wl: &Layout) -> Result<(S, Shape)> {
        let (rows, n) = rows_of(xl.dims(), wl.dims())?;
        let inputs = Inputs::new(OP, &[("x", xs, xl), ("w", ws, wl)])?;
        let f = Forward {
            rows,
            n,
            eps: self.eps,
        };
        let y = S::launch(inputs, &[rows * n as usize], f)?;
        Ok((y, xl.shape().clone()))
    }
}

impl CustomOp2 for RmsNorm {
    fn name(&self) -> &'static str {
        OP
    }

    forwards!(forward(xs, xl, ws, wl));

    fn bwd(
        &self,
        x: &Tensor,
        w: &Tensor,
        _y: &Tensor,
        dy: &Tensor,
    ) -> Result<(Option<Tensor>, Option<Tensor>)> {
        let dy = dy.to_dtype(x.dtype())?;
        let grads = x.apply_op3_no_bwd(w, &dy, &RmsNormGrad(*self))?;
        let nx = x.elem_count();
        let dx = grads.narrow(0, 0, nx)?.reshape(x.shape())?;
        let dw = grads.narrow(0, nx, w.elem_count())?.reshape(w.shape())?;
        Ok((Some(dx), Some(dw)))
    }
}

impl RmsNormGrad {
    #[allow(clippy::too_many_arguments)]
    fn forward<S: Launches>(
        &self,
        xs: &S,
        xl: &Layout,
        ws: &S,
        wl: &Layout,
        ds: &S,
        dl: &Layout,
    ) -> Result<(S, Shape)> {
        let (rows, n) = rows_of(xl.dims(), wl.dims())?;
        check_dy(OP, dl, "x", xl.dims())?;
        let inputs = Inputs::new(OP, &[("x", xs, xl), ("w", ws, wl), ("dy", ds, dl)])?;
        let lens = [inputs.elems(0), inputs.elems(1)];
        let f = Backward {
            rows,
            rows_i32: to_i32(OP, "the number of rows", rows)?,
            n,
            eps: self.0.eps,
        };
        let total = Shape::from(lens[0] + lens[1]);
        Ok((S::launch(inputs, &lens, f)?, total))
    }
}

impl CustomOp3 for RmsNormGrad {
    fn name(&self) -> &'static str {
        OP
    }

    forwards!(forward(xs, xl, ws, wl, ds, dl));
}
