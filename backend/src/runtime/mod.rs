//! The CUDA runtime every GPU user shares: devices (cudarc, with libcuda loaded at run
//! time), streams and the per-tensor use events that order work across them, device
//! tensors (one untyped [`DeviceTensor`] for kernels and AOT operators, typed as
//! [`CudaTensor`] for kernels), and PTX modules loaded once per device. Kernel launches (`cuda/`) and the
//! launch vocabulary (`launch/`: device tensors are arguments) build on it; it knows
//! nothing of code generation.

mod cudarc_slice;
pub use cudarc_slice::{SliceRange, SliceRangeMut};
mod device_tensor;
mod driver;
mod ptx;
mod stream;
mod tensor;

pub use device_tensor::DeviceTensor;
pub(crate) use driver::driver_error;
pub use driver::{unavailable_reason, CudaDevice};
pub use ptx::Ptx;
pub use stream::Stream;
pub(crate) use stream::{DeviceUse, UseTracker};
pub use tensor::CudaTensor;
