//! The machine's arithmetic peak, the ceiling compute-bound rows are read against.

use std::time::Instant;

/// f32 GFLOP/s of `threads` threads each running 12 independent fused multiply-add chains
/// on the widest vectors the CPU has (16 lanes with AVX-512, else 8 with AVX2): what the
/// `dot` micro-kernel issues per k (6 rows × 2 vector registers), without its loads. The
/// machine's FMA peak; `None` on CPUs without AVX2 and FMA.
pub fn fma_peak_gflops(threads: usize) -> Option<f64> {
    peak_over(threads, 50_000_000)
}

/// The f32 lanes per fused multiply-add [`fma_peak_gflops`] counts: 16 with AVX-512, 8
/// with AVX2 (`None` without AVX2 and FMA).
pub fn fma_peak_lanes() -> Option<usize> {
    #[cfg(target_arch = "x86_64")]
    {
        if !(is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma")) {
            return None;
        }
        Some(if is_x86_feature_detected!("avx512f") {
            16
        } else {
            8
        })
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        None
    }
}

/// [`fma_peak_gflops`] over `iters` rounds per thread.
fn peak_over(threads: usize, iters: u64) -> Option<f64> {
    #[cfg(target_arch = "x86_64")]
    {
        let wide = fma_peak_lanes()? == 16;
        let threads = threads.max(1);
        let start = std::sync::Barrier::new(threads + 1);
        let t = std::thread::scope(|s| {
            for _ in 0..threads {
                s.spawn(|| {
                    start.wait();
                    // SAFETY: the features each needs were detected above.
                    std::hint::black_box(unsafe {
                        match wide {
                            true => fma_chains_512(iters),
                            false => fma_chains(iters),
                        }
                    })
                });
            }
            start.wait();
            Instant::now()
        })
        .elapsed();
        let lanes = if wide { 16 } else { 8 };
        let flops = (threads as u64 * iters * 12 * 2 * lanes) as f64;
        Some(flops / t.as_secs_f64() / 1e9)
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (threads, iters);
        None
    }
}

/// `iters` rounds of 12 independent `a = a·x + y` on 8-lane vectors.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn fma_chains(iters: u64) -> f32 {
    use std::arch::x86_64::*;
    let x = _mm256_set1_ps(std::hint::black_box(0.999_999));
    let y = _mm256_set1_ps(std::hint::black_box(1e-7));
    let mut acc = [_mm256_setzero_ps(); 12];
    for _ in 0..iters {
        for a in acc.iter_mut() {
            *a = _mm256_fmadd_ps(*a, x, y);
        }
    }
    acc.iter().map(|a| _mm256_cvtss_f32(*a)).sum()
}

/// [`fma_chains`] on 16-lane vectors.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn fma_chains_512(iters: u64) -> f32 {
    use std::arch::x86_64::*;
    let x = _mm512_set1_ps(std::hint::black_box(0.999_999));
    let y = _mm512_set1_ps(std::hint::black_box(1e-7));
    let mut acc = [_mm512_setzero_ps(); 12];
    for _ in 0..iters {
        for a in acc.iter_mut() {
            *a = _mm512_fmadd_ps(*a, x, y);
        }
    }
    acc.iter().map(|a| _mm512_reduce_add_ps(*a)).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fma_peak_is_a_finite_positive_rate_where_avx2_exists() {
        #[cfg(target_arch = "x86_64")]
        let has = is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma");
        #[cfg(not(target_arch = "x86_64"))]
        let has = false;
        match peak_over(2, 1_000_000) {
            Some(g) => assert!(has && g.is_finite() && g > 0.0, "{g} GFLOP/s"),
            None => assert!(!has, "AVX2 and FMA detected, but no peak measured"),
        }
    }
}
