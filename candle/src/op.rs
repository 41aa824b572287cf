//! What a candle custom op built on Tritium kernels needs: its CPU storage as ndarray
//! arrays (zero-copy where the layout is contiguous), the element type picked at run time,
//! and the result made back into candle storage.

use candle_core::backend::BackendStorage;
use candle_core::{CpuStorage, DType, Layout, Result, WithDType};
use ndarray::{Array, ArrayView, ArrayViewD, CowArray, IxDyn, ShapeBuilder};
use tritium::dsl::trace::{Element, Float};

/// Storage `s` under `layout` as a strided view of its logical shape, never a copy: what a
/// kernel taking strides reads where it lies. An error when its dtype is not `T`.
pub fn cpu_view<'s, T: WithDType>(s: &'s CpuStorage, layout: &Layout) -> Result<ArrayViewD<'s, T>> {
    let data: &[T] = s.as_slice()?;
    let dims = layout.dims().to_vec();
    let strides = layout.stride().to_vec();
    let start = layout.start_offset().min(data.len());
    ArrayView::from_shape(IxDyn(&dims).strides(IxDyn(&strides)), &data[start..]).map_err(|e| {
        candle_core::Error::Msg(format!(
            "a tensor of layout {layout:?} does not fit its storage: {e}"
        ))
    })
}

/// Storage `s` under `layout` as an array of its logical shape: the storage itself where the
/// layout is row-major, else a row-major copy. An error when its dtype is not `T`.
pub fn cpu_array<'s, T: WithDType>(
    s: &'s CpuStorage,
    layout: &Layout,
) -> Result<CowArray<'s, T, IxDyn>> {
    let view = cpu_view(s, layout)?;
    match view.is_standard_layout() {
        true => Ok(CowArray::from(view)),
        false => row_major_copy(s, layout),
    }
}

/// Storage `s` under `layout` copied row-major by candle's strided copy (what
/// `Tensor::contiguous` runs: whole contiguous blocks at a time, far faster than an
/// element-wise ndarray copy of a dynamic-rank view).
fn row_major_copy<'s, T: WithDType>(
    s: &CpuStorage,
    layout: &Layout,
) -> Result<CowArray<'s, T, IxDyn>> {
    let n = layout.shape().elem_count();
    let mut dst = T::to_cpu_storage_owned(zeros::<T>(n));
    s.copy_strided_src(&mut dst, 0, layout)?;
    let data = T::cpu_storage_data(dst)?;
    let array = Array::from_shape_vec(IxDyn(layout.dims()), data)
        .map_err(|e| candle_core::Error::Msg(format!("a row-major copy of {layout:?}: {e}")))?;
    Ok(CowArray::from(array))
}

/// The element types of kernel buffers on candle storage (f32, f16, bf16, u32, i64): a
/// Tritium element and a candle dtype, with what candle's CUDA storage needs of them under
/// the `cuda` feature.
#[cfg(not(feature = "cuda"))]
pub trait KernelElem: Element + WithDType {}

/// The element types of kernel buffers on candle storage (f32, f16, bf16, u32, i64): a
/// Tritium element and a candle dtype, with what candle's CUDA storage needs of them under
/// the `cuda` feature.
#[cfg(feature = "cuda")]
pub trait KernelElem:
    Element
    + WithDType
    + candle_core::cuda_backend::CudaDType
    + candle_core::cuda_backend::cudarc::driver::DeviceRepr
    + candle_core::cuda_backend::cudarc::driver::ValidAsZeroBits
{
}

impl KernelElem for f32 {}
impl KernelElem for half::f16 {}
impl KernelElem for half::bf16 {}
impl KernelElem for u32 {}
impl KernelElem for i64 {}

/// The float element types of the ops (f32, f16, bf16): a kernel op's launches are
/// generic over them.
pub trait KernelFloat: KernelElem + Float {}

impl KernelFloat for f32 {}
impl KernelFloat for half::f16 {}
impl KernelFloat for half::bf16 {}

/// A computation over one element type, chosen at run time by [`dispatch`].
pub trait PerFloat {
    /// What it gives.
    type Output;
    /// Runs it with elements of `T`.
    fn run<T: KernelFloat>(self) -> Result<Self::Output>;
}

/// Runs `f` with the float type of `dtype` (f32, f16 or bf16), or names the dtype it
/// cannot take.
pub fn dispatch<F: PerFloat>(op: &str, dtype: DType, f: F) -> Result<F::Output> {
    match dtype {
        DType::F32 => f.run::<f32>(),
        DType::F16 => f.run::<half::f16>(),
        DType::BF16 => f.run::<half::bf16>(),
        d => Err(candle_core::Error::Msg(format!(
            "{op}: takes f32, f16 or bf16 tensors, got {d:?}"
        ))),
    }
}

/// Storage `s` under `layout` as an array whose last dim is contiguous (stride 1), its
/// other dims strided as they lie: the storage itself where it is so, else a row-major copy.
/// What a kernel taking the strides of the outer dims reads (a transposed view of
/// `(b, t, h, d)` as `(b, h, t, d)` is read without a copy).
pub fn last_dim_contiguous<'s, T: WithDType>(
    s: &'s CpuStorage,
    layout: &Layout,
) -> Result<CowArray<'s, T, IxDyn>> {
    let view = cpu_view(s, layout)?;
    let contiguous = match (view.shape().last(), view.strides().last()) {
        (Some(&n), Some(&stride)) => n <= 1 || stride == 1,
        _ => true,
    };
    match contiguous {
        true => Ok(CowArray::from(view)),
        false => row_major_copy(s, layout),
    }
}

/// A candle error `"{op}: {message}"`.
pub fn op_error(op: &str, message: impl std::fmt::Display) -> candle_core::Error {
    candle_core::Error::Msg(format!("{op}: {message}"))
}

/// The one dtype of the named tensors, or an error naming the two that differ.
pub fn same_dtype(op: &str, tensors: &[(&str, DType)]) -> Result<DType> {
    let (first, dtype) = tensors[0];
    match tensors.iter().find(|(_, d)| *d != dtype) {
        Some((name, d)) => Err(op_error(
            op,
            format!("{first} is {dtype:?} but {name} is {d:?}"),
        )),
        None => Ok(dtype),
    }
}

/// `n` as a kernel's `i32` size argument, or an error naming what is too large.
pub fn to_i32(op: &str, what: &str, n: usize) -> Result<i32> {
    i32::try_from(n).map_err(|_| op_error(op, format!("{what} is {n}, above i32::MAX")))
}

/// `n` zeros of `T` in a zeroed allocation (`calloc`): the pages are mapped when a kernel
/// first writes them, on the threads that write them, rather than written twice (a fill
/// then the kernel's stores). For the outputs a kernel writes whole.
pub fn zeros<T: WithDType>(n: usize) -> Vec<T> {
    use half::vec::HalfBitsVecExt;
    let storage = match T::DTYPE {
        DType::F32 => CpuStorage::F32(vec![0f32; n]),
        DType::F16 => CpuStorage::F16(vec![0u16; n].reinterpret_into()),
        DType::BF16 => CpuStorage::BF16(vec![0u16; n].reinterpret_into()),
        _ => return vec![T::from_f64(0.0); n],
    };
    let v = T::cpu_storage_data(storage).unwrap_or_else(|_| vec![T::from_f64(0.0); n]);
    advise_huge_pages(&v);
    v
}

/// Asks Linux to back the 2 MiB-aligned part of a large buffer not yet written with
/// transparent huge pages (`madvise(MADV_HUGEPAGE)`, which THP's default `madvise` mode
/// waits for): a kernel's first writes then map 2 MiB at a time, not 4 KiB. Outputs of tens
/// of MB come from fresh `mmap`s on every call (glibc maps whatever passes its threshold),
/// and mapping them 4 KiB at a time cost more than the kernels writing them (a 65 MB
/// softmax output: about 16000 page faults, 3 µs each on the 2-core VM). Buffers below
/// 8 MiB, and other systems, are left as they are.
fn advise_huge_pages<T>(v: &[T]) {
    #[cfg(target_os = "linux")]
    {
        use std::ffi::{c_int, c_void};
        const HUGE: usize = 2 << 20;
        const MADV_HUGEPAGE: c_int = 14;
        extern "C" {
            fn madvise(addr: *mut c_void, len: usize, advice: c_int) -> c_int;
        }
        let (lo, bytes) = (v.as_ptr() as usize, std::mem::size_of_val(v));
        if bytes < 4 * HUGE {
            return;
        }
        let (start, end) = (lo.next_multiple_of(HUGE), (lo + bytes) & !(HUGE - 1));
        if end > start {
            // SAFETY: advice only: the range lies inside `v`'s allocation, and madvise with
            // MADV_HUGEPAGE changes how its pages are mapped, never what they hold. Its
            // failure (THP off, an old kernel) leaves the buffer as it was.
            unsafe { madvise(start as *mut c_void, end - start, MADV_HUGEPAGE) };
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = v;
}
