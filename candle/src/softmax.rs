//! Softmax over the last dim as a candle custom op on Tritium's kernels
//! ([`tritium_kernels::softmax`]: Triton's tutorial 02 forward, and its backward
//! `dx = y · (dy − Σ y·dy)`): `x.apply_op1(SoftmaxLastDim)`, or [`softmax_last_dim`],
//! computed in f32 whatever the dtype, differentiable under candle's autograd.

use crate::candle_error;
use crate::op::{cpu_array, dispatch, op_error, same_dtype, to_i32, zeros, KernelFloat, PerFloat};
use candle_core::backend::BackendStorage;
use candle_core::{CpuStorage, CustomOp1, CustomOp2, Layout, Result, Shape, Tensor};
use tritium::dsl::trace::lang::next_power_of_2;
use tritium::{Device, LaunchOptions};
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

struct Forward<'a> {
    x: (&'a CpuStorage, &'a Layout),
}

impl PerFloat for Forward<'_> {
    type Output = CpuStorage;

    fn run<T: KernelFloat>(self) -> Result<CpuStorage> {
        let (rows, n) = rows_of(self.x.1.dims())?;
        let mut y = zeros::<T>(rows * n);
        if !y.is_empty() {
            let x = cpu_array::<T>(self.x.0, self.x.1)?;
            let n = to_i32(OP, "the last dim", n)?;
            softmax::launch_explicit(
                &Device::cpu(),
                rows,
                &LaunchOptions::default(),
                &mut y,
                &x,
                n,
                n,
                n,
                next_power_of_2(n as usize),
            )
            .map_err(candle_error)?;
        }
        Ok(T::to_cpu_storage_owned(y))
    }
}

struct Backward<'a> {
    y: (&'a CpuStorage, &'a Layout),
    dy: (&'a CpuStorage, &'a Layout),
}

impl PerFloat for Backward<'_> {
    type Output = CpuStorage;

    fn run<T: KernelFloat>(self) -> Result<CpuStorage> {
        let (rows, n) = rows_of(self.y.1.dims())?;
        let mut dx = zeros::<T>(rows * n);
        if !dx.is_empty() {
            let y = cpu_array::<T>(self.y.0, self.y.1)?;
            let dy = cpu_array::<T>(self.dy.0, self.dy.1)?;
            let n = to_i32(OP, "the last dim", n)?;
            softmax_bwd::launch(
                &Device::cpu(),
                rows,
                &mut dx,
                &y,
                &dy,
                n,
                n,
                n,
                n,
                next_power_of_2(n as usize),
            )
            .map_err(candle_error)?;
        }
        Ok(T::to_cpu_storage_owned(dx))
    }
}

impl CustomOp1 for SoftmaxLastDim {
    fn name(&self) -> &'static str {
        OP
    }

    fn cpu_fwd(&self, xs: &CpuStorage, xl: &Layout) -> Result<(CpuStorage, Shape)> {
        let y = dispatch(OP, xs.dtype(), Forward { x: (xs, xl) })?;
        Ok((y, xl.shape().clone()))
    }

    fn bwd(&self, _x: &Tensor, y: &Tensor, dy: &Tensor) -> Result<Option<Tensor>> {
        Ok(Some(y.apply_op2_no_bwd(dy, &SoftmaxGrad)?))
    }
}

impl CustomOp2 for SoftmaxGrad {
    fn name(&self) -> &'static str {
        OP
    }

    fn cpu_fwd(
        &self,
        ys: &CpuStorage,
        yl: &Layout,
        ds: &CpuStorage,
        dl: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        if yl.dims() != dl.dims() {
            return Err(op_error(
                OP,
                format!(
                    "dy must have y's shape {:?}, got {:?}",
                    yl.dims(),
                    dl.dims()
                ),
            ));
        }
        let dtype = same_dtype(OP, &[("y", ys.dtype()), ("dy", ds.dtype())])?;
        let b = Backward {
            y: (ys, yl),
            dy: (ds, dl),
        };
        Ok((dispatch(OP, dtype, b)?, yl.shape().clone()))
    }
}
