//! The decoder's inference-only launches on candle tensors (f32), CPU or CUDA ones alike:
//! each runs [`On`] the tensors' device, takes its inputs where they lie (a tensor is a
//! kernel's pointer argument, strides passed along) and makes its output, written in the
//! tensors' memory ([`On::zeros`]), a new tensor without a copy.

use crate::candle_error;
use crate::on::{Buffer, On};
use candle_core::{DType, Error, Result, Tensor};
use tritium::dsl::trace::lang::next_power_of_2;
use tritium_kernels::attention_cached::{attention_cached, kv_cache_write};
use tritium_kernels::embedding::embedding;
use tritium_kernels::linear::linear;
use tritium_kernels::matvec::matvec;
use tritium_kernels::sampling::sample_tokens;
use tritium_kernels::vector_add::add;

fn cdiv(a: usize, b: usize) -> usize {
    a.div_ceil(b)
}

/// A `[rows, n]` tensor's dims, or an error naming `what` and its shape.
fn matrix(t: &Tensor, what: &str) -> Result<(usize, usize)> {
    match t.dims() {
        [r, n] => Ok((*r, *n)),
        d => Err(Error::Msg(format!(
            "{what}: expected a matrix, got shape {d:?}"
        ))),
    }
}

/// `n` zeroed elements where `on`'s tensors lie, for a kernel to write.
fn zeros<E: crate::KernelElem>(on: &On, n: usize) -> Result<Buffer<E>> {
    on.zeros(n).map_err(candle_error)
}

/// Rows of `x` up to which [`linear`] streams the weight once per row ([`matvec`]) rather
/// than multiplying blocks.
const MATVEC_ROWS: usize = 4;

/// [`matvec`]'s weight rows per program, and its step along `k` for a row of `k`: the
/// widest of 512 … 32 lanes that divides it (no masks), else 128 with masks.
const MATVEC_ROWS_PER_PROGRAM: usize = 8;

fn matvec_step(k: usize) -> (usize, bool) {
    match [512, 256, 128, 64, 32]
        .into_iter()
        .find(|b| k.is_multiple_of(*b))
    {
        Some(b) => (b, true),
        None => (128, false),
    }
}

/// `x wᵀ` for `x` `[m, k]` and a weight `w` `[n, k]` (PyTorch's `Linear` layout, read
/// transposed): [`matvec`] for a decode step's few rows, else Tritium's [`linear`]
/// (tutorial 03's product with the weight's row length a constexpr), its blocks tuned
/// once per shape.
pub fn linear(on: &On, x: &Tensor, w: &Tensor) -> Result<Tensor> {
    let ((m, k), (n, kw)) = (matrix(x, "linear x")?, matrix(w, "linear w")?);
    if k != kw {
        return Err(Error::Msg(format!(
            "linear: x is [{m}, {k}] but w is [{n}, {kw}] (in features differ)"
        )));
    }
    // A 16-bit weight multiplies `x` rounded to its dtype, the sums in f32.
    let x = match w.dtype() {
        DType::F32 => x.clone(),
        d => x.to_dtype(d)?,
    };
    let c = match w.dtype() {
        DType::F32 => linear_as::<f32>(on, &x, w, (m, k, n))?,
        DType::BF16 => linear_as::<half::bf16>(on, &x, w, (m, k, n))?,
        DType::F16 => linear_as::<half::f16>(on, &x, w, (m, k, n))?,
        d => {
            return Err(Error::Msg(format!(
                "linear: weights of {d:?}: f32, bf16 or f16 only"
            )))
        }
    };
    c.into_tensor((m, n))
}

/// [`linear`] with `x` and `w` of element `T`: the `[m, n]` f32 product.
fn linear_as<T: tritium::prelude::Float>(
    on: &On,
    x: &Tensor,
    w: &Tensor,
    (m, k, n): (usize, usize, usize),
) -> Result<Buffer<f32>> {
    let (sx, sw) = (x.stride(), w.stride());
    let mut c = zeros::<f32>(on, m * n)?;
    let i = |v: usize| v as i32;
    if m <= MATVEC_ROWS && sx[1] == 1 && sw[1] == 1 {
        let (rows, (bk, even)) = (MATVEC_ROWS_PER_PROGRAM, matvec_step(k));
        matvec::launch_with::<T, f32>(
            on.device(),
            [cdiv(n, rows), m],
            on.options(),
            &mut c,
            x,
            w,
            i(n),
            i(k),
            i(sx[0]),
            i(sw[0]),
            i(n),
            rows,
            bk,
            even,
        )
        .map_err(candle_error)?;
        return Ok(c);
    }
    // The weight's rows as the kernel reads them: contiguous, `k` apart.
    let w = match sw == [k, 1] {
        true => w.clone(),
        false => w.contiguous()?,
    };
    let x = x.contiguous()?;
    linear::launch_with::<T, f32, _>(
        on.device(),
        |meta: &linear::Meta| [cdiv(m.max(1), meta.BM), cdiv(n.max(1), meta.BN)],
        on.options(),
        &mut c,
        &x,
        &w,
        i(m),
        i(n),
        k,
    )
    .map_err(candle_error)?;
    Ok(c)
}

/// `a + b` elementwise (the residual adds), both contiguous and of one shape.
pub fn add_tensors(on: &On, a: &Tensor, b: &Tensor) -> Result<Tensor> {
    if a.dims() != b.dims() {
        return Err(Error::Msg(format!(
            "add: shapes {:?} and {:?} differ",
            a.dims(),
            b.dims()
        )));
    }
    let (a, b) = (a.contiguous()?, b.contiguous()?);
    let n = a.elem_count();
    const BLOCK: usize = 4096;
    let mut out = zeros::<f32>(on, n)?;
    let (device, grid, options) = (on.device(), cdiv(n, BLOCK), on.options());
    add::launch_with::<f32>(device, grid, options, &mut out, &a, &b, n as i32, BLOCK)
        .map_err(candle_error)?;
    out.into_tensor(a.dims())
}

/// The rows of `table` `[vocab, hidden]` for the `ids` (u32, any shape): `[ids…, hidden]`.
pub fn embed(on: &On, table: &Tensor, ids: &Tensor) -> Result<Tensor> {
    let (_, hidden) = matrix(table, "embedding table")?;
    let ids = ids.contiguous()?;
    let n = ids.elem_count();
    let mut out = zeros::<f32>(on, n * hidden)?;
    embedding::launch_with::<f32>(
        on.device(),
        n,
        on.options(),
        &mut out,
        table,
        &ids,
        hidden as i32,
        next_power_of_2(hidden),
    )
    .map_err(candle_error)?;
    let mut shape = ids.dims().to_vec();
    shape.push(hidden);
    out.into_tensor(shape)
}

/// A layer's key and value caches, `[B, H_kv, L_max, D]` each, as the attention reads them,
/// where the model's tensors lie.
#[derive(Debug)]
pub struct LayerCache {
    /// Keys after RoPE.
    pub k: Buffer<f32>,
    /// Values.
    pub v: Buffer<f32>,
}

impl LayerCache {
    /// Zeroed caches for `shape`.
    pub fn new(on: &On, shape: AttentionShape) -> Result<LayerCache> {
        let n = shape.batch * shape.kv_heads * shape.max_seq * shape.head_dim;
        Ok(LayerCache {
            k: zeros(on, n)?,
            v: zeros(on, n)?,
        })
    }
}

/// The shape of one layer's attention: heads, KV heads, head dim, cache length.
#[derive(Debug, Clone, Copy)]
pub struct AttentionShape {
    /// Batch.
    pub batch: usize,
    /// Query heads.
    pub heads: usize,
    /// Key/value heads.
    pub kv_heads: usize,
    /// Head width (a power of two ≥ 16).
    pub head_dim: usize,
    /// Positions each cache holds.
    pub max_seq: usize,
}

/// Writes `k` and `v` (`[B, H_kv, T, D]`, any strides with unit `D` stride) into `cache`
/// at positions `pos..pos + T`.
pub fn cache_write(
    on: &On,
    cache: &mut LayerCache,
    k: &Tensor,
    v: &Tensor,
    pos: usize,
    shape: AttentionShape,
) -> Result<()> {
    for (x, dst) in [(k, &mut cache.k), (v, &mut cache.v)] {
        let (b, h, t, d) = x.dims4()?;
        let s = x.stride();
        if b != shape.batch || h != shape.kv_heads || d != shape.head_dim || s[3] != 1 {
            return Err(Error::Msg(format!(
                "kv cache: expected [{}, {}, T, {}] with unit stride along the head, got {:?} strides {s:?}",
                shape.batch, shape.kv_heads, shape.head_dim, x.dims()
            )));
        }
        if pos + t > shape.max_seq {
            return Err(Error::Msg(format!(
                "kv cache: positions {pos}..{} past its {} positions",
                pos + t,
                shape.max_seq
            )));
        }
        let i = |v: usize| v as i32;
        kv_cache_write::launch_with::<f32>(
            on.device(),
            [t, b * h],
            on.options(),
            dst,
            x,
            i(s[0]),
            i(s[1]),
            i(s[2]),
            i(pos),
            i(shape.max_seq),
            i(h),
            d,
        )
        .map_err(candle_error)?;
    }
    Ok(())
}

/// Causal attention of `q` (`[B, H, T, D]`, unit `D` stride) at positions `pos..pos + T`
/// over the cache's `pos + T` positions: `[B·T, H·D]`, the output projection's input.
pub fn attend(
    on: &On,
    q: &Tensor,
    cache: &LayerCache,
    pos: usize,
    shape: AttentionShape,
) -> Result<Tensor> {
    let (b, h, t, d) = q.dims4()?;
    let s = q.stride();
    if b != shape.batch || h != shape.heads || d != shape.head_dim || s[3] != 1 {
        return Err(Error::Msg(format!(
            "attention: q must be [{}, {}, T, {}] with unit stride along the head, got {:?} strides {s:?}",
            shape.batch, shape.heads, shape.head_dim, q.dims()
        )));
    }
    let g = h / shape.kv_heads;
    let rows = t * g;
    let bm = next_power_of_2(rows).clamp(16, 64);
    let mut out = zeros::<f32>(on, b * t * h * d)?;
    let i = |v: usize| v as i32;
    attention_cached::launch_with::<f32>(
        on.device(),
        [cdiv(rows, bm), b * shape.kv_heads],
        on.options(),
        &mut out,
        q,
        &cache.k,
        &cache.v,
        i(s[0]),
        i(s[1]),
        i(s[2]),
        i(t),
        i(pos),
        i(shape.max_seq),
        i(shape.kv_heads),
        1.0 / (d as f32).sqrt(),
        g,
        bm,
        64,
        d,
    )
    .map_err(candle_error)?;
    out.into_tensor((b * t, h * d))
}

/// How [`sample`] picks tokens.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Sampling {
    /// The most likely token.
    Greedy,
    /// A draw from `softmax(logits / temperature)` with Philox numbers of `seed`.
    Temperature {
        /// Above 0.
        temperature: f32,
        /// The same seed gives the same draw.
        seed: i32,
    },
}

impl Sampling {
    /// The sampling of decode step `step`: the same temperature, the seed advanced by the
    /// step so that each step draws afresh (and a rerun draws the same tokens).
    pub fn at_step(self, step: usize) -> Sampling {
        match self {
            Sampling::Temperature { temperature, seed } => Sampling::Temperature {
                temperature,
                seed: seed.wrapping_add(step as i32),
            },
            greedy => greedy,
        }
    }
}

/// One token per row of `logits` (`[rows, vocab]`): u32 `[rows]`.
pub fn sample(on: &On, logits: &Tensor, how: Sampling) -> Result<Tensor> {
    let (rows, vocab) = matrix(logits, "sample logits")?;
    let logits = logits.contiguous()?;
    let (greedy, temperature, seed) = match how {
        Sampling::Greedy => (true, 1.0, 0),
        Sampling::Temperature { temperature, seed } if temperature > 0.0 => {
            (false, temperature, seed)
        }
        Sampling::Temperature { temperature, .. } => {
            return Err(Error::Msg(format!(
                "sample: the temperature must be above 0, got {temperature}"
            )))
        }
    };
    let mut tokens = zeros::<u32>(on, rows)?;
    sample_tokens::launch_with(
        on.device(),
        rows,
        on.options(),
        &mut tokens,
        &logits,
        vocab as i32,
        vocab as i32,
        temperature,
        seed,
        greedy,
        next_power_of_2(vocab),
    )
    .map_err(candle_error)?;
    tokens.into_tensor(rows)
}
