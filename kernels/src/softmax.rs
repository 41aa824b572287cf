//! Triton tutorial 02: fused softmax, one row per program.

use ndarray::{Array2, ArrayView2, ArrayViewMut2};
use tritium::prelude::*;

/// Row-wise softmax of an `n_rows × n_cols` matrix; `BLOCK >= n_cols` is a power of two.
/// Computes in f32 whatever the storage dtype. `softmax::launch` chooses `BLOCK` from
/// `n_cols` and times 2 to 16 warps per row length and dtype on CUDA and the emulator (on
/// the CPU and the interpreter, where warps mean nothing, nothing is timed);
/// `softmax::launch_explicit` takes both.
#[kernel]
#[autotune(
    configs = [config(num_warps = 2), config(num_warps = 4), config(num_warps = 8), config(num_warps = 16)],
    key = [n_cols],
)]
#[heuristics(BLOCK = next_power_of_2(n_cols.max(0) as usize))]
pub fn softmax<T: Float>(
    out: Ptr<T>,
    input: Ptr<T>,
    in_stride: i32,
    out_stride: i32,
    n_cols: i32,
    #[constexpr] BLOCK: usize,
) {
    let row = program_id(0).to(DType::I64);
    let cols = arange(0, BLOCK);
    let mask = cols < n_cols;
    let x = load(
        input + row * in_stride + cols,
        mask = mask,
        other = f32::NEG_INFINITY,
    );
    let x = x.to(DType::F32);
    let shifted = x - max(x, 0);
    let numerator = exp(shifted);
    let denominator = sum(numerator, 0);
    // One division per row, then a multiplication per element (a divide per element costs
    // more than the rest of the row together on most CPUs).
    let scale = 1.0 / denominator;
    store(
        out + row * out_stride + cols,
        numerator * scale,
        mask = mask,
    );
}

/// Softmax of every row of `x` through the [`softmax`] kernel.
pub fn softmax_rows<T: Float + Default>(
    device: &Device,
    x: ArrayView2<T>,
) -> tritium::Result<Array2<T>> {
    let mut out = Array2::from_elem(x.dim(), T::default());
    softmax_rows_into(device, x, out.view_mut())?;
    Ok(out)
}

/// Softmax of every row of `x`, with the warps per row chosen by timing on CUDA devices
/// and the emulator: the [`softmax`] kernel's `#[autotune]` (Triton's tutorial 02 derives
/// `num_warps` from the block size; here 2, 4, 8 and 16 warps are timed once per row
/// length and dtype and the choice is kept). On the CPU and the interpreter nothing is
/// timed.
pub fn softmax_rows_autotuned<T: Float + Default>(
    device: &Device,
    x: ArrayView2<T>,
) -> tritium::Result<Array2<T>> {
    let (rows, cols) = x.dim();
    let mut out = Array2::from_elem(x.dim(), T::default());
    check_rows(x.dim(), x.strides(), out.dim(), out.strides())?;
    let (in_stride, out_stride) = (x.strides()[0] as i32, out.strides()[0] as i32);
    softmax::launch(
        device,
        |_: &softmax::Meta| rows.max(1),
        &mut out,
        x,
        in_stride,
        out_stride,
        cols as i32,
    )?;
    Ok(out)
}

/// Softmax of every row of `x` into `out` (same shape; both may be strided by rows).
pub fn softmax_rows_into<T: Float>(
    device: &Device,
    x: ArrayView2<T>,
    out: ArrayViewMut2<T>,
) -> tritium::Result<()> {
    softmax_rows_into_with(device, &LaunchOptions::default(), x, out)
}

/// [`softmax_rows_into`] with launch options (warps, checked mode, …).
pub fn softmax_rows_into_with<T: Float>(
    device: &Device,
    options: &LaunchOptions,
    x: ArrayView2<T>,
    out: ArrayViewMut2<T>,
) -> tritium::Result<()> {
    let (rows, cols) = x.dim();
    check_rows(x.dim(), x.strides(), out.dim(), out.strides())?;
    let (in_stride, out_stride) = (x.strides()[0] as i32, out.strides()[0] as i32);
    let block = next_power_of_2(cols);
    softmax::launch_explicit(
        device,
        rows.max(1),
        options,
        out,
        x,
        in_stride,
        out_stride,
        cols as i32,
        block,
    )
}

/// Input and output of one shape, each contiguous along rows.
fn check_rows(
    x: (usize, usize),
    x_strides: &[isize],
    out: (usize, usize),
    out_strides: &[isize],
) -> tritium::Result<()> {
    if out != x || x_strides[1] != 1 || out_strides[1] != 1 {
        return Err(tritium::Error::Launch {
            kernel: "softmax".into(),
            message: format!(
                "softmax needs row-contiguous input and output of one shape, got {x:?} and {out:?}"
            ),
        });
    }
    Ok(())
}

/// The gradient of a row-wise softmax, one row per program: `dx = y · (dy − Σ y·dy)` with
/// `y` the softmax (its forward's output) and `dy` the gradient of `y`, in f32 whatever the
/// storage dtype; `BLOCK >= n_cols` is a power of two. Each matrix is contiguous along its
/// rows, which lie `*_stride` elements apart.
#[kernel]
#[allow(clippy::too_many_arguments)]
pub fn softmax_bwd<T: Float>(
    dx: Ptr<T>,
    y: Ptr<T>,
    dy: Ptr<T>,
    dx_stride: i32,
    y_stride: i32,
    dy_stride: i32,
    n_cols: i32,
    #[constexpr] BLOCK: usize,
) {
    let row = program_id(0).to(DType::I64);
    let cols = arange(0, BLOCK);
    let mask = cols < n_cols;
    let yv = load(y + row * y_stride + cols, mask = mask, other = 0.0).to(DType::F32);
    let dyv = load(dy + row * dy_stride + cols, mask = mask, other = 0.0).to(DType::F32);
    let dot = sum(yv * dyv, 0);
    store(
        dx + row * dx_stride + cols,
        (yv * (dyv - dot)).to(T::DTYPE),
        mask = mask,
    );
}
