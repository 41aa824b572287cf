//! cudarc's device slices as pointer arguments: memory other CUDA code in this process
//! allocated (a candle CUDA tensor's storage, a user's own `CudaSlice`), passed where it
//! lies. A shared borrow is read-only, an exclusive one writable, as for host arrays. The
//! launch orders itself through the stream the slice belongs to ([`DeviceUse::Owned`](super::DeviceUse::Owned)):
//! on that stream it simply queues in order; on another it waits for the work queued
//! there, and that stream waits for the launch.

use crate::launch::{Memory, PackedPtr, PtrArg, RawBuffer};
use cudarc::driver::{CudaSlice, DevicePtr};
use tritium_dsl::trace::Element;

impl<'a, 'r: 'a, T: Element> PtrArg<'a, T> for &'r CudaSlice<T> {
    fn raw_buffer(self) -> RawBuffer {
        PtrArg::<T>::pack(self).raw()
    }

    fn pack(self) -> PackedPtr<'a> {
        window(self, &(0..self.len()), false)
    }
}

impl<'a, 'r: 'a, T: Element> PtrArg<'a, T> for &'r mut CudaSlice<T> {
    fn raw_buffer(self) -> RawBuffer {
        PtrArg::<T>::pack(self).raw()
    }

    fn pack(self) -> PackedPtr<'a> {
        window(self, &(0..self.len()), true)
    }
}

/// Elements `range` of a cudarc slice as a read-only pointer argument: a window of memory
/// other CUDA code owns (a candle tensor's storage from its layout's offset, say), which
/// cudarc's own views cannot be (they do not say which stream owns them).
#[derive(Debug)]
pub struct SliceRange<'s, T> {
    slice: &'s CudaSlice<T>,
    range: std::ops::Range<usize>,
}

impl<'s, T> SliceRange<'s, T> {
    /// Elements `range` of `slice`, or `None` when the range does not lie inside it.
    pub fn new(slice: &'s CudaSlice<T>, range: std::ops::Range<usize>) -> Option<Self> {
        (range.start <= range.end && range.end <= slice.len())
            .then_some(SliceRange { slice, range })
    }

    /// The number of elements.
    pub fn len(&self) -> usize {
        self.range.len()
    }

    /// True when the range has no elements.
    pub fn is_empty(&self) -> bool {
        self.range.is_empty()
    }
}

impl<'a, 'r: 'a, T: Element> PtrArg<'a, T> for &'r SliceRange<'_, T> {
    fn raw_buffer(self) -> RawBuffer {
        PtrArg::<T>::pack(self).raw()
    }

    fn pack(self) -> PackedPtr<'a> {
        window(self.slice, &self.range, false)
    }
}

/// A writable window of a cudarc slice: [`SliceRangeMut::split`] cuts a slice into
/// disjoint ones, so that one launch writes several outputs into one allocation (a candle
/// op's storage holding two gradients, say).
#[derive(Debug)]
pub struct SliceRangeMut<'s, T> {
    /// Shared: the windows are disjoint, and only the device writes through them.
    slice: &'s CudaSlice<T>,
    range: std::ops::Range<usize>,
    _writes: std::marker::PhantomData<&'s mut [T]>,
}

impl<'s, T> SliceRangeMut<'s, T> {
    /// `slice` cut into windows of `lens` elements one after the other from its start, or
    /// `None` when they do not fit in it.
    pub fn split(slice: &'s mut CudaSlice<T>, lens: &[usize]) -> Option<Vec<Self>> {
        let total = lens.iter().try_fold(0usize, |a, n| a.checked_add(*n))?;
        if total > slice.len() {
            return None;
        }
        let slice = &*slice;
        let mut at = 0;
        let windows = lens.iter().map(|&n| {
            at += n;
            SliceRangeMut {
                slice,
                range: at - n..at,
                _writes: std::marker::PhantomData,
            }
        });
        Some(windows.collect())
    }

    /// The number of elements.
    pub fn len(&self) -> usize {
        self.range.len()
    }

    /// True when the window has no elements.
    pub fn is_empty(&self) -> bool {
        self.range.is_empty()
    }
}

impl<'a, 'r: 'a, T: Element> PtrArg<'a, T> for &'r mut SliceRangeMut<'_, T> {
    fn raw_buffer(self) -> RawBuffer {
        PtrArg::<T>::pack(self).raw()
    }

    fn pack(self) -> PackedPtr<'a> {
        window(self.slice, &self.range, true)
    }
}

/// Elements `range` of `slice` as a buffer, ordered through the slice's stream (cudarc's
/// own events of the slice are left as they are: work its owner queues after the launch
/// follows it, and cudarc orders other streams after that).
fn window<'a, T: Element>(
    slice: &CudaSlice<T>,
    range: &std::ops::Range<usize>,
    writable: bool,
) -> PackedPtr<'a> {
    // On the slice's own stream cudarc waits for nothing and records a read that the
    // launch's ordering (`DeviceUse::Owned`, after this) covers.
    let (base, _record) = slice.device_ptr(slice.stream());
    let size = std::mem::size_of::<T>();
    let ptr = base as usize + range.start * size;
    let raw = RawBuffer {
        ptr,
        lo: ptr,
        hi: ptr + range.len() * size,
        dtype: T::DTYPE,
        writable,
        memory: Memory::Cuda(slice.ordinal()),
        view: None,
    };
    PackedPtr::owned_by(raw, slice.stream().clone())
}
