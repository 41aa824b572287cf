//! Causal attention over a KV cache, as a decoder runs it in prefill and in decode, with
//! grouped-query attention (GQA): `H` query heads share `H / H_kv` key/value heads.
//!
//! The cache holds `[B, H_kv, L_max, D]` keys and values; a forward step appends `T` new
//! positions at `pos..pos + T` ([`kv_cache_write`]) and attends each new query `t` to the
//! keys `0..=pos + t` ([`attention_cached`]). A program takes one KV head and `BM` rows of
//! the `T · G` (position, query head of the group) pairs, so the `G` query heads that
//! share a KV head read its keys once, and a decode step (`T = 1`) still gives the `dot`
//! `G` rows.

use tritium::prelude::*;

/// `out[b, t, h, :] = softmax(q[b, h, t, :] · K[b, h / G, ..=pos + t, :]ᵀ · sm_scale) V`
/// for `t < T`: `q` strided (`sq_b`, `sq_h`, `sq_t`, unit stride along `D`), the caches
/// `[B, H_kv, L_max, D]` row-major (`kv_len = pos + T` positions filled), `out`
/// `[B, T, H, D]` row-major (the layout the output projection reads as `[B·T, H·D]`).
/// Grid: `[cdiv(T · G, BM), B · H_kv]`. Scores in f32, `exp2` of `log2 e`-scaled scores
/// (FlashAttention's online softmax, as [`crate::attention::attention_forward`]).
#[kernel]
pub fn attention_cached<T: Float>(
    out: Ptr<T>,
    q: Ptr<T>,
    k_cache: Ptr<T>,
    v_cache: Ptr<T>,
    sq_b: i32,
    sq_h: i32,
    sq_t: i32,
    n_new: i32,
    pos: i32,
    l_max: i32,
    heads_kv: i32,
    sm_scale: f32,
    #[constexpr] G: usize,
    #[constexpr] BM: usize,
    #[constexpr] BN: usize,
    #[constexpr] D: usize,
) {
    let bh = program_id(1);
    let b = bh / heads_kv;
    let h_kv = bh % heads_kv;
    let g = G as i32;
    let rows = program_id(0) * BM as i32 + arange(0, BM);
    let t = rows / g;
    // `rows < n_new · G`, said of `t` so that the bounds proof sees the position's range.
    let row_ok = t < n_new;
    let head = h_kv * g + rows % g;
    let d = arange(0, D);
    let q_rows = b.to(DType::I64) * sq_b + head * sq_h + t * sq_t;
    let qt = load(
        q + q_rows[(.., None)] + d[(None, ..)],
        mask = row_ok[(.., None)],
        other = 0.0,
    );
    let kv_base = bh.to(DType::I64) * l_max * D as i32;
    let kv_len = pos + n_new;
    // One past the last key any row of this block sees.
    let last_row = minimum(program_id(0) * BM as i32 + BM as i32, n_new * g) - 1;
    let hi = minimum(pos + last_row / g + 1, kv_len);
    let offs_n = arange(0, BN);
    let mut m_i = full([BM], f32::NEG_INFINITY, DType::F32);
    let mut l_i = full([BM], 0.0, DType::F32);
    let mut acc = zeros([BM, D], DType::F32);
    let qk_scale = sm_scale * 1.44269504;
    for start_n in range(0, hi, BN as i32) {
        let keys = start_n + offs_n;
        let key_ok = keys < kv_len;
        // Kᵀ: `D × BN`.
        let kt = load(
            k_cache + kv_base + keys[(None, ..)] * D as i32 + d[(.., None)],
            mask = key_ok[(None, ..)],
            other = 0.0,
        );
        let qk = dot(qt, kt) * qk_scale;
        let seen = key_ok[(None, ..)] & (keys[(None, ..)] <= pos + t[(.., None)]);
        // -1e6 rather than -inf: a masked score gives exp2 = 0, never a NaN.
        let qk = where_(seen, qk, -1.0e6);
        let m_ij = maximum(m_i, max(qk, 1));
        let p = exp2(qk - m_ij[(.., None)]);
        let alpha = exp2(m_i - m_ij);
        l_i = fma(l_i, alpha, sum(p, 1));
        let vt = load(
            v_cache + kv_base + keys[(.., None)] * D as i32 + d[(None, ..)],
            mask = key_ok[(.., None)],
            other = 0.0,
        );
        acc = dot(p.to(T::DTYPE), vt, acc * alpha[(.., None)]);
        m_i = m_ij;
    }
    let o = acc / l_i[(.., None)];
    let heads = heads_kv * g;
    let o_rows = ((b * n_new + t) * heads + head).to(DType::I64) * D as i32;
    store(
        out + o_rows[(.., None)] + d[(None, ..)],
        o.to(T::DTYPE),
        mask = row_ok[(.., None)],
    );
}

/// Appends `T` positions to a `[B, H_kv, L_max, D]` cache at `pos..pos + T`: `cache[b, h,
/// pos + t, :] = x[b, h, t, :]`, `x` strided (`sx_b`, `sx_h`, `sx_t`, unit stride along
/// `D`). Grid: `[T, B · H_kv]`.
#[kernel]
pub fn kv_cache_write<T: Element>(
    cache: Ptr<T>,
    x: Ptr<T>,
    sx_b: i32,
    sx_h: i32,
    sx_t: i32,
    pos: i32,
    l_max: i32,
    heads_kv: i32,
    #[constexpr] D: usize,
) {
    let t = program_id(0);
    let bh = program_id(1);
    let b = bh / heads_kv;
    let h = bh % heads_kv;
    let d = arange(0, D);
    let src = b.to(DType::I64) * sx_b + h * sx_h + t * sx_t;
    let dst = (bh.to(DType::I64) * l_max + pos + t) * D as i32;
    store(cache + dst + d, load(x + src + d));
}
