//! candle tensors as pointer arguments (the `candle` feature): a tensor in CPU memory is
//! passed where it lies, from its layout's offset with its strides (as a strided ndarray
//! view is: the kernel indexes from its first element), and stays read-locked until the
//! launch returns, so no in-place candle op writes it meanwhile. Tensors are read-only
//! arguments: candle's tensors share storage between clones, so a kernel's outputs are
//! arrays or buffers made into tensors afterwards (`tritium-candle` does that).
//!
//! With the `candle-cuda` feature a CUDA tensor is passed the same way, its device
//! address from its storage's cudarc slice: the launch orders itself through the slice's
//! stream, candle's (see `runtime/cudarc_slice.rs`, which passes cudarc slices).

use super::args::{PackedPtr, PtrArg, RawBuffer};
use super::Memory;
use candle_core::{Storage, StorageRef, Tensor};
use tritium_dsl::ir::ViewLayout;
use tritium_dsl::trace::Element;
use tritium_dsl::DType;

/// Tritium's dtype for a candle dtype (`None`: the formats Tritium has no dtype for).
pub fn dtype_of(d: candle_core::DType) -> Option<DType> {
    use candle_core::DType as C;
    Some(match d {
        C::U8 => DType::U8,
        C::U32 => DType::U32,
        C::I16 => DType::I16,
        C::I32 => DType::I32,
        C::I64 => DType::I64,
        C::BF16 => DType::BF16,
        C::F16 => DType::F16,
        C::F32 => DType::F32,
        C::F64 => DType::F64,
        C::F8E4M3 => DType::F8E4M3,
        _ => return None,
    })
}

impl<'a, 'r: 'a, T: Element> PtrArg<'a, T> for &'r Tensor {
    /// The buffer without its lock: use [`PtrArg::pack`], which keeps it.
    fn raw_buffer(self) -> RawBuffer {
        PtrArg::<T>::pack(self).raw()
    }

    fn pack(self) -> PackedPtr<'a> {
        let empty = RawBuffer {
            ptr: 0,
            lo: 0,
            hi: 0,
            dtype: T::DTYPE,
            writable: false,
            memory: Memory::Host,
            view: None,
        };
        let Some(dtype) = dtype_of(self.dtype()) else {
            return PackedPtr::refused(
                empty,
                format!(
                    "a candle tensor of {:?}, which Tritium has no dtype for",
                    self.dtype()
                ),
            );
        };
        let locked = Locked::new(self);
        let (storage, layout): (&Storage, _) = (&locked.guard, locked.tensor.layout());
        let (base, memory) = match storage {
            Storage::Cpu(s) => (cpu_address(s), Memory::Host),
            #[cfg(feature = "candle-cuda")]
            Storage::Cuda(s) => {
                let (base, stream) = cuda::address(s);
                let raw = laid_out(
                    base,
                    layout,
                    dtype,
                    Memory::Cuda(stream.context().ordinal()),
                );
                return PackedPtr::owned_by(raw, stream).held(locked);
            }
            _ => {
                let why = format!(
                    "a candle tensor on {:?}: Tritium takes CPU tensors (CUDA ones with the `cuda` feature of tritium-candle)",
                    self.device().location()
                );
                return PackedPtr::refused(empty, why);
            }
        };
        PackedPtr::holding(laid_out(base, layout, dtype, memory), locked)
    }
}

/// The read-only buffer of a tensor whose storage starts at `base`: from its layout's
/// offset, over the span its strides reach (a strided view where they leave gaps).
fn laid_out(base: usize, layout: &candle_core::Layout, dtype: DType, memory: Memory) -> RawBuffer {
    let size = dtype.size_bytes();
    let ptr = base + layout.start_offset() * size;
    let (dims, strides) = (layout.dims(), layout.stride());
    let empty = RawBuffer {
        ptr,
        lo: ptr,
        hi: ptr,
        dtype,
        writable: false,
        memory,
        view: None,
    };
    if dims.contains(&0) {
        return empty;
    }
    let max: usize = dims.iter().zip(strides).map(|(d, s)| (d - 1) * s).sum();
    let strides: Vec<isize> = strides.iter().map(|s| *s as isize).collect();
    RawBuffer {
        hi: ptr + (max + 1) * size,
        view: ViewLayout::of(dims, &strides, size),
        ..empty
    }
}

#[cfg(feature = "candle-cuda")]
mod cuda {
    use candle_core::cuda_backend::{CudaStorage, CudaStorageSlice as S};
    use cudarc::driver::{CudaSlice, CudaStream, DevicePtr};
    use std::sync::Arc;

    /// The device address of a CUDA storage's first element and the stream it belongs to
    /// (candle's device stream), which orders the launch ([`DeviceUse::Owned`]).
    ///
    /// [`DeviceUse::Owned`]: crate::runtime::DeviceUse::Owned
    pub(super) fn address(s: &CudaStorage) -> (usize, Arc<CudaStream>) {
        fn of<T>(slice: &CudaSlice<T>) -> (usize, Arc<CudaStream>) {
            // On the slice's own stream: cudarc waits for nothing and records a read
            // that the launch's ordering (after this) covers.
            let (ptr, _record) = slice.device_ptr(slice.stream());
            (ptr as usize, slice.stream().clone())
        }
        match &s.slice {
            S::U8(v) | S::F6E2M3(v) | S::F6E3M2(v) | S::F4(v) | S::F8E8M0(v) => of(v),
            S::U32(v) => of(v),
            S::I16(v) => of(v),
            S::I32(v) => of(v),
            S::I64(v) => of(v),
            S::BF16(v) => of(v),
            S::F16(v) => of(v),
            S::F32(v) => of(v),
            S::F64(v) => of(v),
            S::F8E4M3(v) => of(v),
        }
    }
}

/// The address of a CPU storage's first element.
fn cpu_address(s: &candle_core::CpuStorage) -> usize {
    use candle_core::CpuStorage as S;
    match s {
        S::U8(v) | S::F6E2M3(v) | S::F6E3M2(v) | S::F4(v) | S::F8E8M0(v) => v.as_ptr() as usize,
        S::U32(v) => v.as_ptr() as usize,
        S::I16(v) => v.as_ptr() as usize,
        S::I32(v) => v.as_ptr() as usize,
        S::I64(v) => v.as_ptr() as usize,
        S::BF16(v) => v.as_ptr() as usize,
        S::F16(v) => v.as_ptr() as usize,
        S::F32(v) => v.as_ptr() as usize,
        S::F64(v) => v.as_ptr() as usize,
        S::F8E4M3(v) => v.as_ptr() as usize,
    }
}

/// A tensor whose storage stays read-locked while this lives: a clone of the tensor (its
/// storage shared) and a read guard of that storage.
struct Locked {
    /// Dropped first (fields drop in order), while the tensor it borrows lives.
    guard: std::mem::ManuallyDrop<StorageRef<'static>>,
    tensor: Box<Tensor>,
}

impl Locked {
    fn new(t: &Tensor) -> Locked {
        let tensor = Box::new(t.clone());
        let (guard, _) = tensor.storage_and_layout();
        // SAFETY: the guard borrows the lock inside the boxed tensor's storage, which the
        // `Arc`s of `tensor` keep at one address for as long as `tensor` lives; `Drop`
        // releases the guard before `tensor` is dropped, and nothing hands it out.
        let guard = unsafe { std::mem::transmute::<StorageRef<'_>, StorageRef<'static>>(guard) };
        Locked {
            guard: std::mem::ManuallyDrop::new(guard),
            tensor,
        }
    }
}

impl Drop for Locked {
    fn drop(&mut self) {
        // SAFETY: dropped once, here, before `tensor`.
        unsafe { std::mem::ManuallyDrop::drop(&mut self.guard) }
    }
}
