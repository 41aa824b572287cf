//! Tritium kernels where Rust users hold their tensors: [candle](https://github.com/huggingface/candle).
//!
//! - A kernel's `Ptr<T>` parameters take `&candle_core::Tensor` directly (the backend's
//!   `candle` feature, which this crate enables): a CPU tensor is passed where it lies, from
//!   its layout's offset with its strides, read-locked until the launch returns. Outputs are
//!   arrays or vectors made into tensors after the launch ([`tensor_from`]).
//! - [`kernel_op`] makes a kernel (and its backward) a candle op in a few lines: implement
//!   [`kernel_op::UnaryKernel`] or [`kernel_op::BinaryKernel`] with the launches, and
//!   `KernelOp(k)` is the op ([`swiglu`] is built so).
//! - [`op`] has the pieces for ops of other shapes: [`op::cpu_array`] reads a custom op's
//!   storage as an ndarray array ([`op::last_dim_contiguous`] keeps the outer strides of a
//!   view for kernels that take them), [`op::dispatch`] picks the element type.
//! - The fused ops a Llama model needs, each forward and backward on Tritium kernels
//!   (`tritium_kernels`), computed in f32 for f32, f16 and bf16 tensors and differentiable
//!   under candle's autograd: [`rms_norm`]; [`rope`] (rotary embeddings, "rotate half" as
//!   `candle_nn::rotary_emb::rope`; a transposed `(b, t, h, d)` view is read without a
//!   copy); [`swiglu`] (`silu(gate) · up`); [`softmax_last_dim`]; [`cross_entropy`] (the
//!   mean over rows not ignored, Liger-Kernel's fused version with PyTorch's
//!   `ignore_index`). Each is written once, generic over candle's storage kind: its launches
//!   run [`On`] the tensors' device with scratch buffers where they lie ([`On::zeros`]).
//!
//! Every op runs on CPU tensors; with the `cuda` feature (candle's, which links CUDA at
//! build time) CUDA tensors are kernel arguments too and every op runs on them
//! (`cuda_fwd`), queued on candle's stream. [`launch_host_ops_on`] runs the ops on CPU
//! tensors on another Tritium device (the CUDA emulator: the GPU's code on the host).
//! Errors come back as candle errors naming what was wrong (a shape, a dtype, a device).

pub mod cross_entropy;
pub mod kernel_op;
mod launches;
pub mod llama;
pub mod on;
pub mod op;
pub mod rms_norm;
pub mod rope;
pub mod softmax;
pub mod swiglu;

pub use cross_entropy::{cross_entropy, cross_entropy_with, CrossEntropy, IGNORE_INDEX};
pub use kernel_op::{BinaryKernel, KernelOp, UnaryKernel};
pub use on::{host_ops_device, launch_host_ops_on, Buffer, On, Out, Rows};
pub use op::{KernelElem, KernelFloat};
pub use rms_norm::{rms_norm, RmsNorm};
pub use rope::{rope, Rope};
pub use softmax::{softmax_last_dim, SoftmaxLastDim};
pub use swiglu::{swiglu, SwiGlu};

/// A Tritium error as a candle error (its message kept whole).
pub fn candle_error(e: tritium::Error) -> candle_core::Error {
    candle_core::Error::Msg(format!("tritium: {e}"))
}

/// A candle tensor of `shape` on the CPU holding `data`.
pub fn tensor_from<T: candle_core::WithDType>(
    data: Vec<T>,
    shape: impl Into<candle_core::Shape>,
) -> candle_core::Result<candle_core::Tensor> {
    candle_core::Tensor::from_vec(data, shape, &candle_core::Device::Cpu)
}
