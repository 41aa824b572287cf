//! cudarc's device slices as pointer arguments: memory other CUDA code in this process
//! allocated (a candle CUDA tensor's storage, a user's own `CudaSlice`), passed where it
//! lies. A shared borrow is read-only, an exclusive one writable, as for host arrays. The
//! launch orders itself through the stream the slice belongs to ([`DeviceUse::Owned`](super::DeviceUse::Owned)):
//! on that stream it simply queues in order; on another it waits for the work queued
//! there, and that stream waits for the launch.

use crate::launch::{Memory, PackedPtr, PtrArg, RawBuffer};
use cudarc::driver::{CudaSlice, DevicePtr, DevicePtrMut};
use tritium_dsl::trace::Element;

/// `slice` as a buffer of `T` at its device address `ptr`.
fn raw<T: Element>(slice: &CudaSlice<T>, ptr: u64, writable: bool) -> RawBuffer {
    let ptr = ptr as usize;
    RawBuffer {
        ptr,
        lo: ptr,
        hi: ptr + slice.num_bytes(),
        dtype: T::DTYPE,
        writable,
        memory: Memory::Cuda(slice.ordinal()),
        view: None,
    }
}

impl<'a, 'r: 'a, T: Element> PtrArg<'a, T> for &'r CudaSlice<T> {
    fn raw_buffer(self) -> RawBuffer {
        PtrArg::<T>::pack(self).raw()
    }

    fn pack(self) -> PackedPtr<'a> {
        // On the slice's own stream: no wait (it is that stream's order), and cudarc's
        // read event, recorded here, marks nothing later than what the launch follows.
        let (ptr, _record) = self.device_ptr(self.stream());
        PackedPtr::owned_by(raw(self, ptr, false), self.stream().clone(), None)
    }
}

impl<'a, 'r: 'a, T: Element> PtrArg<'a, T> for &'r mut CudaSlice<T> {
    fn raw_buffer(self) -> RawBuffer {
        PtrArg::<T>::pack(self).raw()
    }

    fn pack(self) -> PackedPtr<'a> {
        let stream = self.stream().clone();
        let ptr = {
            let (ptr, _record) = self.device_ptr_mut(&stream);
            ptr
        };
        PackedPtr::owned_by(raw(self, ptr, true), stream, None)
    }
}
