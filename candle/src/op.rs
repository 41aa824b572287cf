//! What a candle custom op built on Tritium kernels needs: its CPU storage as ndarray
//! arrays (zero-copy where the layout is contiguous), the element type picked at run time,
//! and the result made back into candle storage.

use candle_core::{CpuStorage, DType, Layout, Result, WithDType};
use ndarray::{ArrayView, CowArray, IxDyn, ShapeBuilder};
use tritium::dsl::trace::Float;

/// Storage `s` under `layout` as an array of its logical shape: the storage itself where the
/// layout is row-major, else a row-major copy. An error when its dtype is not `T`.
pub fn cpu_array<'s, T: WithDType>(
    s: &'s CpuStorage,
    layout: &Layout,
) -> Result<CowArray<'s, T, IxDyn>> {
    let data: &[T] = s.as_slice()?;
    let dims = layout.dims().to_vec();
    let strides = layout.stride().to_vec();
    let view = ArrayView::from_shape(
        IxDyn(&dims).strides(IxDyn(&strides)),
        &data[layout.start_offset()..],
    )
    .map_err(|e| {
        candle_core::Error::Msg(format!(
            "a tensor of layout {layout:?} does not fit its storage: {e}"
        ))
    })?;
    Ok(match view.is_standard_layout() {
        true => CowArray::from(view),
        false => CowArray::from(view.as_standard_layout().into_owned()),
    })
}

/// A computation over one element type, chosen at run time by [`dispatch`].
pub trait PerFloat {
    /// What it gives.
    type Output;
    /// Runs it with elements of `T`.
    fn run<T: Float + WithDType>(self) -> Result<Self::Output>;
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
