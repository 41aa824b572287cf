//! Picking the next token from a row of logits: greedy (argmax) or sampled from
//! `softmax(logits / temperature)` by the Gumbel-max trick (`argmax(logits / τ + g)` with
//! `g = −log(−log u)` is a draw from the softmax), so sampling needs no normalized
//! probabilities, no sort and no second pass.

use tritium::prelude::*;

/// `tokens[row]` = the sampled column of `logits[row, :vocab]` (row stride `stride`), one
/// row per program. `GREEDY`: the first maximal column; else a draw at `temperature`
/// from Philox numbers of `seed` (the same seed gives the same tokens on every device).
#[kernel]
pub fn sample_tokens(
    tokens: Ptr<u32>,
    logits: Ptr<f32>,
    vocab: i32,
    stride: i32,
    temperature: f32,
    seed: i32,
    #[constexpr] GREEDY: bool,
    #[constexpr] BLOCK: usize,
) {
    let row = program_id(0);
    let cols = arange(0, BLOCK);
    let mask = cols < vocab;
    let x = load(
        logits + row.to(DType::I64) * stride + cols,
        mask = mask,
        other = f32::NEG_INFINITY,
    );
    let score = if GREEDY {
        x
    } else {
        let u = rand(seed, row * vocab + cols);
        let gumbel = -log(-log(u));
        where_(mask, x / temperature + gumbel, f32::NEG_INFINITY)
    };
    store(tokens + row, argmax(score, 0).to(DType::U32));
}
