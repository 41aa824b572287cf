//! Timing helpers shared by the benchmark table example and the main example, and the
//! baselines they time against.

mod openblas;
mod peak;
pub use openblas::OpenBlas;
pub use peak::{fma_peak_gflops, fma_peak_lanes};

use std::time::{Duration, Instant};

/// The best of `reps` timings of `f` after one warm-up run (best-of filters out noise from
/// other processes on a shared machine).
pub fn best_of(reps: usize, mut f: impl FnMut()) -> Duration {
    f();
    (0..reps.max(1))
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed()
        })
        .min()
        .expect("at least one repetition")
}

/// The best timing of each of `fs` over `rounds` rounds that run every one of them once, in
/// order, after one warm-up run each. Interleaving gives every candidate the same share of
/// whatever else the machine is doing, which best-of runs taken one after the other do not.
pub fn interleaved<const N: usize>(rounds: usize, mut fs: [&mut dyn FnMut(); N]) -> [Duration; N] {
    for f in fs.iter_mut() {
        f();
    }
    let mut best = [Duration::MAX; N];
    for _ in 0..rounds.max(1) {
        for (f, b) in fs.iter_mut().zip(best.iter_mut()) {
            let t = Instant::now();
            f();
            *b = (*b).min(t.elapsed());
        }
    }
    best
}

/// Gigabytes per second for `bytes` moved in `t`.
pub fn gbps(bytes: usize, t: Duration) -> f64 {
    bytes as f64 / t.as_secs_f64() / 1e9
}

/// The plain memory-bandwidth loop: `out[i] = a[i] + b[i]` over slices, parallel over
/// chunks with rayon. It reads two arrays and writes one, like vector add, so it is the
/// memory limit vector add is measured against.
pub fn bandwidth_loop(out: &mut [f32], a: &[f32], b: &[f32]) {
    use rayon::prelude::*;
    const CHUNK: usize = 1 << 16;
    out.par_chunks_mut(CHUNK)
        .zip(a.par_chunks(CHUNK))
        .zip(b.par_chunks(CHUNK))
        .for_each(|((o, a), b)| {
            for i in 0..o.len() {
                o[i] = a[i] + b[i];
            }
        });
}
