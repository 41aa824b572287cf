//! The one device tensor: bytes in the memory of one CUDA device with a dtype and a
//! row-major shape known at run time. Kernels take it typed ([`CudaTensor`], a view of
//! the same allocation); AOT operators take and return it as is, so either can feed the
//! other without copies. Its [`UseTracker`] orders every user's streams (see
//! [`super::Stream`]).

use super::driver::{driver_error, CudaDevice};
use super::{CudaTensor, Stream, UseTracker};
use crate::{Device, Error, Result};
use cudarc::driver::{CudaSlice, DevicePtr};
use ndarray::{ArrayBase, Data, Dimension};
use std::sync::Arc;
use tritium_dsl::trace::Element;
use tritium_dsl::DType;

/// A row-major tensor whose element type is known at run time, in the memory of one CUDA
/// device. Its allocation may be longer than its data (`padding` bytes after it, for
/// guard patterns, or an upper-bound output trimmed to its final shape).
pub struct DeviceTensor {
    pub(super) device: Arc<CudaDevice>,
    bytes: CudaSlice<u8>,
    /// `bytes`' device address, read once: cudarc's `device_ptr` queues event work on a
    /// stream at every call, and launches order themselves through `uses` instead.
    address: u64,
    dtype: DType,
    shape: Vec<usize>,
    /// The allocation's length in bytes (at least the data's).
    capacity: usize,
    pub(super) uses: UseTracker,
}

impl Drop for DeviceTensor {
    fn drop(&mut self) {
        // The memory is freed in order on the default stream: after launches queued on
        // other streams that may still use it. Errors can't be returned from `drop`; the
        // driver reports a failed kernel at the next synchronization anyway.
        let _ = self.uses.order_before(self.device.stream(), true);
    }
}

impl std::fmt::Debug for DeviceTensor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "DeviceTensor<{}>{:?} on {:?}",
            self.dtype, self.shape, self.device
        )
    }
}

pub(super) fn cuda_device(device: &Device) -> Result<&Arc<CudaDevice>> {
    match device {
        Device::Cuda(d) => Ok(d),
        other => Err(Error::Device(format!(
            "a device tensor lives on a CUDA device, not on {}",
            other.name()
        ))),
    }
}

/// The bytes of `shape`'s elements of `dtype`, or an error naming the overflow.
fn data_bytes(dtype: DType, shape: &[usize]) -> Result<usize> {
    shape
        .iter()
        .try_fold(dtype.size_bytes(), |n, &d| n.checked_mul(d))
        .ok_or_else(|| {
            Error::Device(format!(
                "a {dtype} tensor of shape {shape:?} has more bytes than memory can hold"
            ))
        })
}

impl DeviceTensor {
    /// A zero-filled tensor of `dtype` and `shape` on `device` (a [`Device::cuda`]).
    pub fn zeros(device: &Device, dtype: DType, shape: &[usize]) -> Result<DeviceTensor> {
        DeviceTensor::zeros_padded(device, dtype, shape, 0)
    }

    /// [`DeviceTensor::zeros`] with `padding` more zeroed bytes after the data, which
    /// [`DeviceTensor::read_bytes`] and [`DeviceTensor::write_bytes`] reach.
    pub fn zeros_padded(
        device: &Device,
        dtype: DType,
        shape: &[usize],
        padding: usize,
    ) -> Result<DeviceTensor> {
        let d = cuda_device(device)?;
        let capacity = data_bytes(dtype, shape)?
            .checked_add(padding)
            .ok_or_else(|| Error::Device(format!("{padding} bytes of padding overflow")))?;
        let bytes = d.alloc_on(d.stream(), capacity)?;
        let address = bytes.device_ptr(d.stream()).0;
        let t = DeviceTensor {
            device: d.clone(),
            bytes,
            address,
            dtype,
            shape: shape.to_vec(),
            capacity,
            uses: UseTracker::default(),
        };
        // The zeroing is queued on the default stream: launches on other streams wait.
        t.uses.record(d.stream(), true)?;
        Ok(t)
    }

    /// A tensor holding `bytes` (exactly `shape`'s elements of `dtype`) on `device`.
    pub fn from_bytes(
        device: &Device,
        dtype: DType,
        shape: &[usize],
        bytes: &[u8],
    ) -> Result<DeviceTensor> {
        let mut t = DeviceTensor::zeros(device, dtype, shape)?;
        if bytes.len() != t.nbytes() {
            return Err(Error::Device(format!(
                "{} bytes for a {dtype} tensor of shape {shape:?} ({} bytes)",
                bytes.len(),
                t.nbytes()
            )));
        }
        t.write_bytes(0, bytes)?;
        Ok(t)
    }

    /// A copy of `a` (any layout) on `device`.
    pub fn from_ndarray<T: Element, S: Data<Elem = T>, D: Dimension>(
        device: &Device,
        a: &ArrayBase<S, D>,
    ) -> Result<DeviceTensor> {
        let host: Vec<T> = a.iter().copied().collect();
        // SAFETY: `T` is a plain numeric element; its bytes are initialized.
        let bytes = unsafe {
            std::slice::from_raw_parts(host.as_ptr().cast::<u8>(), std::mem::size_of_val(&*host))
        };
        DeviceTensor::from_bytes(device, T::DTYPE, a.shape(), bytes)
    }

    /// The data's bytes, copied to the host after the launches queued so far (on any
    /// stream) that write the tensor.
    pub fn to_bytes(&self) -> Result<Vec<u8>> {
        self.read_bytes(0, self.nbytes())
    }

    /// `len` bytes of the allocation from `offset` (the padding too), copied to the host
    /// after the launches queued so far that write the tensor.
    pub fn read_bytes(&self, offset: usize, len: usize) -> Result<Vec<u8>> {
        let range = self.range(offset, len)?;
        let mut out = vec![0u8; len];
        if len == 0 {
            return Ok(out);
        }
        self.device.bind()?;
        self.uses.order_before(self.device.stream(), false)?;
        self.device
            .stream()
            .memcpy_dtoh(&self.bytes.slice(range), &mut out)
            .map_err(|e| driver_error("copying a tensor from the GPU", e))?;
        self.device.synchronize()?;
        Ok(out)
    }

    /// Copies `bytes` into the allocation at `offset` (the padding too), after the
    /// launches queued so far that use the tensor; returns once written.
    pub fn write_bytes(&mut self, offset: usize, bytes: &[u8]) -> Result<()> {
        let range = self.range(offset, bytes.len())?;
        if bytes.is_empty() {
            return Ok(());
        }
        self.device.bind()?;
        let stream = self.device.stream().clone();
        self.uses.order_before(&stream, true)?;
        let mut view = self.bytes.slice_mut(range);
        stream
            .memcpy_htod(bytes, &mut view)
            .map_err(|e| driver_error("copying a tensor to the GPU", e))?;
        self.device.synchronize()
    }

    /// Copies `src` (same dtype and element count) into this tensor on the device's
    /// default stream, after the launches queued so far that use either; returns once
    /// queued.
    pub fn copy_from(&mut self, src: &DeviceTensor) -> Result<()> {
        if src.dtype != self.dtype
            || src.numel() != self.numel()
            || src.device.ordinal() != self.device.ordinal()
        {
            return Err(Error::Device(format!(
                "copy_from: a {} {:?} tensor on CUDA device {} into a {} {:?} tensor on device {}",
                src.dtype,
                src.shape,
                src.device.ordinal(),
                self.dtype,
                self.shape,
                self.device.ordinal()
            )));
        }
        let bytes = self.nbytes();
        if bytes == 0 {
            return Ok(());
        }
        let stream = self.device.stream().clone();
        self.device.bind()?;
        src.uses.order_before(&stream, false)?;
        self.uses.order_before(&stream, true)?;
        let mut dst = self.bytes.slice_mut(0..bytes);
        stream
            .memcpy_dtod(&src.bytes.slice(0..bytes), &mut dst)
            .map_err(|e| driver_error("copying a tensor on the GPU", e))?;
        src.uses.record(&stream, false)?;
        self.uses.record(&stream, true)
    }

    fn range(&self, offset: usize, len: usize) -> Result<std::ops::Range<usize>> {
        match offset.checked_add(len) {
            Some(end) if end <= self.capacity => Ok(offset..end),
            _ => Err(Error::Device(format!(
                "bytes {offset}..{offset}+{len} of a device tensor of {} bytes",
                self.capacity
            ))),
        }
    }

    /// Gives the tensor `shape`, whose bytes must fit in the allocation (an upper-bound
    /// output trimmed to the shape its operator reported); the data is the prefix.
    pub fn set_shape(&mut self, shape: &[usize]) -> Result<()> {
        let n = data_bytes(self.dtype, shape)?;
        if n > self.capacity {
            return Err(Error::Device(format!(
                "shape {shape:?} needs {n} bytes; the tensor holds {}",
                self.capacity
            )));
        }
        self.shape = shape.to_vec();
        Ok(())
    }

    /// Makes `stream` wait for the work other streams queued on this tensor that an
    /// access must follow (a write follows every use, a read the last write). For other
    /// CUDA code given [`DeviceTensor::device_ptr`]: call it before queueing that code on
    /// `stream`, and [`DeviceTensor::record_use`] after.
    pub fn order_before_use(&self, stream: &Stream, writes: bool) -> Result<()> {
        self.same_device(stream)?;
        self.uses.order_before(stream.cuda(), writes)
    }

    /// Records that work just queued on `stream` reads (or `writes`) the tensor, so that
    /// later launches, copies and the free wait for it.
    pub fn record_use(&self, stream: &Stream, writes: bool) -> Result<()> {
        self.same_device(stream)?;
        self.uses.record(stream.cuda(), writes)
    }

    fn same_device(&self, stream: &Stream) -> Result<()> {
        match stream.gpu().ordinal() == self.device.ordinal() {
            true => Ok(()),
            false => Err(Error::Device(format!(
                "a stream of CUDA device {} used with a tensor on device {}",
                stream.gpu().ordinal(),
                self.device.ordinal()
            ))),
        }
    }

    /// The element type.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// The shape.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// The number of elements.
    pub fn numel(&self) -> usize {
        self.shape.iter().product()
    }

    /// The data's bytes (`numel × dtype size`).
    pub fn nbytes(&self) -> usize {
        self.numel() * self.dtype.size_bytes()
    }

    /// The allocation's bytes (the data and the padding).
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// The device it lives on.
    pub fn device(&self) -> Device {
        Device::Cuda(self.device.clone())
    }

    /// The device address of the first element, for handing the tensor to other CUDA
    /// code (AOT operators, cuBLAS, PyTorch): that code must order itself after
    /// Tritium's launches on the tensor ([`DeviceTensor::order_before_use`]).
    pub fn device_ptr(&self) -> u64 {
        self.address
    }

    /// The same tensor typed as `T`; an error when its dtype is not `T`'s.
    pub fn into_typed<T: Element>(self) -> Result<CudaTensor<T>> {
        if self.dtype != T::DTYPE {
            return Err(Error::Device(format!(
                "a {} device tensor taken as {}",
                self.dtype,
                T::DTYPE
            )));
        }
        Ok(CudaTensor::from_untyped(self))
    }
}
