//! Triton tutorial 06: fused attention (FlashAttention-2's forward and backward passes),
//! in its block-pointer form. Each program owns `BM` query rows of one (batch, head): it streams
//! the keys and values in `BN`-row blocks, keeping a running row maximum `m_i`, a running
//! softmax denominator `l_i` and the output accumulator, rescaled by `exp2(m_old - m_new)`
//! whenever the maximum grows. Scores are scaled by `sm_scale · log2(e)` so that `exp2`
//! stands for `exp`. Unlike the tutorial, the sequence length need not be a multiple of
//! the blocks: loads are bounds-checked with zero padding and scores of keys past the end
//! are masked.

use ndarray::{Array3, Array4, ArrayView3, ArrayView4};
use tritium::prelude::*;

/// `out = softmax(q kᵀ · sm_scale) v` for `[Z, H, N, D]` row-major tensors (`CAUSAL`:
/// query `i` sees keys `0..=i`), and `lse` (`[Z, H, N]`), each row's log2-sum-exp2 of
/// its scaled scores, which the backward pass needs. fp8 `v` is given transposed (`[Z, H,
/// D, N]`), as tutorial 06 takes it: fp8 tensor-core products read their `b` K-major.
#[kernel]
pub fn attention_forward<T: Float>(
    out: Ptr<T>,
    lse: Ptr<f32>,
    q: Ptr<T>,
    k: Ptr<T>,
    v: Ptr<T>,
    sm_scale: f32,
    n_ctx: i32,
    #[constexpr] BM: usize,
    #[constexpr] BN: usize,
    #[constexpr] D: usize,
    #[constexpr] CAUSAL: bool,
) {
    let start_m = program_id(0);
    let off_hz = program_id(1);
    let head = off_hz.to(DType::I64) * n_ctx.to(DType::I64) * D as i64;
    let d = D as i32;
    let q_block = make_block_ptr(
        q + head,
        (n_ctx, d),
        (d, 1),
        (start_m * BM as i32, 0),
        (BM, D),
        (1, 0),
    );
    // Kᵀ: the keys read as a `D × N` matrix.
    let k_block = make_block_ptr(k + head, (d, n_ctx), (1, d), (0, 0), (D, BN), (0, 1));
    // fp8: `v` given transposed (`[Z, H, D, N]`, keys contiguous), as tutorial 06 takes it:
    // fp8 tensor-core products read `b` K-major.
    let v_block = if T::DTYPE.size_bytes() == 1 {
        make_block_ptr(v + head, (n_ctx, d), (1, n_ctx), (0, 0), (BN, D), (0, 1))
    } else {
        make_block_ptr(v + head, (n_ctx, d), (d, 1), (0, 0), (BN, D), (1, 0))
    };
    let o_block = make_block_ptr(
        out + head,
        (n_ctx, d),
        (d, 1),
        (start_m * BM as i32, 0),
        (BM, D),
        (1, 0),
    );
    let offs_m = start_m * BM as i32 + arange(0, BM);
    let m_i = full([BM], f32::NEG_INFINITY, DType::F32);
    let l_i = full([BM], 1.0, DType::F32);
    let acc = zeros([BM, D], DType::F32);
    let qk_scale = sm_scale * 1.44269504;
    let qt = load(q_block, boundary_check = (0,), padding_option = "zero");
    // Tutorial 06's stages: the key blocks every query row sees whole run without masks
    // (causal: those before the diagonal band; otherwise every block before the last partial
    // one), then the band or the partial block with them.
    let band = CAUSAL && BM % BN == 0;
    let whole = if band {
        start_m * BM as i32
    } else if CAUSAL {
        scalar(0, DType::I32)
    } else {
        n_ctx / BN as i32 * BN as i32
    };
    let hi = if CAUSAL {
        minimum((start_m + 1) * BM as i32, n_ctx)
    } else {
        n_ctx
    };
    let state = (acc, l_i, m_i, k_block, v_block);
    let first = scalar(0, DType::I32);
    let state = attend::<T>(
        state,
        qt,
        qk_scale,
        offs_m,
        (first, whole),
        n_ctx,
        BN,
        false,
        CAUSAL,
    );
    let (acc, l_i, m_i, _, _) = attend::<T>(
        state,
        qt,
        qk_scale,
        offs_m,
        (whole, hi),
        n_ctx,
        BN,
        true,
        CAUSAL,
    );
    let rows = off_hz * n_ctx + offs_m;
    store(lse + rows, m_i + log2(l_i), mask = offs_m < n_ctx);
    let o = acc / l_i[(.., None)];
    store(o_block, o.to(T::DTYPE), boundary_check = (0,));
}

/// The key blocks `lo..hi` of [`attention_forward`] (FlashAttention's online softmax):
/// `state` is the accumulator, the running sum and max, and the `k` and `v` block
/// pointers at `lo`. `MASKED`: scores of keys past `n_ctx` (and, `CAUSAL`, past the query
/// row) are masked; else every key of every block is seen.
#[device]
#[allow(clippy::too_many_arguments, clippy::type_complexity)]
fn attend<T: Float>(
    state: (Tile, Tile, Tile, BlockPtr, BlockPtr),
    qt: Tile,
    qk_scale: Tile,
    offs_m: Tile,
    (lo, hi): (Tile, Tile),
    n_ctx: Tile,
    #[constexpr] BN: usize,
    #[constexpr] MASKED: bool,
    #[constexpr] CAUSAL: bool,
) -> (Tile, Tile, Tile, BlockPtr, BlockPtr) {
    let (mut acc, mut l_i, mut m_i, mut k_block, mut v_block) = state;
    let offs_n = arange(0, BN);
    for start_n in range(lo, hi, BN as i32) {
        // Unmasked, every block is whole (`hi` a multiple of `BN` no later than `n_ctx`):
        // no bounds to check, as tutorial 06's block pointers have none.
        let kt = if MASKED {
            load(k_block, boundary_check = (1,), padding_option = "zero")
        } else {
            load(k_block)
        };
        let qk = dot(qt, kt);
        let keys = (start_n + offs_n, n_ctx);
        let (m_ij, p, alpha) = softmax_block(qk, qk_scale, m_i, offs_m, keys, MASKED, CAUSAL);
        l_i = fma(l_i, alpha, sum(p, 1));
        let vt = if MASKED {
            load(v_block, boundary_check = (0,), padding_option = "zero")
        } else {
            load(v_block)
        };
        acc = dot(p.to(T::DTYPE), vt, acc * alpha[(.., None)]);
        m_i = m_ij;
        k_block = advance(k_block, (0, BN as i32));
        v_block = advance(v_block, (BN as i32, 0));
    }
    (acc, l_i, m_i, k_block, v_block)
}

/// One key block of FlashAttention's online softmax: from the block's scores `qk` (query
/// rows `offs_m`, keys `cols` of `n_ctx`) and the running row max `m_i`, the new max, the
/// block's `p = exp2(scaled score − max)` and `alpha = exp2(m_i − new max)`, by which the
/// caller rescales its running sum and accumulator. `MASKED`: keys past `n_ctx` (and,
/// `CAUSAL`, past the query row) get Triton's -1e6 rather than -inf, so that `p` is 0,
/// never a NaN. As tutorial 06 (where Triton contracts by default): unmasked, the row max
/// is taken before scaling (the scale is positive), so scaling and subtracting it are one
/// FMA per score; masked, scaling and the mask's bias are.
#[device]
pub fn softmax_block(
    qk: Tile,
    qk_scale: Tile,
    m_i: Tile,
    offs_m: Tile,
    (cols, n_ctx): (Tile, Tile),
    #[constexpr] MASKED: bool,
    #[constexpr] CAUSAL: bool,
) -> (Tile, Tile, Tile) {
    let (m_ij, p) = if MASKED {
        let mut valid = broadcast_to(cols[(None, ..)] < n_ctx, qk.shape());
        if CAUSAL {
            valid &= offs_m[(.., None)] >= cols[(None, ..)];
        }
        let s = fma(qk, qk_scale, where_(valid, 0.0, -1.0e6));
        let m_ij = maximum(m_i, max(s, 1));
        (m_ij, exp2(s - m_ij[(.., None)]))
    } else {
        let m_ij = maximum(m_i, max(qk, 1) * qk_scale);
        (m_ij, exp2(fma(qk, qk_scale, -m_ij[(.., None)])))
    };
    (m_ij, p, exp2(m_i - m_ij))
}

/// The backward pass's first step: `delta_i = Σ_d o_id · do_id` per row (`[Z·H·N]`).
#[kernel]
pub fn attention_backward_delta<T: Float>(
    delta: Ptr<f32>,
    o: Ptr<T>,
    d_o: Ptr<T>,
    rows: i32,
    #[constexpr] BM: usize,
    #[constexpr] D: usize,
) {
    let offs_m = program_id(0) * BM as i32 + arange(0, BM);
    let d = D as i32;
    let at = make_block_ptr(
        o,
        (rows, d),
        (d, 1),
        (program_id(0) * BM as i32, 0),
        (BM, D),
        (1, 0),
    );
    let dat = make_block_ptr(
        d_o,
        (rows, d),
        (d, 1),
        (program_id(0) * BM as i32, 0),
        (BM, D),
        (1, 0),
    );
    let ov = load(at, boundary_check = (0,), padding_option = "zero").to(DType::F32);
    let dov = load(dat, boundary_check = (0,), padding_option = "zero").to(DType::F32);
    store(delta + offs_m, sum(ov * dov, 1), mask = offs_m < rows);
}

/// `dk` and `dv` of one `BN`-row block of keys and values: every query block's
/// probabilities are recomputed from `lse` (`p = exp2(q·k · sm_scale·log2 e − lse)`), then
/// `dv += pᵀ do`, `ds = p ∘ (do vᵀ − delta)` and `dk += dsᵀ q · sm_scale`. `CAUSAL`: query
/// `i` sees keys `0..=i`.
#[kernel]
pub fn attention_backward_dkdv<T: Float>(
    dk: Ptr<T>,
    dv: Ptr<T>,
    q: Ptr<T>,
    k: Ptr<T>,
    v: Ptr<T>,
    d_o: Ptr<T>,
    lse: Ptr<f32>,
    delta: Ptr<f32>,
    sm_scale: f32,
    n_ctx: i32,
    #[constexpr] BM: usize,
    #[constexpr] BN: usize,
    #[constexpr] D: usize,
    #[constexpr] CAUSAL: bool,
) {
    let start_n = program_id(0) * BN as i32;
    let off_hz = program_id(1);
    let head = off_hz.to(DType::I64) * n_ctx.to(DType::I64) * D as i64;
    let d = D as i32;
    let rows = off_hz * n_ctx;
    let k_block = make_block_ptr(k + head, (n_ctx, d), (d, 1), (start_n, 0), (BN, D), (1, 0));
    let v_block = make_block_ptr(v + head, (n_ctx, d), (d, 1), (start_n, 0), (BN, D), (1, 0));
    let kt = load(k_block, boundary_check = (0,), padding_option = "zero");
    let vt = load(v_block, boundary_check = (0,), padding_option = "zero");
    let offs_n = start_n + arange(0, BN);
    let mut dk_acc = zeros([BN, D], DType::F32);
    let mut dv_acc = zeros([BN, D], DType::F32);
    // Qᵀ and dOᵀ: `D × BM` blocks, moved along the queries.
    let mut qt_block = make_block_ptr(q + head, (d, n_ctx), (1, d), (0, 0), (D, BM), (0, 1));
    let mut do_block = make_block_ptr(d_o + head, (n_ctx, d), (d, 1), (0, 0), (BM, D), (1, 0));
    let qk_scale = sm_scale * 1.44269504;
    for start_m in range(0, n_ctx, BM as i32) {
        let qt = load(qt_block, boundary_check = (1,), padding_option = "zero");
        let dot_ = load(do_block, boundary_check = (0,), padding_option = "zero");
        let offs_m = start_m + arange(0, BM);
        let m_i = load(lse + rows + offs_m, mask = offs_m < n_ctx, other = 0.0);
        // pᵀ: `BN × BM`, one column per query.
        let mut valid = broadcast_to(offs_m[(None, ..)] < n_ctx, [BN, BM]);
        if CAUSAL {
            valid = valid & (offs_m[(None, ..)] >= offs_n[(.., None)]);
        }
        let pt = where_(valid, exp2(dot(kt, qt) * qk_scale - m_i[(None, ..)]), 0.0);
        dv_acc = dot(pt.to(T::DTYPE), dot_, dv_acc);
        let di = load(delta + rows + offs_m, mask = offs_m < n_ctx, other = 0.0);
        let dpt = dot(vt, trans(dot_));
        let dst = pt * (dpt - di[(None, ..)]);
        dk_acc = dot(dst.to(T::DTYPE), trans(qt), dk_acc);
        qt_block = advance(qt_block, (0, BM as i32));
        do_block = advance(do_block, (BM as i32, 0));
    }
    let dk_block = make_block_ptr(dk + head, (n_ctx, d), (d, 1), (start_n, 0), (BN, D), (1, 0));
    let dv_block = make_block_ptr(dv + head, (n_ctx, d), (d, 1), (start_n, 0), (BN, D), (1, 0));
    store(
        dk_block,
        (dk_acc * sm_scale).to(T::DTYPE),
        boundary_check = (0,),
    );
    store(dv_block, dv_acc.to(T::DTYPE), boundary_check = (0,));
}

/// `dq` of one `BM`-row block of queries: `dq += ds k · sm_scale` over every key block,
/// with `p` recomputed as in [`attention_backward_dkdv`].
#[kernel]
pub fn attention_backward_dq<T: Float>(
    dq: Ptr<T>,
    q: Ptr<T>,
    k: Ptr<T>,
    v: Ptr<T>,
    d_o: Ptr<T>,
    lse: Ptr<f32>,
    delta: Ptr<f32>,
    sm_scale: f32,
    n_ctx: i32,
    #[constexpr] BM: usize,
    #[constexpr] BN: usize,
    #[constexpr] D: usize,
    #[constexpr] CAUSAL: bool,
) {
    let start_m = program_id(0) * BM as i32;
    let off_hz = program_id(1);
    let head = off_hz.to(DType::I64) * n_ctx.to(DType::I64) * D as i64;
    let d = D as i32;
    let rows = off_hz * n_ctx;
    let q_block = make_block_ptr(q + head, (n_ctx, d), (d, 1), (start_m, 0), (BM, D), (1, 0));
    let do_block = make_block_ptr(
        d_o + head,
        (n_ctx, d),
        (d, 1),
        (start_m, 0),
        (BM, D),
        (1, 0),
    );
    let qv = load(q_block, boundary_check = (0,), padding_option = "zero");
    let dov = load(do_block, boundary_check = (0,), padding_option = "zero");
    let offs_m = start_m + arange(0, BM);
    let m_i = load(lse + rows + offs_m, mask = offs_m < n_ctx, other = 0.0);
    let di = load(delta + rows + offs_m, mask = offs_m < n_ctx, other = 0.0);
    let mut dq_acc = zeros([BM, D], DType::F32);
    // Kᵀ and Vᵀ: `D × BN` blocks, moved along the keys.
    let mut kt_block = make_block_ptr(k + head, (d, n_ctx), (1, d), (0, 0), (D, BN), (0, 1));
    let mut vt_block = make_block_ptr(v + head, (d, n_ctx), (1, d), (0, 0), (D, BN), (0, 1));
    let qk_scale = sm_scale * 1.44269504;
    let hi = if CAUSAL {
        minimum(start_m + BM as i32, n_ctx)
    } else {
        n_ctx
    };
    for start_n in range(0, hi, BN as i32) {
        let kt = load(kt_block, boundary_check = (1,), padding_option = "zero");
        let vt = load(vt_block, boundary_check = (1,), padding_option = "zero");
        let offs_n = start_n + arange(0, BN);
        let mut valid = broadcast_to(offs_n[(None, ..)] < n_ctx, [BM, BN]);
        if CAUSAL {
            valid = valid & (offs_m[(.., None)] >= offs_n[(None, ..)]);
        }
        let p = where_(valid, exp2(dot(qv, kt) * qk_scale - m_i[(.., None)]), 0.0);
        let dp = dot(dov, vt);
        let ds = p * (dp - di[(.., None)]);
        dq_acc = dot(ds.to(T::DTYPE), trans(kt), dq_acc);
        kt_block = advance(kt_block, (0, BN as i32));
        vt_block = advance(vt_block, (0, BN as i32));
    }
    let dq_block = make_block_ptr(dq + head, (n_ctx, d), (d, 1), (start_m, 0), (BM, D), (1, 0));
    store(
        dq_block,
        (dq_acc * sm_scale).to(T::DTYPE),
        boundary_check = (0,),
    );
}

/// The gradients `(dq, dk, dv)` of [`attention`] for the output gradient `d_o`, from the
/// forward pass's output `o` and row statistics `lse` (Triton tutorial 06's backward pass:
/// `delta`, then `dk`/`dv` per key block and `dq` per query block).
#[allow(clippy::too_many_arguments, clippy::type_complexity)]
pub fn attention_backward<T: Float + Default>(
    device: &Device,
    q: ArrayView4<T>,
    k: ArrayView4<T>,
    v: ArrayView4<T>,
    o: ArrayView4<T>,
    d_o: ArrayView4<T>,
    lse: ArrayView3<f32>,
    sm_scale: f32,
    config: AttentionConfig,
) -> tritium::Result<(Array4<T>, Array4<T>, Array4<T>)> {
    let shape = q.dim();
    let (z, h, n, d) = shape;
    let same = [k.dim(), v.dim(), o.dim(), d_o.dim()]
        .iter()
        .all(|s| *s == shape);
    if !same || lse.dim() != (z, h, n) {
        return Err(tritium::Error::Launch {
            kernel: "attention_backward".into(),
            message: format!(
                "q, k, v, o and do must have one shape [Z, H, N, D] and lse [Z, H, N]; got q {:?}, k {:?}, v {:?}, o {:?}, do {:?}, lse {:?}",
                q.shape(), k.shape(), v.shape(), o.shape(), d_o.shape(), lse.shape()
            ),
        });
    }
    let std4 = |a: ArrayView4<T>| a.as_standard_layout().into_owned();
    let (q, k, v, o, d_o) = (std4(q), std4(k), std4(v), std4(o), std4(d_o));
    let lse = lse.as_standard_layout().into_owned();
    let rows = z * h * n;
    let mut delta = ndarray::Array1::<f32>::zeros(rows);
    let (bm, bn) = (config.block_m, config.block_n);
    attention_backward_delta::launch(
        device,
        cdiv(rows.max(1), bm),
        &mut delta,
        o.view(),
        d_o.view(),
        rows as i32,
        bm,
        d,
    )?;
    let (mut dq, mut dk, mut dv) = (
        Array4::from_elem(shape, T::default()),
        Array4::from_elem(shape, T::default()),
        Array4::from_elem(shape, T::default()),
    );
    attention_backward_dkdv::launch(
        device,
        [cdiv(n.max(1), bn), z * h],
        &mut dk,
        &mut dv,
        q.view(),
        k.view(),
        v.view(),
        d_o.view(),
        lse.view(),
        delta.view(),
        sm_scale,
        n as i32,
        bm,
        bn,
        d,
        config.causal,
    )?;
    attention_backward_dq::launch(
        device,
        [cdiv(n.max(1), bm), z * h],
        &mut dq,
        q.view(),
        k.view(),
        v.view(),
        d_o.view(),
        lse.view(),
        delta.view(),
        sm_scale,
        n as i32,
        bm,
        bn,
        d,
        config.causal,
    )?;
    Ok((dq, dk, dv))
}

/// Block sizes and masking of [`attention`].
#[derive(Debug, Clone, Copy)]
pub struct AttentionConfig {
    /// Query rows per program.
    pub block_m: usize,
    /// Key rows per step.
    pub block_n: usize,
    /// Query `i` sees keys `0..=i` only.
    pub causal: bool,
}

/// 64 × 64: on the CPU, 8–12% faster forward than 64 × 32 (fewer, longer `dot`s per key
/// block) at N = 1024–4096, and no slower backward (`bench_table -- attention`).
impl Default for AttentionConfig {
    fn default() -> Self {
        AttentionConfig {
            block_m: 64,
            block_n: 64,
            causal: false,
        }
    }
}

impl AttentionConfig {
    /// The default blocks for head dimension `d`: from `d = 128` on, 128 query rows per
    /// program (each program then streams K and V from L3 half as often per query row:
    /// 3–5% faster forward at N = 1024–8192 on the CPU) and 128 keys per step (half the
    /// steps, each `dot` twice as long: 7–12% faster forward at N = 1024 and 4096, causal
    /// and not, the same at 8192, medians of five alternated runs of `bench_table
    /// attention`); else [`AttentionConfig::default`].
    pub fn for_head_dim(d: usize) -> Self {
        let wide = d >= 128;
        AttentionConfig {
            block_m: if wide { 128 } else { 64 },
            block_n: if wide { 128 } else { 64 },
            ..AttentionConfig::default()
        }
    }
}

/// Fused attention over `[Z, H, N, D]` tensors through [`attention_forward`]: the output
/// and each row's log2-sum-exp2 (`[Z, H, N]`).
pub fn attention<T: Float + Default>(
    device: &Device,
    q: ArrayView4<T>,
    k: ArrayView4<T>,
    v: ArrayView4<T>,
    sm_scale: f32,
    config: AttentionConfig,
) -> tritium::Result<(Array4<T>, Array3<f32>)> {
    let shape = q.dim();
    if k.dim() != shape || v.dim() != shape {
        return Err(tritium::Error::Launch {
            kernel: "attention_forward".into(),
            message: format!(
                "q, k and v must have one shape [Z, H, N, D], got {:?}, {:?} and {:?}",
                q.shape(),
                k.shape(),
                v.shape()
            ),
        });
    }
    let (z, h, n, d) = shape;
    // fp8 takes `v` transposed (see `attention_forward`).
    let v = match T::DTYPE.size_bytes() {
        1 => v.permuted_axes([0, 1, 3, 2]),
        _ => v,
    };
    let (q, k, v) = (
        q.as_standard_layout(),
        k.as_standard_layout(),
        v.as_standard_layout(),
    );
    let mut out = Array4::from_elem(shape, T::default());
    let mut lse = Array3::<f32>::zeros((z, h, n));
    let grid = [cdiv(n.max(1), config.block_m), z * h];
    attention_forward::launch(
        device,
        grid,
        &mut out,
        &mut lse,
        q.view(),
        k.view(),
        v.view(),
        sm_scale,
        n as i32,
        config.block_m,
        config.block_n,
        d,
        config.causal,
    )?;
    Ok((out, lse))
}
