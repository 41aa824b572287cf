//! Small kernels exercising atomics, arg-reductions and control flow.

use tritium::prelude::*;

/// `counts[bins[i]] += 1` with atomics (a histogram), `BLOCK` inputs per program.
#[kernel]
pub fn histogram(counts: Ptr<i32>, bins: Ptr<i32>, n: i32, n_bins: i32, #[constexpr] BLOCK: usize) {
    let offs = program_id(0) * BLOCK as i32 + arange(0, BLOCK);
    let mask = offs < n;
    let b = load(bins + offs, mask = mask, other = 0);
    let valid = mask & (b >= 0) & (b < n_bins);
    atomic_add(counts + b, 1, mask = valid);
}

/// Per-row maximum, minimum (atomically into global cells) and argmax of a matrix.
#[kernel]
pub fn row_stats(
    argmax_out: Ptr<i32>,
    global_max: Ptr<f32>,
    global_min: Ptr<f32>,
    x: Ptr<f32>,
    n_cols: i32,
    #[constexpr] BLOCK: usize,
) {
    let row = program_id(0);
    let cols = arange(0, BLOCK);
    let mask = cols < n_cols;
    let v = load(
        x + row * n_cols + cols,
        mask = mask,
        other = f32::NEG_INFINITY,
    );
    store(argmax_out + row, argmax(v, 0));
    atomic_max(global_max, max(v, 0));
    let w = where_(mask, v, f32::INFINITY);
    atomic_min(global_min, min(w, 0));
}

/// Collatz step counts: a data-dependent `while` per element, plus `if` and int ops.
#[kernel]
pub fn collatz(steps: Ptr<i32>, start: Ptr<i64>, n: i32, #[constexpr] BLOCK: usize) {
    let offs = program_id(0) * BLOCK as i32 + arange(0, BLOCK);
    let mask = offs < n;
    let values = load(start + offs, mask = mask, other = 1);
    let mut counts = zeros([BLOCK], DType::I32);
    for i in static_range(0, BLOCK as i64) {
        let mut v = sum(where_(arange(0, BLOCK) == i as i32, values, 0), 0);
        let mut c = 0;
        while v > 1 {
            if v % 2 == 0 {
                v = v / 2;
            } else {
                v = 3 * v + 1;
            }
            c = c + 1;
        }
        counts = where_(arange(0, BLOCK) == i as i32, c, counts);
    }
    store(steps + offs, counts, mask = mask);
}
