//! RMSNorm as a candle custom op on Tritium's kernels ([`tritium_kernels::rms_norm`]):
//! `x.apply_op2(&w, RmsNorm { eps })`, or [`rms_norm`], normalizes `x` over its last dim
//! and scales by `w`, with its backward (`dx` and `dw`) under candle's autograd.

use crate::candle_error;
use crate::op::{cpu_array, dispatch, on_cpu, same_dtype, zeros, KernelFloat, PerFloat};
use candle_core::backend::BackendStorage;
use candle_core::{CpuStorage, CustomOp2, Layout, Result, Shape, Tensor};
use tritium::dsl::trace::lang::next_power_of_2;
use tritium::Device;
use tritium_kernels::rms_norm::{rms_norm_bwd, rms_norm_fwd};

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

/// Rows and their length: `x`'s last dim must be `w`'s one dim.
fn rows_of(x: &[usize], w: &[usize]) -> Result<(usize, usize)> {
    let n = x.last().copied().unwrap_or(1);
    if w != [n] {
        return Err(candle_core::Error::Msg(format!(
            "tritium-rms-norm: w must have shape [{n}] (x's last dim), got {w:?}"
        )));
    }
    let rows = x[..x.len().saturating_sub(1)].iter().product();
    Ok((rows, n))
}

/// Elements per program: the row, rounded up to a power of two.
fn block(n: usize) -> usize {
    next_power_of_2(n.max(1))
}

struct Forward<'a> {
    x: (&'a CpuStorage, &'a Layout),
    w: (&'a CpuStorage, &'a Layout),
    rows: usize,
    n: usize,
    eps: f32,
}

impl PerFloat for Forward<'_> {
    type Output = (CpuStorage, Vec<f32>);

    fn run<T: KernelFloat>(self) -> Result<Self::Output> {
        let x = cpu_array::<T>(self.x.0, self.x.1)?;
        let w = cpu_array::<T>(self.w.0, self.w.1)?;
        let mut y = zeros::<T>(self.rows * self.n);
        let mut rstd = vec![0f32; self.rows];
        rms_norm_fwd::launch(
            &Device::cpu(),
            self.rows.max(1),
            &mut y,
            &mut rstd,
            &x,
            &w,
            self.n as i32,
            self.eps,
            block(self.n),
        )
        .map_err(candle_error)?;
        Ok((T::to_cpu_storage_owned(y), rstd))
    }
}

struct Backward<'a> {
    x: &'a Tensor,
    w: &'a Tensor,
    dy: &'a Tensor,
    rows: usize,
    n: usize,
    eps: f32,
}

impl PerFloat for Backward<'_> {
    type Output = (Tensor, Tensor);

    fn run<T: KernelFloat>(self) -> Result<Self::Output> {
        let (rows, n) = (self.rows, self.n);
        let grads = on_cpu(OP, self.x, |xs, xl| {
            on_cpu(OP, self.w, |ws, wl| {
                on_cpu(OP, self.dy, |ds, dl| {
                    let (x, w, dy) = (
                        cpu_array::<T>(xs, xl)?,
                        cpu_array::<T>(ws, wl)?,
                        cpu_array::<T>(ds, dl)?,
                    );
                    let (_, rstd) = Forward {
                        x: (xs, xl),
                        w: (ws, wl),
                        rows,
                        n,
                        eps: self.eps,
                    }
                    .run::<T>()?;
                    let mut dx = zeros::<T>(rows * n);
                    let mut dw_rows = vec![0f32; rows * n];
                    rms_norm_bwd::launch(
                        &Device::cpu(),
                        rows.max(1),
                        &mut dx,
                        &mut dw_rows,
                        &dy,
                        &x,
                        &w,
                        &rstd,
                        n as i32,
                        block(n),
                    )
                    .map_err(candle_error)?;
                    Ok((dx, dw_rows))
                })
            })
        })?;
        let (dx, dw_rows) = grads;
        let dx = Tensor::from_vec(dx, self.x.shape(), self.x.device())?;
        let dw = Tensor::from_vec(dw_rows, (rows, n), self.x.device())?
            .sum(0)?
            .to_dtype(self.w.dtype())?;
        Ok((dx, dw))
    }
}

impl CustomOp2 for RmsNorm {
    fn name(&self) -> &'static str {
        OP
    }

    fn cpu_fwd(
        &self,
        xs: &CpuStorage,
        xl: &Layout,
        ws: &CpuStorage,
        wl: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        let (rows, n) = rows_of(xl.dims(), wl.dims())?;
        same_dtype(OP, &[("x", xs.dtype()), ("w", ws.dtype())])?;
        let f = Forward {
            x: (xs, xl),
            w: (ws, wl),
            rows,
            n,
            eps: self.eps,
        };
        let (y, _) = dispatch(self.name(), xs.dtype(), f)?;
        Ok((y, xl.shape().clone()))
    }

    fn bwd(
        &self,
        x: &Tensor,
        w: &Tensor,
        _y: &Tensor,
        dy: &Tensor,
    ) -> Result<(Option<Tensor>, Option<Tensor>)> {
        let (rows, n) = rows_of(x.dims(), w.dims())?;
        let dy = dy.to_dtype(x.dtype())?;
        let b = Backward {
            x,
            w,
            dy: &dy,
            rows,
            n,
            eps: self.eps,
        };
        let (dx, dw) = dispatch(self.name(), x.dtype(), b)?;
        Ok((Some(dx), Some(dw)))
    }
}
