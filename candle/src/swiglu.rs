//! SwiGLU as a candle custom op on Tritium's kernels ([`tritium_kernels::swiglu`]):
//! `gate.apply_op2(up, SwiGlu)`, or [`swiglu`], is `silu(gate) · up` elementwise (Llama's
//! MLP activation, Liger-Kernel's `swiglu`), computed in f32 whatever the dtype, with both
//! gradients under candle's autograd.

use crate::candle_error;
use crate::op::{cpu_array, dispatch, op_error, same_dtype, zeros, PerFloat};
use candle_core::backend::BackendStorage;
use candle_core::{CpuStorage, CustomOp2, CustomOp3, Layout, Result, Shape, Tensor, WithDType};
use tritium::dsl::trace::Float;
use tritium::Device;
use tritium_kernels::swiglu::{swiglu_bwd, swiglu_fwd};

/// The op's name, in its errors.
const OP: &str = "tritium-swiglu";

/// Elements per program.
const BLOCK: usize = 4096;

/// `silu(gate) · up` elementwise, `gate` and `up` of one shape and dtype (any layout).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SwiGlu;

/// [`SwiGlu`]'s gradients for `dy`, `gate` and `up`: `dgate` and `dup` stacked along a new
/// first dim of 2.
#[derive(Debug, Clone, Copy)]
struct SwiGluGrad;

/// `silu(gate) · up` elementwise, differentiable in both.
pub fn swiglu(gate: &Tensor, up: &Tensor) -> Result<Tensor> {
    gate.apply_op2(up, SwiGlu)
}

/// Every tensor has the first one's shape (names as in [`same_dtype`]).
fn same_shape(tensors: &[(&str, &Layout)]) -> Result<()> {
    let (first, l) = tensors[0];
    match tensors.iter().find(|(_, m)| m.dims() != l.dims()) {
        Some((name, m)) => Err(op_error(
            OP,
            format!(
                "{name} must have {first}'s shape {:?}, got {:?}",
                l.dims(),
                m.dims()
            ),
        )),
        None => Ok(()),
    }
}

struct Forward<'a> {
    gate: (&'a CpuStorage, &'a Layout),
    up: (&'a CpuStorage, &'a Layout),
}

impl PerFloat for Forward<'_> {
    type Output = CpuStorage;

    fn run<T: Float + WithDType>(self) -> Result<CpuStorage> {
        let n = self.gate.1.shape().elem_count();
        let mut out = zeros::<T>(n);
        if n > 0 {
            let gate = cpu_array::<T>(self.gate.0, self.gate.1)?;
            let up = cpu_array::<T>(self.up.0, self.up.1)?;
            let grid = n.div_ceil(BLOCK);
            swiglu_fwd::launch(&Device::cpu(), grid, &mut out, &gate, &up, n as i64, BLOCK)
                .map_err(candle_error)?;
        }
        Ok(T::to_cpu_storage_owned(out))
    }
}

struct Backward<'a> {
    dy: (&'a CpuStorage, &'a Layout),
    gate: (&'a CpuStorage, &'a Layout),
    up: (&'a CpuStorage, &'a Layout),
}

impl PerFloat for Backward<'_> {
    type Output = CpuStorage;

    fn run<T: Float + WithDType>(self) -> Result<CpuStorage> {
        let n = self.gate.1.shape().elem_count();
        let mut grads = zeros::<T>(2 * n);
        if n > 0 {
            let dy = cpu_array::<T>(self.dy.0, self.dy.1)?;
            let gate = cpu_array::<T>(self.gate.0, self.gate.1)?;
            let up = cpu_array::<T>(self.up.0, self.up.1)?;
            let (dgate, dup) = grads.split_at_mut(n);
            let grid = n.div_ceil(BLOCK);
            swiglu_bwd::launch(
                &Device::cpu(),
                grid,
                dgate,
                dup,
                &dy,
                &gate,
                &up,
                n as i64,
                BLOCK,
            )
            .map_err(candle_error)?;
        }
        Ok(T::to_cpu_storage_owned(grads))
    }
}

impl CustomOp2 for SwiGlu {
    fn name(&self) -> &'static str {
        OP
    }

    fn cpu_fwd(
        &self,
        gs: &CpuStorage,
        gl: &Layout,
        us: &CpuStorage,
        ul: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        same_shape(&[("gate", gl), ("up", ul)])?;
        let dtype = same_dtype(OP, &[("gate", gs.dtype()), ("up", us.dtype())])?;
        let f = Forward {
            gate: (gs, gl),
            up: (us, ul),
        };
        Ok((dispatch(OP, dtype, f)?, gl.shape().clone()))
    }

    fn bwd(
        &self,
        gate: &Tensor,
        up: &Tensor,
        _y: &Tensor,
        dy: &Tensor,
    ) -> Result<(Option<Tensor>, Option<Tensor>)> {
        let grads = dy.apply_op3_no_bwd(gate, up, &SwiGluGrad)?;
        Ok((Some(grads.get(0)?), Some(grads.get(1)?)))
    }
}

impl CustomOp3 for SwiGluGrad {
    fn name(&self) -> &'static str {
        OP
    }

    fn cpu_fwd(
        &self,
        ds: &CpuStorage,
        dl: &Layout,
        gs: &CpuStorage,
        gl: &Layout,
        us: &CpuStorage,
        ul: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        same_shape(&[("gate", gl), ("up", ul), ("dy", dl)])?;
        let dtype = same_dtype(
            OP,
            &[("gate", gs.dtype()), ("up", us.dtype()), ("dy", ds.dtype())],
        )?;
        let b = Backward {
            dy: (ds, dl),
            gate: (gs, gl),
            up: (us, ul),
        };
        let mut dims = vec![2];
        dims.extend_from_slice(gl.dims());
        Ok((dispatch(OP, dtype, b)?, Shape::from(dims)))
    }
}
