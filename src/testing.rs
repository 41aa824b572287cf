//! Triton's `triton.testing` for Rust tests and benchmarks: [`do_bench`] times a launch
//! (warm-up, repetitions sized to a time budget, quantiles, a cache flush before every run,
//! the device synchronized around each), and [`assert_close`] compares results with
//! per-dtype tolerances.

use crate::{Device, Result};
use half::{bf16, f16};
use ndarray::{ArrayBase, Data, Dimension};
use std::time::{Duration, Instant};

/// How [`do_bench`] runs (Triton's `warmup`, `rep`, `quantiles`).
#[derive(Debug, Clone, PartialEq)]
pub struct BenchOptions {
    /// Time spent running before measuring (Triton: 25 ms).
    pub warmup: Duration,
    /// Time the measured runs should take together (Triton: 100 ms).
    pub rep: Duration,
    /// Quantiles of the run times to report, each in `[0, 1]` (Triton: none).
    pub quantiles: Vec<f64>,
    /// Bytes written between runs so that no run finds the previous run's data in cache
    /// (Triton zeroes a 256 MB buffer on the GPU); 0 skips the flush.
    pub flush_bytes: usize,
}

impl Default for BenchOptions {
    fn default() -> Self {
        BenchOptions {
            warmup: Duration::from_millis(25),
            rep: Duration::from_millis(100),
            quantiles: Vec::new(),
            flush_bytes: 64 << 20,
        }
    }
}

/// What [`do_bench`] measured.
#[derive(Debug, Clone, PartialEq)]
pub struct BenchResult {
    /// Mean run time (Triton's default return value).
    pub mean: Duration,
    /// Median run time.
    pub median: Duration,
    /// Fastest run.
    pub min: Duration,
    /// Slowest run.
    pub max: Duration,
    /// The requested quantiles, in the order asked.
    pub quantiles: Vec<Duration>,
    /// Measured runs.
    pub runs: usize,
}

/// Times `f` as Triton's `do_bench` does: after one untimed run (a first launch compiles),
/// five runs estimate the time of one repetition, flush included, which sizes the warm-up
/// and the measured repetitions to `options.warmup` and `options.rep` (at least one each);
/// before every run the cache is flushed (outside the timing) and `device` is synchronized
/// before and after, so asynchronous CUDA launches are timed to completion.
/// The first error of `f` is returned.
pub fn do_bench(
    device: &Device,
    mut f: impl FnMut() -> Result<()>,
    options: &BenchOptions,
) -> Result<BenchResult> {
    if let Some(q) = options.quantiles.iter().find(|q| !(0.0..=1.0).contains(*q)) {
        return Err(crate::Error::Launch {
            kernel: "do_bench".into(),
            message: format!("quantile {q} is outside [0, 1]"),
        });
    }
    let mut flush = vec![0u8; options.flush_bytes];
    let mut timed = |f: &mut dyn FnMut() -> Result<()>| -> Result<Duration> {
        for (i, b) in flush.iter_mut().enumerate().step_by(64) {
            *b = b.wrapping_add(i as u8 | 1);
        }
        std::hint::black_box(&flush);
        device.synchronize()?;
        let start = Instant::now();
        f()?;
        device.synchronize()?;
        Ok(start.elapsed())
    };
    // As Triton: one untimed run first (a first launch compiles), then five runs with
    // their flushes estimate what one repetition costs, so that warm-up and repetitions
    // take about their budgets even when the flush costs more than `f`.
    f()?;
    let start = Instant::now();
    for _ in 0..5 {
        timed(&mut f)?;
    }
    let estimate = (start.elapsed() / 5).max(Duration::from_nanos(1));
    let count = |budget: Duration| {
        (budget.as_secs_f64() / estimate.as_secs_f64())
            .ceil()
            .max(1.0) as usize
    };
    for _ in 0..count(options.warmup) {
        timed(&mut f)?;
    }
    let mut times = (0..count(options.rep))
        .map(|_| timed(&mut f))
        .collect::<Result<Vec<Duration>>>()?;
    times.sort_unstable();
    let quantile = |q: f64| {
        // Linear interpolation between order statistics (as torch.quantile).
        let at = q * (times.len() - 1) as f64;
        let (lo, hi) = (at.floor() as usize, at.ceil() as usize);
        let frac = at - lo as f64;
        times[lo].mul_f64(1.0 - frac) + times[hi].mul_f64(frac)
    };
    Ok(BenchResult {
        mean: times.iter().sum::<Duration>() / times.len() as u32,
        median: quantile(0.5),
        min: times[0],
        max: times[times.len() - 1],
        quantiles: options.quantiles.iter().map(|&q| quantile(q)).collect(),
        runs: times.len(),
    })
}

/// An element [`assert_close`] compares, with its default tolerances.
pub trait CloseElement: Copy + std::fmt::Debug {
    /// The value as f64 (exact for every supported dtype).
    fn to_f64(self) -> f64;
    /// Default `(rtol, atol)`: PyTorch's `assert_close` defaults, which Triton's tests use
    /// (f16 1e-3/1e-5, bf16 1.6e-2/1e-5, f32 1.3e-6/1e-5, f64 1e-7/1e-7, integers exact);
    /// PyTorch has none for fp8, which get one step of their format (E4M3 0.125 and its
    /// smallest subnormal 2^-9, E5M2 0.25 and 2^-16, E4B15 0.125 and 2^-17).
    fn tolerances() -> (f64, f64);
}

macro_rules! close_element {
    ($($t:ty => $tol:expr, $conv:expr;)*) => {$(
        impl CloseElement for $t {
            fn to_f64(self) -> f64 {
                ($conv)(self)
            }
            fn tolerances() -> (f64, f64) {
                $tol
            }
        }
    )*};
}

close_element! {
    f16 => (1e-3, 1e-5), |x: f16| x.to_f64();
    bf16 => (1.6e-2, 1e-5), |x: bf16| x.to_f64();
    f32 => (1.3e-6, 1e-5), |x: f32| x as f64;
    f64 => (1e-7, 1e-7), |x: f64| x;
    i8 => (0.0, 0.0), |x: i8| x as f64;
    i16 => (0.0, 0.0), |x: i16| x as f64;
    i32 => (0.0, 0.0), |x: i32| x as f64;
    i64 => (0.0, 0.0), |x: i64| x as f64;
    u8 => (0.0, 0.0), |x: u8| x as f64;
    u16 => (0.0, 0.0), |x: u16| x as f64;
    u32 => (0.0, 0.0), |x: u32| x as f64;
    u64 => (0.0, 0.0), |x: u64| x as f64;
    bool => (0.0, 0.0), |x: bool| x as u8 as f64;
    crate::dsl::trace::F8E4M3 => (0.125, 1.0 / 512.0), |x: crate::dsl::trace::F8E4M3| x.to_f64();
    crate::dsl::trace::F8E5M2 => (0.25, 1.0 / 65536.0), |x: crate::dsl::trace::F8E5M2| x.to_f64();
    crate::dsl::trace::F8E4B15 => (0.125, 1.0 / 131072.0), |x: crate::dsl::trace::F8E4B15| x.to_f64();
}

/// Tolerances for [`check_close`]; `None` takes the dtype's default.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Tolerance {
    /// Relative tolerance.
    pub rtol: Option<f64>,
    /// Absolute tolerance.
    pub atol: Option<f64>,
}

/// Whether `|got - want| <= atol + rtol · |want|` everywhere (NaN matches NaN, an infinity
/// only itself); `Err` says how many elements differ, the first of them, and the largest
/// absolute and relative differences.
pub fn check_close<S1, S2, D, T>(
    got: &ArrayBase<S1, D>,
    want: &ArrayBase<S2, D>,
    tolerance: Tolerance,
) -> std::result::Result<(), String>
where
    S1: Data<Elem = T>,
    S2: Data<Elem = T>,
    D: Dimension,
    T: CloseElement,
{
    if got.shape() != want.shape() {
        return Err(format!(
            "shapes differ: {:?} and {:?}",
            got.shape(),
            want.shape()
        ));
    }
    let (rtol, atol) = T::tolerances();
    let (rtol, atol) = (
        tolerance.rtol.unwrap_or(rtol),
        tolerance.atol.unwrap_or(atol),
    );
    let mut bad = 0usize;
    let mut first = None;
    let (mut max_abs, mut max_rel) = (0f64, 0f64);
    for ((i, g), w) in got.indexed_iter().zip(want.iter()) {
        let (g, w) = (g.to_f64(), w.to_f64());
        let ok = if g.is_nan() || w.is_nan() {
            g.is_nan() && w.is_nan()
        } else if g.is_infinite() || w.is_infinite() {
            g == w
        } else {
            (g - w).abs() <= atol + rtol * w.abs()
        };
        if !ok {
            bad += 1;
            first.get_or_insert_with(|| format!("{i:?}: got {g}, want {w}"));
            if (g - w).is_finite() {
                max_abs = max_abs.max((g - w).abs());
                max_rel = max_rel.max((g - w).abs() / w.abs().max(f64::MIN_POSITIVE));
            }
        }
    }
    match first {
        None => Ok(()),
        Some(first) => Err(format!(
            "{bad} of {} elements differ (rtol {rtol}, atol {atol}); first at {first}; largest difference {max_abs} absolute, {max_rel} relative",
            got.len()
        )),
    }
}

/// Panics unless `got` is close to `want` with the dtype's default tolerances (see
/// [`CloseElement::tolerances`]), naming the first mismatch (Triton's
/// `triton.testing.assert_close`).
#[track_caller]
pub fn assert_close<S1, S2, D, T>(got: &ArrayBase<S1, D>, want: &ArrayBase<S2, D>)
where
    S1: Data<Elem = T>,
    S2: Data<Elem = T>,
    D: Dimension,
    T: CloseElement,
{
    if let Err(e) = check_close(got, want, Tolerance::default()) {
        panic!("assert_close: {e}");
    }
}
