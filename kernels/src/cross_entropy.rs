//! Cross-entropy over logits, as Liger-Kernel's `liger_cross_entropy_kernel` fuses it (its
//! linear-free version, no label smoothing): one program per row, an online max and sum of
//! exponentials over `BLOCK`-wide column blocks (so a vocabulary of 32000 needs no row-wide
//! tile), rows whose target is `ignore_index` skipped. Computed in f32 whatever the logits'
//! element type.

use tritium::prelude::*;

/// Per row: `lse[row] = log Σ exp(x[row])` and `loss[row] = lse[row] − x[row, target[row]]`;
/// both 0 where `target[row] == ignore_index`. Rows of `x` lie `x_stride` elements apart;
/// every other target must lie in `0..n_cols`.
#[kernel]
#[allow(clippy::too_many_arguments)]
pub fn cross_entropy_fwd<T: Float>(
    loss: Ptr<f32>,
    lse: Ptr<f32>,
    x: Ptr<T>,
    x_stride: i64,
    target: Ptr<i64>,
    n_cols: i32,
    ignore_index: i64,
    #[constexpr] BLOCK: usize,
) {
    let row = program_id(0).to(DType::I64);
    let y = load(target + row);
    if y == ignore_index {
        store(loss + row, 0.0);
        store(lse + row, 0.0);
        return;
    }
    let x_row = x + row * x_stride;
    let mut m = f32::NEG_INFINITY;
    let mut d = 0.0;
    for i in range(0, n_cols, BLOCK as i32) {
        let cols = i + arange(0, BLOCK);
        let xb = load(
            x_row + cols,
            mask = cols < n_cols,
            other = f32::NEG_INFINITY,
        )
        .to(DType::F32);
        let m_new = maximum(m, max(xb, 0));
        d = d * exp(m - m_new) + sum(exp(xb - m_new), 0);
        m = m_new;
    }
    let l = m + log(d);
    store(lse + row, l);
    store(loss + row, l - load(x_row + y).to(DType::F32));
}

/// The gradient of the mean loss over the rows not ignored, one row per program:
/// `dx[row] = (softmax(x[row]) − onehot(target[row])) · grad[0] · inv_valid` with `grad`
/// the loss's upstream gradient (one element, read where it lies: on a GPU no copy to the
/// host) and `inv_valid` one over the number of rows not ignored, and `lse` as
/// [`cross_entropy_fwd`] gave it; 0 on ignored rows. `dx` is contiguous (`n_cols` per row).
#[kernel]
#[allow(clippy::too_many_arguments)]
pub fn cross_entropy_bwd<T: Float>(
    dx: Ptr<T>,
    x: Ptr<T>,
    x_stride: i64,
    target: Ptr<i64>,
    lse: Ptr<f32>,
    grad: Ptr<f32>,
    inv_valid: f32,
    n_cols: i32,
    ignore_index: i64,
    #[constexpr] BLOCK: usize,
) {
    let row = program_id(0).to(DType::I64);
    let y = load(target + row);
    let dx_row = dx + row * n_cols;
    if y == ignore_index {
        for i in range(0, n_cols, BLOCK as i32) {
            let cols = i + arange(0, BLOCK);
            store(
                dx_row + cols,
                zeros([BLOCK], T::DTYPE),
                mask = cols < n_cols,
            );
        }
        return;
    }
    let x_row = x + row * x_stride;
    let l = load(lse + row);
    let scale = load(grad) * inv_valid;
    for i in range(0, n_cols, BLOCK as i32) {
        let cols = i + arange(0, BLOCK);
        let xb = load(x_row + cols, mask = cols < n_cols, other = 0.0).to(DType::F32);
        let p = exp(xb - l);
        let g = where_(cols.to(DType::I64) == y, p - 1.0, p) * scale;
        store(dx_row + cols, g.to(T::DTYPE), mask = cols < n_cols);
    }
}

/// `mean[0] = Σ loss / valid` over `n` rows' losses (ignored rows' are 0): the mean loss over
/// the rows not ignored, summed in f32 `BLOCK` rows at a time by one program; NaN when
/// `valid` is 0, as PyTorch's.
#[kernel]
pub fn cross_entropy_mean(
    mean: Ptr<f32>,
    loss: Ptr<f32>,
    n: i32,
    valid: f32,
    #[constexpr] BLOCK: usize,
) {
    let mut acc = zeros([BLOCK], DType::F32);
    for i in range(0, n, BLOCK as i32) {
        let rows = i + arange(0, BLOCK);
        acc += load(loss + rows, mask = rows < n, other = 0.0);
    }
    store(mean, sum(acc, 0) / valid);
}
