//! Triton tutorial 06's fused attention forward in its Hopper form: `q`, `k`, `v` and
//! `out` read and written through tensor descriptors over the `[Z·H·N, D]` rows, one head
//! `N` rows further than the last, and the keys taken transposed as the tutorial writes
//! them (`desc_k.load([y, 0]).T`). On Hopper the key and value blocks of the loop are
//! copied by TMA; everywhere the results are [`crate::attention::attention_forward`]'s.
//!
//! As the tutorial, `N` is a multiple of the blocks (a block never spans two heads);
//! [`attention_on_descriptors`] checks it.

use crate::attention::{softmax_block, AttentionConfig};
use ndarray::{Array3, Array4, ArrayView4};
use tritium::prelude::*;

/// `out = softmax(q kᵀ · sm_scale) v` for `[Z, H, N, D]` row-major tensors (`z_h = Z·H`
/// heads of `n_ctx` rows, `n_ctx` a multiple of `BM` and `BN`, `BM` of `BN` when
/// `CAUSAL`), and `lse`, each row's log2-sum-exp2 of its scaled scores.
/// Grid: `[n_ctx / BM, Z·H]`.
#[kernel]
#[allow(clippy::too_many_arguments)]
pub fn attention_descriptor<T: Float>(
    out: Ptr<T>,
    lse: Ptr<f32>,
    q: Ptr<T>,
    k: Ptr<T>,
    v: Ptr<T>,
    sm_scale: f32,
    z_h: i32,
    n_ctx: i32,
    #[constexpr] BM: usize,
    #[constexpr] BN: usize,
    #[constexpr] D: usize,
    #[constexpr] CAUSAL: bool,
) {
    let start_m = program_id(0);
    let off_hz = program_id(1);
    let (y_dim, d) = (z_h * n_ctx, D as i32);
    let desc_q = make_tensor_descriptor(q, (y_dim, d), (d, 1), (BM, D));
    let desc_k = make_tensor_descriptor(k, (y_dim, d), (d, 1), (BN, D));
    let desc_v = make_tensor_descriptor(v, (y_dim, d), (d, 1), (BN, D));
    let desc_o = make_tensor_descriptor(out, (y_dim, d), (d, 1), (BM, D));
    let offset_y = off_hz * n_ctx;
    let qo_offset_y = offset_y + start_m * BM as i32;
    let offs_m = start_m * BM as i32 + arange(0, BM);
    let m_i = full([BM], f32::NEG_INFINITY, DType::F32);
    let l_i = full([BM], 1.0, DType::F32);
    let acc = zeros([BM, D], DType::F32);
    let qk_scale = sm_scale * 1.44269504;
    let q_block = desc_q.load((qo_offset_y, 0));
    // The tutorial's stages: the key blocks every query row sees whole (causal: those
    // before the diagonal band), then the band, masked.
    let whole = if CAUSAL { start_m * BM as i32 } else { n_ctx };
    let state = attend_blocks::<T>(
        (acc, l_i, m_i),
        q_block,
        (desc_k, desc_v, offset_y),
        qk_scale,
        (offs_m, n_ctx),
        (scalar(0, DType::I32), whole),
        BN,
        false,
    );
    let (acc, l_i, m_i) = if CAUSAL {
        let band = (whole, whole + BM as i32);
        attend_blocks::<T>(
            state,
            q_block,
            (desc_k, desc_v, offset_y),
            qk_scale,
            (offs_m, n_ctx),
            band,
            BN,
            true,
        )
    } else {
        state
    };
    store(lse + off_hz * n_ctx + offs_m, m_i + log2(l_i));
    let o = acc / l_i[(.., None)];
    desc_o.store((qo_offset_y, 0), o.to(T::DTYPE));
}

/// The key blocks `lo..hi` (FlashAttention's online softmax over `(acc, l_i, m_i)`):
/// `MASKED`, the diagonal band, where key `j` is seen by query rows from `j` on.
#[device]
#[allow(clippy::too_many_arguments)]
fn attend_blocks<T: Float>(
    state: (Tile, Tile, Tile),
    q_block: Tile,
    (desc_k, desc_v, offset_y): (TensorDescriptor, TensorDescriptor, Tile),
    qk_scale: Tile,
    (offs_m, n_ctx): (Tile, Tile),
    (lo, hi): (Tile, Tile),
    #[constexpr] BN: usize,
    #[constexpr] MASKED: bool,
) -> (Tile, Tile, Tile) {
    let (mut acc, mut l_i, mut m_i) = state;
    let offs_n = arange(0, BN);
    for start_n in range(lo, hi, BN as i32) {
        let k = desc_k.load((offset_y + start_n, 0)).t();
        let qk = dot(q_block, k);
        // The band: keys past the query row masked (`n_ctx`, a multiple of the blocks,
        // masks none).
        let keys = (start_n + offs_n, n_ctx);
        let (m_ij, p, alpha) = softmax_block(qk, qk_scale, m_i, offs_m, keys, MASKED, true);
        l_i = fma(l_i, alpha, sum(p, 1));
        let v = desc_v.load((offset_y + start_n, 0));
        acc = dot(p.to(T::DTYPE), v, acc * alpha[(.., None)]);
        m_i = m_ij;
    }
    (acc, l_i, m_i)
}

/// Fused attention over `[Z, H, N, D]` tensors through [`attention_descriptor`], as
/// [`crate::attention::attention`] gives it: the output and each row's log2-sum-exp2.
/// `N` must be a multiple of the config's blocks (and, causal, `block_m` of `block_n`).
pub fn attention_on_descriptors<T: Float + Default>(
    device: &Device,
    q: ArrayView4<T>,
    k: ArrayView4<T>,
    v: ArrayView4<T>,
    sm_scale: f32,
    config: AttentionConfig,
) -> tritium::Result<(Array4<T>, Array3<f32>)> {
    let shape = q.dim();
    let (z, h, n, d) = shape;
    let (bm, bn) = (config.block_m, config.block_n);
    let fail = |message: String| {
        Err(tritium::Error::Launch {
            kernel: "attention_descriptor".into(),
            message,
        })
    };
    if k.dim() != shape || v.dim() != shape {
        return fail(format!(
            "q, k and v must have one shape [Z, H, N, D], got {:?}, {:?} and {:?}",
            q.shape(),
            k.shape(),
            v.shape()
        ));
    }
    if n % bm != 0 || n % bn != 0 || (config.causal && bm % bn != 0) {
        return fail(format!(
            "N = {n} must be a multiple of block_m = {bm} and block_n = {bn} (and, causal, \
             block_m of block_n): a block of the [Z·H·N, D] rows must not span two heads"
        ));
    }
    let (q, k, v) = (
        q.as_standard_layout(),
        k.as_standard_layout(),
        v.as_standard_layout(),
    );
    let mut out = Array4::from_elem(shape, T::default());
    let mut lse = Array3::<f32>::zeros((z, h, n));
    if out.is_empty() {
        return Ok((out, lse));
    }
    attention_descriptor::launch(
        device,
        [n / bm, z * h],
        &mut out,
        &mut lse,
        q.view(),
        k.view(),
        v.view(),
        sm_scale,
        (z * h) as i32,
        n as i32,
        bm,
        bn,
        d,
        config.causal,
    )?;
    Ok((out, lse))
}
