//! `y = x wᵀ` for a few rows of `x` (a decode step's projections): each program streams
//! `BN` rows of the weight once, so the product runs at the speed memory delivers the
//! weight, where a blocked matmul would pad `x` to a whole block of rows.

use tritium::prelude::*;

/// `y[r, j] = Σ_k x[r, k] · w[j, k]` for `j` in this program's `BN` outputs and `r =
/// program_id(1)`: `x` rows `stride_x` apart, `w` rows `stride_w` apart (unit stride
/// along `k` for both), `y` rows `stride_y` apart. Products accumulate lane-wise in f32
/// across the `BK`-wide steps and are summed once at the end. `EVEN` (`n` a multiple of
/// `BN`, `k` of `BK`) drops the masks, as Triton's `EVEN_K` does: the CPU then keeps the
/// `BN × BK` accumulator in vector registers. Grid: `[cdiv(n, BN), m]`.
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
    #[constexpr] BN: usize,
    #[constexpr] BK: usize,
    #[constexpr] EVEN: bool,
) {
    let row = program_id(1).to(DType::I64);
    let offs_n = program_id(0) * BN as i32 + arange(0, BN);
    let offs_k = arange(0, BK);
    let n_ok = offs_n < n;
    let w_rows = w + offs_n[(.., None)] * stride_w;
    let x_row = x + row * stride_x;
    let mut acc = zeros([BN, BK], DType::F32);
    for k0 in range(0, k, BK as i32) {
        let kk = k0 + offs_k;
        let (xv, wv) = if EVEN {
            (load(x_row + kk), load(w_rows + kk[(None, ..)]))
        } else {
            let k_ok = kk < k;
            let xv = load(x_row + kk, mask = k_ok, other = 0.0);
            let wv = load(
                w_rows + kk[(None, ..)],
                mask = n_ok[(.., None)] & k_ok[(None, ..)],
                other = 0.0,
            );
            (xv, wv)
        };
        acc = acc + wv.to(DType::F32) * xv.to(DType::F32)[(None, ..)];
    }
    store(
        y + row * stride_y + offs_n,
        sum(acc, 1).to(O::DTYPE),
        mask = n_ok,
    );
}
