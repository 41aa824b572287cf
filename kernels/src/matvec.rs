//! `y = x wᵀ` for a few rows of `x` (a decode step's projections): each program streams
//! `ROWS` rows of the weight once, one after the other, so the product runs at the speed
//! memory delivers the weight, where a blocked matmul would pad `x` to a whole block of
//! rows.

use tritium::prelude::*;

/// `y[r, j] = Σ_k x[r, k] · w[j, k]` for this program's `ROWS` outputs `j` and `r =
/// program_id(1)`: `x` rows `stride_x` apart, `w` rows `stride_w` apart (unit stride
/// along `k` for both), `y` rows `stride_y` apart. Each weight row is read front to back
/// in `BK`-wide steps, products accumulated lane-wise in f32 and summed once per row:
/// reading rows one after the other keeps the access a single sequential stream, which
/// the hardware prefetcher follows at full bandwidth (an `8 × 32` tile of 8 rows at once
/// reached about 75% of it on the 2-core development VM). `EVEN` (`k` a multiple of `BK`) drops the
/// masks, as Triton's `EVEN_K` does. Grid: `[cdiv(n, ROWS), m]`.
#[kernel]
pub fn matvec<T: Float, O: Float>(
    y: Ptr<O>,
    x: Ptr<T>,
    w: Ptr<T>,
    n: i32,
    k: i32,
    stride_x: i32,
    stride_w: i32,
    stride_y: i32,
    #[constexpr] ROWS: usize,
    #[constexpr] BK: usize,
    #[constexpr] EVEN: bool,
) {
    let r = program_id(1).to(DType::I64);
    let x_row = x + r * stride_x;
    let y_row = y + r * stride_y;
    let offs_k = arange(0, BK);
    let first = program_id(0) * ROWS as i32;
    for j in range(first, minimum(first + ROWS as i32, n)) {
        let w_row = w + j.to(DType::I64) * stride_w;
        let mut acc = zeros([BK], DType::F32);
        for k0 in range(0, k, BK as i32) {
            let kk = k0 + offs_k;
            let (xv, wv) = if EVEN {
                (load(x_row + kk), load(w_row + kk))
            } else {
                let k_ok = kk < k;
                let xv = load(x_row + kk, mask = k_ok, other = 0.0);
                (xv, load(w_row + kk, mask = k_ok, other = 0.0))
            };
            acc = acc + wv.to(DType::F32) * xv.to(DType::F32);
        }
        store(y_row + j, sum(acc, 0).to(O::DTYPE));
    }
}
