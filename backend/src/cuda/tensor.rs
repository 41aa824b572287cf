//! Device tensors: a buffer in GPU memory with a row-major shape, passed to kernels as a
//! pointer (`&tensor` read-only, `&mut tensor` writable) without copies.

use super::driver::{driver_error, CudaDevice};
use crate::launch::{Memory, PtrArg, RawBuffer};
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
    shape: Vec<usize>,
    _elem: PhantomData<T>,
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
        Ok(CudaTensor {
            device: d.clone(),
            bytes: d.alloc(numel * std::mem::size_of::<T>())?,
            shape: shape.to_vec(),
            _elem: PhantomData,
        })
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

    /// Copies the tensor back into an ndarray array.
    pub fn to_ndarray(&self) -> Result<ArrayD<T>> {
        let mut bytes = vec![0u8; self.numel() * std::mem::size_of::<T>()];
        self.device.bind()?;
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
        let mut view = self.bytes.slice_mut(0..bytes.len());
        self.device
            .stream()
            .memcpy_htod(bytes, &mut view)
            .map_err(|e| driver_error("copying a tensor to the GPU", e))?;
        self.device.synchronize()
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
        let ptr = self.bytes.device_ptr(self.device.stream()).0 as usize;
        RawBuffer {
            ptr,
            lo: ptr,
            hi: ptr + self.numel() * std::mem::size_of::<T>(),
            dtype: T::DTYPE,
            writable,
            memory: Memory::Cuda(self.device.ordinal()),
        }
    }
}

impl<'a, 'r: 'a, T: Element> PtrArg<'a, T> for &'r CudaTensor<T> {
    fn raw_buffer(self) -> RawBuffer {
        self.raw(false)
    }
}

impl<'a, 'r: 'a, T: Element> PtrArg<'a, T> for &'r mut CudaTensor<T> {
    fn raw_buffer(self) -> RawBuffer {
        self.raw(true)
    }
}
