//! SwiGLU as a candle custom op on Tritium's kernels ([`tritium_kernels::swiglu`]):
//! `gate.apply_op2(up, KernelOp(SwiGlu))`, or [`swiglu`], is `silu(gate) · up` elementwise
//! (Llama's MLP activation, Liger-Kernel's `swiglu`), computed in f32 whatever the dtype,
//! with both gradients under candle's autograd: a [`BinaryKernel`], the kernels' launches
//! and nothing else.

use crate::kernel_op::{BinaryKernel, KernelOp};
use crate::on::{On, Out, Rows};
use crate::op::KernelFloat;
use candle_core::{Result, Tensor};
use tritium_kernels::swiglu::{swiglu_bwd, swiglu_fwd};

/// Elements per program.
const BLOCK: usize = 4096;

/// `silu(gate) · up` elementwise, `gate` and `up` of one shape and dtype (any layout).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SwiGlu;

/// `silu(gate) · up` elementwise, differentiable in both.
pub fn swiglu(gate: &Tensor, up: &Tensor) -> Result<Tensor> {
    gate.apply_op2(up, KernelOp(SwiGlu))
}

impl BinaryKernel for SwiGlu {
    fn name(&self) -> &'static str {
        "tritium-swiglu"
    }

    fn input_names(&self) -> [&'static str; 2] {
        ["gate", "up"]
    }

    fn forward<T: KernelFloat>(
        &self,
        on: &On,
        gate: &Rows<T>,
        up: &Rows<T>,
        y: &mut Out<T>,
    ) -> tritium::Result<()> {
        let n = y.len();
        swiglu_fwd::launch_with(
            on.device(),
            n.div_ceil(BLOCK),
            on.options(),
            y,
            gate,
            up,
            n as i64,
            BLOCK,
        )
    }

    fn backward<T: KernelFloat>(
        &self,
        on: &On,
        gate: &Rows<T>,
        up: &Rows<T>,
        dy: &Rows<T>,
        dgate: &mut Out<T>,
        dup: &mut Out<T>,
    ) -> tritium::Result<()> {
        let n = dgate.len();
        let grid = n.div_ceil(BLOCK);
        swiglu_bwd::launch_with(
            on.device(),
            grid,
            on.options(),
            dgate,
            dup,
            dy,
            gate,
            up,
            n as i64,
            BLOCK,
        )
    }
}
