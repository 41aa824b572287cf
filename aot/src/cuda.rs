//! CUDA for `.cu` operators, through the backend's CUDA runtime (cudarc, with libcuda
//! loaded at run time), so nothing links against CUDA and machines without it build and run
//! everything else.
//!
//! A CUDA operator takes host tensors like a CPU one; around each call the runtime copies
//! inputs to device memory, allocates outputs and workspaces there (with guard bytes in
//! checked mode), passes a fresh stream of the device as `stream`, synchronizes, and copies
//! the outputs back. Or it takes and returns [`DeviceTensor`]s, the backend's device tensor
//! that kernels take too (typed, as `CudaTensor`), with no copies. The device's context is
//! its primary context, which the CUDA runtime inside an nvcc-built library uses too, so the
//! device pointers are valid on its side.

use std::sync::OnceLock;

pub use tritium_backend::cuda::DeviceTensor;
use tritium_backend::cuda::Stream;
use tritium_backend::Device;

use super::buffer::{guard_pattern, GUARD_BYTES};
use super::dtype::DType;
use super::error::{AotError, AotResult};
use super::tensor::{Tensor, TensorRef, TensorSpec};

static DEVICE: OnceLock<Result<Device, String>> = OnceLock::new();

/// The CUDA device host tensors are copied to (device 0 of `CUDA_VISIBLE_DEVICES`), or why
/// there is none.
pub(crate) fn device() -> AotResult<&'static Device> {
    DEVICE
        .get_or_init(|| Device::cuda(0).map_err(|e| e.to_string()))
        .as_ref()
        .map_err(|e| AotError::Cuda(e.clone()))
}

/// The CUDA device host tensors are copied to (device 0), to make [`DeviceTensor`]s on
/// with [`Tensor::to_device`]; an error naming why where there is none.
pub fn cuda_device() -> AotResult<Device> {
    device().cloned()
}

/// True when the CUDA driver loads and a device is present.
pub fn cuda_available() -> bool {
    device().is_ok()
}

pub(crate) fn cuda_err(e: tritium_backend::Error) -> AotError {
    AotError::Cuda(e.to_string())
}

/// Device memory of one call: a tensor whose data is the usable bytes, then `guard`
/// guard bytes of its own pattern.
pub(crate) struct DeviceBuffer {
    tensor: DeviceTensor,
    guard: usize,
    pattern: [u8; GUARD_BYTES],
}

impl DeviceBuffer {
    /// A zeroed buffer of `dtype` and `shape` on `device` followed by `guard` guard bytes
    /// (at most [`GUARD_BYTES`]), starting with `init` (if any).
    pub fn new(
        device: &Device,
        dtype: DType,
        shape: &[usize],
        guard: usize,
        init: Option<&[u8]>,
    ) -> AotResult<DeviceBuffer> {
        let guard = guard.min(GUARD_BYTES);
        let mut tensor =
            DeviceTensor::zeros_padded(device, dtype, shape, guard).map_err(cuda_err)?;
        let pattern = guard_pattern();
        let len = tensor.nbytes();
        tensor
            .write_bytes(len, &pattern[..guard])
            .map_err(cuda_err)?;
        if let Some(bytes) = init {
            let n = bytes.len().min(len);
            tensor.write_bytes(0, &bytes[..n]).map_err(cuda_err)?;
        }
        Ok(DeviceBuffer {
            tensor,
            guard,
            pattern,
        })
    }

    /// `len` bytes (u8) on `device`, with guard bytes and initial contents as in `new`.
    pub fn bytes(
        device: &Device,
        len: usize,
        guard: usize,
        init: Option<&[u8]>,
    ) -> AotResult<DeviceBuffer> {
        DeviceBuffer::new(device, DType::U8, &[len], guard, init)
    }

    /// The first guard byte that no longer holds its pattern, if any.
    pub fn overwritten_guard(&self) -> AotResult<Option<usize>> {
        if self.guard == 0 {
            return Ok(None);
        }
        let g = self
            .tensor
            .read_bytes(self.tensor.nbytes(), self.guard)
            .map_err(cuda_err)?;
        Ok(g.iter().zip(&self.pattern).position(|(b, p)| b != p))
    }

    /// The usable bytes, copied back.
    pub fn download(&self) -> AotResult<Vec<u8>> {
        self.tensor.to_bytes().map_err(cuda_err)
    }

    /// The usable length.
    pub fn len(&self) -> usize {
        self.tensor.nbytes()
    }

    pub fn tensor(&self) -> &DeviceTensor {
        &self.tensor
    }

    pub fn into_tensor(self) -> DeviceTensor {
        self.tensor
    }
}

/// Runs `f` with a fresh stream of `device` that first waits for the work other streams
/// queued on `reads` and `writes`, then records those uses, synchronizes and drops it.
pub(crate) fn with_stream<T>(
    device: &Device,
    reads: &[&DeviceTensor],
    writes: &[&DeviceTensor],
    f: impl FnOnce(&Stream) -> AotResult<T>,
) -> AotResult<T> {
    let stream = Stream::new(device).map_err(cuda_err)?;
    let uses = reads
        .iter()
        .map(|t| (t, false))
        .chain(writes.iter().map(|t| (t, true)));
    for (t, w) in uses.clone() {
        t.order_before_use(&stream, w).map_err(cuda_err)?;
    }
    let result = f(&stream);
    for (t, w) in uses {
        t.record_use(&stream, w).map_err(cuda_err)?;
    }
    let sync = stream.synchronize();
    let value = result?;
    sync.map_err(|e| AotError::Cuda(format!("the kernel (cuStreamSynchronize): {e}")))?;
    Ok(value)
}

/// Copies a host tensor to the device host tensors go to.
pub(crate) fn upload(t: &TensorRef<'_>) -> AotResult<DeviceTensor> {
    let shape: Vec<usize> = t.shape().to_vec();
    DeviceTensor::from_bytes(device()?, t.dtype(), &shape, t.as_bytes()).map_err(cuda_err)
}

impl Tensor {
    /// A copy of this host tensor in the memory of `device` (a `Device::cuda`), for
    /// [`AotOp::call_device`](super::AotOp::call_device) or a kernel launch.
    pub fn to_device(&self, device: &Device) -> AotResult<DeviceTensor> {
        DeviceTensor::from_bytes(device, self.dtype(), self.shape(), self.as_bytes())
            .map_err(cuda_err)
    }

    /// A host copy of a device tensor (after the launches queued so far that write it).
    pub fn from_device(t: &DeviceTensor) -> AotResult<Tensor> {
        let bytes = t.to_bytes().map_err(cuda_err)?;
        Tensor::from_bytes(t.dtype(), t.shape(), &bytes)
    }
}

/// The shape and dtype of a device tensor.
pub(crate) fn spec(t: &DeviceTensor) -> TensorSpec {
    TensorSpec::new(
        t.shape().iter().map(|&d| d as i64).collect::<Vec<_>>(),
        t.dtype(),
    )
}
