//! Device tensors: a buffer in GPU memory with a row-major shape, passed to kernels as a
//! pointer (`&tensor` read-only, `&mut tensor` writable) without copies. Launches on any
//! stream may use a tensor; its [`UseTracker`] orders copies, later launches and the free
//! after them (see [`super::Stream`]).

use super::driver::{driver_error, CudaDevice};
use super::UseTracker;
use crate::launch::{Memory, PackedPtr, PtrArg, RawBuffer};
use crate::{Device, Error, Result};
use cudarc::driver::{CudaSlice, DevicePtr};
use ndarray::{ArrayBase, ArrayD, Data, Dimension, IxDyn};
use std::marker::PhantomData;
use std::sync::Arc;
use tritium_dsl::trace::Element;

/// A row-major tensor of `T` in the memory of one CUDA device.
pub struct CudaTensor<T: Element> {
    device: Arc<CudaDevice>,
    bytes: CudaSlice<u8>,
    /// `bytes`' device address, read once: cudarc's `device_ptr` queues event work on a
    /// stream at every call, and launches order themselves through `uses` instead.
    address: u64,
    shape: Vec<usize>,
    uses: UseTracker,
    _elem: PhantomData<T>,
}

impl<T: Element> Drop for CudaTensor<T> {
    fn drop(&mut self) {
        // The memory is freed in order on the default stream: after launches queued on
        // other streams that may still use it. Errors can't be returned from `drop`; the
        // driver reports a failed kernel at the next synchronization anyway.
        let _ = self.uses.order_before(self.device.stream(), true);
    }
}

impl<T: Element> std::fmt::Debug for CudaTensor<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "CudaTensor<{}>{:?} on {:?}",
            T::DTYPE,
            self.shape,
            self.device
        )
    }
}

fn cuda_device(device: &Device) -> Result<&Arc<CudaDevice>> {
    match device {
        Device::Cuda(d) => Ok(d),
        other => Err(Error::Device(format!(
            "a CudaTensor lives on a CUDA device, not on {}",
            other.name()
        ))),
    }
}

impl<T: Element> CudaTensor<T> {
    /// A zero-filled tensor of `shape` on `device` (a [`Device::cuda`]).
    pub fn zeros(device: &Device, shape: &[usize]) -> Result<Self> {
        let d = cuda_device(device)?;
        let numel: usize = shape.iter().product();
        let bytes = d.alloc_on(d.stream(), numel * std::mem::size_of::<T>())?;
        let address = bytes.device_ptr(d.stream()).0;
        let t = CudaTensor {
            device: d.clone(),
            bytes,
            address,
            shape: shape.to_vec(),
            uses: UseTracker::default(),
            _elem: PhantomData,
        };
        // The zeroing is queued on the default stream: launches on other streams wait.
        t.uses.record(d.stream(), true)?;
        Ok(t)
    }

    /// A copy of `a` (any layout) on `device`.
    pub fn from_ndarray<S: Data<Elem = T>, D: Dimension>(
        device: &Device,
        a: &ArrayBase<S, D>,
    ) -> Result<Self> {
        let mut t = Self::zeros(device, a.shape())?;
        let host: Vec<T> = a.iter().copied().collect();
        t.write(&host)?;
        Ok(t)
    }

    /// Copies the tensor back into an ndarray array, after the launches queued so far (on
    /// any stream) that write it.
    pub fn to_ndarray(&self) -> Result<ArrayD<T>> {
        let mut bytes = vec![0u8; self.numel() * std::mem::size_of::<T>()];
        self.device.bind()?;
        self.uses.order_before(self.device.stream(), false)?;
        if !bytes.is_empty() {
            let view = self.bytes.slice(0..bytes.len());
            self.device
                .stream()
                .memcpy_dtoh(&view, &mut bytes)
                .map_err(|e| driver_error("copying a tensor from the GPU", e))?;
        }
        self.device.synchronize()?;
        let values: Vec<T> = bytes
            .chunks_exact(std::mem::size_of::<T>().max(1))
            // SAFETY: every chunk holds the bytes of one `T`, a plain numeric element.
            .map(|c| unsafe { std::ptr::read_unaligned(c.as_ptr().cast::<T>()) })
            .collect();
        ArrayD::from_shape_vec(IxDyn(&self.shape), values)
            .map_err(|e| Error::Device(format!("tensor shape: {e}")))
    }

    fn write(&mut self, values: &[T]) -> Result<()> {
        if values.is_empty() {
            return Ok(());
        }
        // SAFETY: `T` is a plain numeric element; its bytes are initialized.
        let bytes = unsafe {
            std::slice::from_raw_parts(values.as_ptr().cast::<u8>(), std::mem::size_of_val(values))
        };
        self.device.bind()?;
        self.uses.order_before(self.device.stream(), true)?;
        let mut view = self.bytes.slice_mut(0..bytes.len());
        self.device
            .stream()
            .memcpy_htod(bytes, &mut view)
            .map_err(|e| driver_error("copying a tensor to the GPU", e))?;
        self.device.synchronize()
    }

    /// Copies `src` (same element count) into this tensor on the device's default stream,
    /// after the launches queued so far that use either; returns once queued.
    pub fn copy_from(&mut self, src: &CudaTensor<T>) -> Result<()> {
        if src.numel() != self.numel() || src.device.ordinal() != self.device.ordinal() {
            return Err(Error::Device(format!(
                "copy_from: a {:?} tensor on CUDA device {} into a {:?} tensor on device {}",
                src.shape,
                src.device.ordinal(),
                self.shape,
                self.device.ordinal()
            )));
        }
        let bytes = self.numel() * std::mem::size_of::<T>();
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

    /// The device address of the first element, for handing the tensor to other CUDA
    /// code (cuBLAS, PyTorch): that code must order itself after Tritium's launches on
    /// the tensor (for example by synchronizing the stream they were queued on).
    pub fn device_ptr(&self) -> u64 {
        self.raw(false).ptr as u64
    }

    /// The shape.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// The number of elements.
    pub fn numel(&self) -> usize {
        self.shape.iter().product()
    }

    /// The device it lives on.
    pub fn device(&self) -> Device {
        Device::Cuda(self.device.clone())
    }

    fn raw(&self, writable: bool) -> RawBuffer {
        let ptr = self.address as usize;
        RawBuffer {
            ptr,
            lo: ptr,
            hi: ptr + self.numel() * std::mem::size_of::<T>(),
            dtype: T::DTYPE,
            writable,
            memory: Memory::Cuda(self.device.ordinal()),
            view: None,
        }
    }
}

impl<'a, 'r: 'a, T: Element> PtrArg<'a, T> for &'r CudaTensor<T> {
    fn raw_buffer(self) -> RawBuffer {
        self.raw(false)
    }

    fn pack(self) -> PackedPtr<'a> {
        PackedPtr::tracked(self.raw(false), &self.uses)
    }
}

impl<'a, 'r: 'a, T: Element> PtrArg<'a, T> for &'r mut CudaTensor<T> {
    fn raw_buffer(self) -> RawBuffer {
        self.raw(true)
    }

    fn pack(self) -> PackedPtr<'a> {
        PackedPtr::tracked(self.raw(true), &self.uses)
    }
}
