//! Triton tutorial 04: low-memory dropout. The keep mask is not stored: it is `rand(seed,
//! offset) > p`, recomputed from the seed wherever it is needed (the backward pass calls
//! the same kernel with the same seed), and it is the mask Triton's kernel makes for the
//! same seed, bit for bit.

use ndarray::{Array1, ArrayView1};
use tritium::prelude::*;

/// `out[i] = x[i] / (1 - p)` where `rand(seed, i) > p`, else 0, for `i < n`.
#[kernel]
pub fn seeded_dropout(
    out: Ptr<f32>,
    x: Ptr<f32>,
    n: i32,
    p: f32,
    seed: i32,
    #[constexpr] BLOCK: usize,
) {
    let offsets = program_id(0) * BLOCK as i32 + arange(0, BLOCK);
    let mask = offsets < n;
    let x = load(x + offsets, mask = mask);
    let random = rand(seed, offsets);
    let keep = random > p;
    let output = where_(keep, x / (1.0 - p), 0.0);
    store(out + offsets, output, mask = mask);
}

/// Elements per program used by [`dropout`].
pub const DROPOUT_BLOCK: usize = 1024;

/// Dropout of `x` with probability `p` and the given `seed`, through [`seeded_dropout`].
pub fn dropout(
    device: &Device,
    x: ArrayView1<f32>,
    p: f32,
    seed: i32,
) -> tritium::Result<Array1<f32>> {
    let n = x.len();
    let mut out = Array1::zeros(n);
    seeded_dropout::launch(
        device,
        cdiv(n.max(1), DROPOUT_BLOCK),
        &mut out,
        x,
        n as i32,
        p,
        seed,
        DROPOUT_BLOCK,
    )?;
    Ok(out)
}
