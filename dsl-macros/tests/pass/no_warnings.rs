//! A kernel using every kind of kernel control flow compiles without a single warning
//! from the macro's expansion (`deny(warnings)`), and runs.
#![deny(warnings)]

use tritium::prelude::*;

#[kernel]
fn flows(out: Ptr<f32>, x: Ptr<f32>, n: i32, #[constexpr] BLOCK: usize) {
    let offs = arange(0, BLOCK);
    let mut acc = zeros([BLOCK], DType::F32);
    let mut count = 0;
    for i in range(0, n, 1, num_stages = 3, loop_unroll_factor = 2) {
        acc = acc + load(x + offs, mask = offs < n, other = 0.0) * i;
        count = count + 1;
    }
    let scale;
    if n > 4 {
        scale = full([BLOCK], 2.0, DType::F32);
    } else {
        scale = full([BLOCK], 0.5, DType::F32);
    }
    let mut k = 0;
    while k < n {
        k = k + 2;
    }
    store(out + offs, acc * scale + count + k, mask = offs < n);
}

/// Autotuned and with a heuristic: the generated launch functions are warning-free too.
#[kernel]
#[autotune(configs = [config(BLOCK = 8), config(BLOCK = 16, num_warps = 2)], key = [n], reset_to_zero = [out])]
#[heuristics(TWICE = n > 4)]
fn tuned(out: Ptr<f32>, x: Ptr<f32>, n: i32, #[constexpr] BLOCK: usize, #[constexpr] TWICE: bool) {
    let offs = program_id(0) * BLOCK as i32 + arange(0, BLOCK);
    let factor = if TWICE { 2.0 } else { 1.0 };
    store(out + offs, load(x + offs, mask = offs < n) * factor, mask = offs < n);
}

fn main() {
    let x = ndarray::Array1::from_iter((0..8).map(|i| i as f32));
    let mut out = ndarray::Array1::<f32>::zeros(8);
    flows::launch(&Device::interpreter(), 1, &mut out, &x, 8, 8).unwrap();
    // Σ_i i = 28 times x, doubled, plus 8 iterations and k = 8.
    let want = x.mapv(|v| v * 28.0 * 2.0 + 16.0);
    assert_eq!(out, want);
    let mut out = ndarray::Array1::<f32>::zeros(8);
    tuned::launch(&Device::cpu(), |m: &tuned::Meta| 8usize.div_ceil(m.BLOCK), &mut out, &x, 8).unwrap();
    assert_eq!(out, x.mapv(|v| v * 2.0));
}
