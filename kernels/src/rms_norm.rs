//! RMSNorm (Liger-Kernel's, as Llama uses it): `y = x / sqrt(mean(x²) + eps) · w` per row,
//! in f32 whatever the element type, and its backward.

use tritium::prelude::*;

/// One row per program: `y[row] = x[row] · rstd · w`, `rstd[row] = 1 / sqrt(mean(x²) + eps)`.
#[kernel]
pub fn rms_norm_fwd<T: Float>(
    y: Ptr<T>,
    rstd: Ptr<f32>,
    x: Ptr<T>,
    w: Ptr<T>,
    n: i32,
    eps: f32,
    #[constexpr] BLOCK: usize,
) {
    let row = program_id(0).to(DType::I64);
    let cols = arange(0, BLOCK);
    let mask = cols < n;
    let xv = load(x + row * n + cols, mask = mask, other = 0.0).to(DType::F32);
    let r = rsqrt(sum(xv * xv, 0) / n.to(DType::F32) + eps);
    store(rstd + row, r);
    let wv = load(w + cols, mask = mask, other = 0.0).to(DType::F32);
    store(y + row * n + cols, (xv * r * wv).to(T::DTYPE), mask = mask);
}

/// The gradients of [`rms_norm_fwd`] for one row per program: `dx`, and the row's share
/// of `dw` (`dy · x · rstd`, summed over rows by the caller); `rstd` as the forward
/// stored it.
#[kernel]
pub fn rms_norm_bwd<T: Float>(
    dx: Ptr<T>,
    dw_rows: Ptr<f32>,
    dy: Ptr<T>,
    x: Ptr<T>,
    w: Ptr<T>,
    rstd: Ptr<f32>,
    n: i32,
    #[constexpr] BLOCK: usize,
) {
    let row = program_id(0).to(DType::I64);
    let cols = arange(0, BLOCK);
    let mask = cols < n;
    let off = row * n + cols;
    let xv = load(x + off, mask = mask, other = 0.0).to(DType::F32);
    let dyv = load(dy + off, mask = mask, other = 0.0).to(DType::F32);
    let wv = load(w + cols, mask = mask, other = 0.0).to(DType::F32);
    let r = load(rstd + row);
    let dyw = dyv * wv;
    let c = sum(dyw * xv, 0) / n.to(DType::F32);
    let dxv = r * dyw - r * r * r * xv * c;
    store(dx + off, dxv.to(T::DTYPE), mask = mask);
    store(dw_rows + off, dyv * xv * r, mask = mask);
}

/// `dw[col] = Σ_row dw_rows[row, col]`: the column sums of [`rms_norm_bwd`]'s per-row shares
/// of `dw` (`rows × n`, row-major), in f32, `BLOCK_N` columns per program, `BLOCK_M` rows at
/// a time.
#[kernel]
pub fn rms_norm_bwd_dw<T: Float>(
    dw: Ptr<T>,
    dw_rows: Ptr<f32>,
    rows: i32,
    n: i32,
    #[constexpr] BLOCK_M: usize,
    #[constexpr] BLOCK_N: usize,
) {
    let cols = program_id(0) * BLOCK_N as i32 + arange(0, BLOCK_N);
    let mut acc = zeros([BLOCK_M, BLOCK_N], DType::F32);
    for r0 in range(0, rows, BLOCK_M as i32) {
        let rs = r0 + arange(0, BLOCK_M);
        let mask = (rs[(.., None)] < rows) & (cols[(None, ..)] < n);
        let offs = rs[(.., None)].to(DType::I64) * n + cols[(None, ..)];
        acc += load(dw_rows + offs, mask = mask, other = 0.0);
    }
    store(dw + cols, sum(acc, 0).to(T::DTYPE), mask = cols < n);
}
