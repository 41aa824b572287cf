//! Typed device tensors: a [`DeviceTensor`] whose element type is `T`, passed to kernels
//! as a pointer (`&tensor` read-only, `&mut tensor` writable) without copies. Launches on
//! any stream may use a tensor; its use tracker orders copies, later launches and the
//! free after them (see [`super::Stream`]).

use super::DeviceTensor;
use crate::launch::{Memory, PackedPtr, PtrArg, RawBuffer};
use crate::{Device, Error, Result};
use ndarray::{ArrayBase, ArrayD, Data, Dimension, IxDyn};
use std::marker::PhantomData;
use tritium_dsl::trace::Element;

/// A row-major tensor of `T` in the memory of one CUDA device: a [`DeviceTensor`] typed.
pub struct CudaTensor<T: Element> {
    inner: DeviceTensor,
    _elem: PhantomData<T>,
}

impl<T: Element> std::fmt::Debug for CudaTensor<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "CudaTensor<{}>{:?} on {:?}",
            T::DTYPE,
            self.inner.shape(),
            self.inner.device
        )
    }
}

impl<T: Element> CudaTensor<T> {
    /// A zero-filled tensor of `shape` on `device` (a [`Device::cuda`]).
    pub fn zeros(device: &Device, shape: &[usize]) -> Result<Self> {
        Ok(Self::from_untyped(DeviceTensor::zeros(
            device,
            T::DTYPE,
            shape,
        )?))
    }

    /// A copy of `a` (any layout) on `device`.
    pub fn from_ndarray<S: Data<Elem = T>, D: Dimension>(
        device: &Device,
        a: &ArrayBase<S, D>,
    ) -> Result<Self> {
        Ok(Self::from_untyped(DeviceTensor::from_ndarray(device, a)?))
    }

    pub(super) fn from_untyped(inner: DeviceTensor) -> Self {
        CudaTensor {
            inner,
            _elem: PhantomData,
        }
    }

    /// The same tensor with its dtype known at run time (for AOT operators); no copy.
    pub fn into_untyped(self) -> DeviceTensor {
        self.inner
    }

    /// The tensor with its dtype known at run time, borrowed.
    pub fn untyped(&self) -> &DeviceTensor {
        &self.inner
    }

    /// Copies the tensor back into an ndarray array, after the launches queued so far (on
    /// any stream) that write it.
    pub fn to_ndarray(&self) -> Result<ArrayD<T>> {
        let bytes = self.inner.to_bytes()?;
        let values: Vec<T> = bytes
            .chunks_exact(std::mem::size_of::<T>().max(1))
            // SAFETY: every chunk holds the bytes of one `T`, a plain numeric element.
            .map(|c| unsafe { std::ptr::read_unaligned(c.as_ptr().cast::<T>()) })
            .collect();
        ArrayD::from_shape_vec(IxDyn(self.shape()), values)
            .map_err(|e| Error::Device(format!("tensor shape: {e}")))
    }

    /// Copies `src` (same element count) into this tensor on the device's default stream,
    /// after the launches queued so far that use either; returns once queued.
    pub fn copy_from(&mut self, src: &CudaTensor<T>) -> Result<()> {
        self.inner.copy_from(&src.inner)
    }

    /// The device address of the first element, for handing the tensor to other CUDA
    /// code (cuBLAS, PyTorch): that code must order itself after Tritium's launches on
    /// the tensor (for example by synchronizing the stream they were queued on).
    pub fn device_ptr(&self) -> u64 {
        self.inner.device_ptr()
    }

    /// The shape.
    pub fn shape(&self) -> &[usize] {
        self.inner.shape()
    }

    /// The number of elements.
    pub fn numel(&self) -> usize {
        self.inner.numel()
    }

    /// The device it lives on.
    pub fn device(&self) -> Device {
        self.inner.device()
    }

    fn raw(&self, writable: bool) -> RawBuffer {
        let ptr = self.inner.device_ptr() as usize;
        RawBuffer {
            ptr,
            lo: ptr,
            hi: ptr + self.inner.nbytes(),
            dtype: T::DTYPE,
            writable,
            memory: Memory::Cuda(self.inner.device.ordinal()),
            view: None,
        }
    }
}

impl<'a, 'r: 'a, T: Element> PtrArg<'a, T> for &'r CudaTensor<T> {
    fn raw_buffer(self) -> RawBuffer {
        self.raw(false)
    }

    fn pack(self) -> PackedPtr<'a> {
        PackedPtr::tracked(self.raw(false), &self.inner.uses)
    }
}

impl<'a, 'r: 'a, T: Element> PtrArg<'a, T> for &'r mut CudaTensor<T> {
    fn raw_buffer(self) -> RawBuffer {
        self.raw(true)
    }

    fn pack(self) -> PackedPtr<'a> {
        PackedPtr::tracked(self.raw(true), &self.inner.uses)
    }
}
