//! Triton tutorial 06: fused attention (FlashAttention-2's forward pass), in its
//! block-pointer form. Each program owns `BM` query rows of one (batch, head): it streams
//! the keys and values in `BN`-row blocks, keeping a running row maximum `m_i`, a running
//! softmax denominator `l_i` and the output accumulator, rescaled by `exp2(m_old - m_new)`
//! whenever the maximum grows. Scores are scaled by `sm_scale · log2(e)` so that `exp2`
//! stands for `exp`. Unlike the tutorial, the sequence length need not be a multiple of
//! the blocks: loads are bounds-checked with zero padding and scores of keys past the end
//! are masked.

use ndarray::{Array3, Array4, ArrayView4};
use tritium::prelude::*;

/// `out = softmax(q kᵀ · sm_scale) v` for `[Z, H, N, D]` row-major tensors (`CAUSAL`:
/// query `i` sees keys `0..=i`), and `lse` (`[Z, H, N]`), each row's log2-sum-exp2 of
/// its scaled scores, which the backward pass needs.
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
    let mut k_block = make_block_ptr(k + head, (d, n_ctx), (1, d), (0, 0), (D, BN), (0, 1));
    let mut v_block = make_block_ptr(v + head, (n_ctx, d), (d, 1), (0, 0), (BN, D), (1, 0));
    let o_block = make_block_ptr(
        out + head,
        (n_ctx, d),
        (d, 1),
        (start_m * BM as i32, 0),
        (BM, D),
        (1, 0),
    );
    let offs_m = start_m * BM as i32 + arange(0, BM);
    let offs_n = arange(0, BN);
    let mut m_i = full([BM], f32::NEG_INFINITY, DType::F32);
    let mut l_i = full([BM], 1.0, DType::F32);
    let mut acc = zeros([BM, D], DType::F32);
    let qk_scale = sm_scale * 1.44269504;
    let qt = load(q_block, boundary_check = (0,), padding_option = "zero");
    let hi = if CAUSAL {
        minimum((start_m + 1) * BM as i32, n_ctx)
    } else {
        n_ctx
    };
    for start_n in range(0, hi, BN as i32) {
        let kt = load(k_block, boundary_check = (1,), padding_option = "zero");
        let cols = start_n + offs_n;
        let mut valid = broadcast_to(cols[(None, ..)] < n_ctx, [BM, BN]);
        if CAUSAL {
            valid = valid & (offs_m[(.., None)] >= cols[(None, ..)]);
        }
        // Triton's -1e6 rather than -inf: a masked score gives exp2 = 0, never a NaN.
        let qk = where_(valid, dot(qt, kt) * qk_scale, -1.0e6);
        let m_ij = maximum(m_i, max(qk, 1));
        let p = exp2(qk - m_ij[(.., None)]);
        let alpha = exp2(m_i - m_ij);
        l_i = l_i * alpha + sum(p, 1);
        let vt = load(v_block, boundary_check = (0,), padding_option = "zero");
        acc = dot(p.to(T::DTYPE), vt, acc * alpha[(.., None)]);
        m_i = m_ij;
        k_block = advance(k_block, (0, BN as i32));
        v_block = advance(v_block, (BN as i32, 0));
    }
    let rows = off_hz * n_ctx + offs_m;
    store(lse + rows, m_i + log2(l_i), mask = offs_m < n_ctx);
    let o = acc / l_i[(.., None)];
    store(o_block, o.to(T::DTYPE), boundary_check = (0,));
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

impl Default for AttentionConfig {
    fn default() -> Self {
        AttentionConfig {
            block_m: 64,
            block_n: 32,
            causal: false,
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
