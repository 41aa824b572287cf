//! `y = x wᵀ` with `w` in PyTorch's `Linear` layout (`[n, K]`, a row per output): the
//! projections of a transformer, tutorial 03's blocked product with the weight read
//! transposed.

use crate::matmul::matmul_block;
use tritium::prelude::*;

/// `y[m, n] = x[m, K] · w[n, K]ᵀ`, all row-major and contiguous, accumulated in f32:
/// tutorial 03's block ([`crate::matmul`]'s `matmul_block`) with `w` read as `wᵀ`, one
/// `BM × BN` block of `y` per program (grid `[cdiv(m, BM), cdiv(n, BN)]`), blocks timed
/// once per shape among those that suit a transformer's projections. `K` is a constexpr,
/// so every stride is known when the kernel compiles (`matmul` on the transposed view
/// `w.t()` gives the same product with run-time strides and tutorial 03's blocks).
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
    // Tutorial 03's block with `x`'s and `w`'s strides: `w` read as `wᵀ`, its row length
    // a constant of the kernel.
    let (k, one) = (scalar(K as i32, DType::I32), scalar(1, DType::I32));
    let strides = (k, one, one, k, n, one);
    let at = (program_id(0), program_id(1));
    matmul_block((y, x, w), (m, n, k), strides, at, BM, BN, BK);
}
