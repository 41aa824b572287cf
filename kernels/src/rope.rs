//! Rotary position embeddings as Llama (and Hugging Face's "rotate half") apply them, and
//! as Liger-Kernel's `rope` fuses them: for `x` of shape `(b, h, t, d)` and `cos`, `sin` of
//! shape `(t, d/2)` (or `(b, t, d/2)`),
//! `out[.., i] = x_i·cos_i − x_{i+d/2}·sin_i` and `out[.., i+d/2] = x_{i+d/2}·cos_i + x_i·sin_i`,
//! in f32 whatever the element type. The backward is the same rotation by `−sin`.

use tritium::prelude::*;

/// One program per `BLOCK_T` positions of one `(batch, head)` pair (`program_id(1)` is
/// `batch · heads + head`): rotates the halves of each of those rows of `x` and writes
/// them to `out`, contiguous `(b, h, t, d)`.
///
/// `x` is read through its strides `sx_b`, `sx_h`, `sx_t` (its last dim contiguous), so a
/// `(b, t, h, d)` tensor transposed to `(b, h, t, d)` needs no copy. `cos` and `sin` hold
/// rows of `half = d/2` elements, `cs_t` apart (`cs_b` apart between batches; 0 when they
/// are shared). `BACKWARD` rotates by `−sin`: the gradient of the forward's rotation.
#[kernel]
#[allow(clippy::too_many_arguments)]
pub fn rope<T: Float>(
    out: Ptr<T>,
    x: Ptr<T>,
    cos: Ptr<T>,
    sin: Ptr<T>,
    heads: i32,
    t: i32,
    half: i32,
    sx_b: i64,
    sx_h: i64,
    sx_t: i64,
    cs_b: i64,
    cs_t: i64,
    #[constexpr] BACKWARD: bool,
    #[constexpr] BLOCK_T: usize,
    #[constexpr] BLOCK_D: usize,
) {
    let bh = program_id(1).to(DType::I64);
    let b = bh / heads;
    let h = bh % heads;
    let pos = program_id(0) * BLOCK_T as i32 + arange(0, BLOCK_T);
    let cols = arange(0, BLOCK_D);
    let mask = (pos < t)[(.., None)] & (cols < half)[(None, ..)];
    let pos = pos.to(DType::I64)[(.., None)];
    let cols = cols[(None, ..)];
    let x_row = x + b * sx_b + h * sx_h + pos * sx_t;
    let x1 = load(x_row + cols, mask = mask, other = 0.0).to(DType::F32);
    let x2 = load(x_row + half + cols, mask = mask, other = 0.0).to(DType::F32);
    let cs = b * cs_b + pos * cs_t + cols;
    let c = load(cos + cs, mask = mask, other = 0.0).to(DType::F32);
    let s = load(sin + cs, mask = mask, other = 0.0).to(DType::F32);
    let s = if BACKWARD { -s } else { s };
    let out_row = out + (bh * t + pos) * (2 * half);
    store(out_row + cols, (x1 * c - x2 * s).to(T::DTYPE), mask = mask);
    store(
        out_row + half + cols,
        (x2 * c + x1 * s).to(T::DTYPE),
        mask = mask,
    );
}
