//! `y = x wᵀ` with `w` in PyTorch's `Linear` layout (`[n, K]`, a row per output): the
//! projections of a transformer, tutorial 03's blocked product with the weight read
//! transposed.

use tritium::prelude::*;

/// `y[m, n] = x[m, K] · w[n, K]ᵀ`, all row-major and contiguous, accumulated in f32; one
/// `BM × BN` block of `y` per program (grid `[cdiv(m, BM), cdiv(n, BN)]`), blocks timed
/// once per shape as in [`crate::matmul::matmul`]. `K` is a constexpr: no mask along `k`
/// where `BK` divides it, and the blocks are those that suit a transformer's projections
/// (tutorial 03's `matmul` on the transposed view `w.t()` gives the same product, 5–20%
/// slower at 128 × 512…2816 × 512…1408 on the 2-core VM).
#[kernel]
#[autotune(
    configs = [
        config(BM = 64, BN = 128, BK = 64),
        config(BM = 64, BN = 64, BK = 64),
        config(BM = 128, BN = 128, BK = 64),
        config(BM = 128, BN = 64, BK = 128),
        config(BM = 16, BN = 128, BK = 64),
    ],
    key = [m, n, K],
)]
pub fn linear<T: Float, O: Float>(
    y: Ptr<O>,
    x: Ptr<T>,
    w: Ptr<T>,
    m: i32,
    n: i32,
    #[constexpr] K: usize,
    #[constexpr] BM: usize,
    #[constexpr] BN: usize,
    #[constexpr] BK: usize,
) {
    let k = K as i32;
    let offs_m = program_id(0) * BM as i32 + arange(0, BM);
    let offs_n = program_id(1) * BN as i32 + arange(0, BN);
    let offs_k = arange(0, BK);
    let m_ok = (offs_m < m)[(.., None)];
    let n_ok = (offs_n < n)[(None, ..)];
    let x_rows = x + offs_m[(.., None)] * k;
    let w_cols = w + offs_n[(None, ..)] * k;
    let mut acc = zeros([BM, BN], DType::F32);
    for k0 in range(0, k, BK as i32) {
        let kk = k0 + offs_k;
        let (tx, tw) = if K % BK == 0 {
            (
                load(x_rows + kk[(None, ..)], mask = m_ok, other = 0.0),
                load(w_cols + kk[(.., None)], mask = n_ok, other = 0.0),
            )
        } else {
            let k_ok = kk < k;
            (
                load(
                    x_rows + kk[(None, ..)],
                    mask = m_ok & k_ok[(None, ..)],
                    other = 0.0,
                ),
                load(
                    w_cols + kk[(.., None)],
                    mask = k_ok[(.., None)] & n_ok,
                    other = 0.0,
                ),
            )
        };
        acc = dot(tx, tw, acc);
    }
    let y_ptrs = y + offs_m[(.., None)] * n + offs_n[(None, ..)];
    store(y_ptrs, acc.to(O::DTYPE), mask = m_ok & n_ok);
}
