//! SwiGLU, Llama's gated MLP activation as Liger-Kernel fuses it: `silu(gate) · up`
//! elementwise, computed in f32 whatever the element type, and its backward.

use tritium::prelude::*;

/// `out[i] = gate[i] · sigmoid(gate[i]) · up[i]` for `i < n`, `BLOCK` elements per program.
#[kernel]
pub fn swiglu_fwd<T: Float>(
    out: Ptr<T>,
    gate: Ptr<T>,
    up: Ptr<T>,
    n: i64,
    #[constexpr] BLOCK: usize,
) {
    let offs = program_id(0).to(DType::I64) * BLOCK as i64 + arange(0, BLOCK);
    let mask = offs < n;
    let g = load(gate + offs, mask = mask, other = 0.0).to(DType::F32);
    let u = load(up + offs, mask = mask, other = 0.0).to(DType::F32);
    store(out + offs, (g * sigmoid(g) * u).to(T::DTYPE), mask = mask);
}

/// The gradients of [`swiglu_fwd`] for `dy`, `BLOCK` elements per program:
/// `dgate = dy · up · σ(g) · (1 + g · (1 − σ(g)))` and `dup = dy · g · σ(g)`.
#[kernel]
pub fn swiglu_bwd<T: Float>(
    dgate: Ptr<T>,
    dup: Ptr<T>,
    dy: Ptr<T>,
    gate: Ptr<T>,
    up: Ptr<T>,
    n: i64,
    #[constexpr] BLOCK: usize,
) {
    let offs = program_id(0).to(DType::I64) * BLOCK as i64 + arange(0, BLOCK);
    let mask = offs < n;
    let d = load(dy + offs, mask = mask, other = 0.0).to(DType::F32);
    let g = load(gate + offs, mask = mask, other = 0.0).to(DType::F32);
    let u = load(up + offs, mask = mask, other = 0.0).to(DType::F32);
    let sg = sigmoid(g);
    let silu = g * sg;
    let dg = d * u * (sg + silu * (1.0 - sg));
    store(dgate + offs, dg.to(T::DTYPE), mask = mask);
    store(dup + offs, (d * silu).to(T::DTYPE), mask = mask);
}
