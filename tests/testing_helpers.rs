//! `tritium::testing`: `do_bench` and `assert_close`, as Triton's `triton.testing`.

use ndarray::{array, Array1};
use std::time::Duration;
use tritium::testing::{assert_close, check_close, do_bench, BenchOptions, Tolerance};
use tritium::Device;
use tritium_kernels::vector_add::{add, ADD_BLOCK};

#[test]
fn do_bench_times_a_launch_with_quantiles() {
    let n = 1 << 16;
    let x = Array1::from_iter((0..n).map(|i| i as f32));
    let mut out = Array1::<f32>::zeros(n);
    let mut launches = 0;
    let options = BenchOptions {
        warmup: Duration::from_millis(2),
        rep: Duration::from_millis(10),
        quantiles: vec![0.2, 0.5, 0.8],
        flush_bytes: 1 << 20,
    };
    let device = Device::cpu();
    let r = do_bench(
        &device,
        || {
            launches += 1;
            add::launch(
                &device,
                n.div_ceil(ADD_BLOCK),
                &mut out,
                &x,
                &x,
                n as i32,
                ADD_BLOCK,
            )
        },
        &options,
    )
    .unwrap();
    // One untimed run, five estimate runs, at least one warm-up run, the measured runs.
    assert!(
        r.runs >= 1 && launches >= 1 + 5 + 1 + r.runs,
        "{r:?}, {launches} launches"
    );
    assert_eq!(r.quantiles.len(), 3);
    assert!(
        r.min <= r.quantiles[0] && r.quantiles[0] <= r.quantiles[1],
        "{r:?}"
    );
    assert!(
        r.quantiles[1] <= r.quantiles[2] && r.quantiles[2] <= r.max,
        "{r:?}"
    );
    assert_eq!(r.quantiles[1], r.median);
    assert!(r.min <= r.mean && r.mean <= r.max, "{r:?}");
    assert_eq!(out, &x * 2.0);
}

/// The repetitions are sized by what one costs with its flush (a run that takes no time
/// after a 64 MiB flush was repeated 10^5 times and more, a minute for a 20 ms budget), and the first run, which may compile,
/// is not part of the estimate (50 ms once made the estimate 10 ms: 2 repetitions of 20 ms).
#[test]
fn do_bench_sizes_repetitions_with_the_flush_and_without_the_first_run() {
    let options = BenchOptions {
        warmup: Duration::from_millis(1),
        rep: Duration::from_millis(20),
        quantiles: Vec::new(),
        flush_bytes: 64 << 20,
    };
    // A 64 MiB flush takes far over 21 µs (3 TB/s): 1,000 repetitions do not fit in 21 ms.
    let mut calls = 0;
    let bounded = || {
        calls += 1;
        if calls > 1000 {
            return Err(tritium::Error::Launch {
                kernel: "no-op".into(),
                message: "repeated more than 1000 times".into(),
            });
        }
        Ok(())
    };
    do_bench(&Device::cpu(), bounded, &options).unwrap();
    let mut first = true;
    let slow_first = || {
        if std::mem::take(&mut first) {
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(())
    };
    let options = BenchOptions {
        flush_bytes: 1 << 20,
        ..options
    };
    let r = do_bench(&Device::cpu(), slow_first, &options).unwrap();
    assert!(r.runs >= 5, "{r:?}");
}

#[test]
fn do_bench_returns_the_first_error() {
    let bad = BenchOptions {
        quantiles: vec![1.5],
        ..Default::default()
    };
    let e = do_bench(&Device::cpu(), || Ok(()), &bad)
        .unwrap_err()
        .to_string();
    assert!(e.contains("quantile 1.5 is outside [0, 1]"), "{e}");
    let x = Array1::<f32>::zeros(8);
    let mut out = Array1::<f32>::zeros(8);
    let failing = || add::launch(&Device::cpu(), 0, &mut out, &x, &x, 8, 8);
    let e = do_bench(&Device::cpu(), failing, &BenchOptions::default()).unwrap_err();
    assert!(e.to_string().contains("grid axis 0 is 0"), "{e}");
}

#[test]
fn close_uses_per_dtype_tolerances() {
    // f32: 1e-5 absolute + 1.3e-6 relative.
    assert_close(&array![1.0f32, 100.0], &array![1.000_005f32, 100.000_1]);
    let e = check_close(
        &array![1.0f32, 2.0, 3.0],
        &array![1.0f32, 2.1, 3.2],
        Tolerance::default(),
    )
    .unwrap_err();
    assert!(
        e.starts_with("2 of 3 elements differ") && e.contains("first at 1: got 2, want 2.0999"),
        "{e}"
    );
    // f16 allows 1e-3 relative; integers are exact; NaN matches NaN only.
    let h = |v: f32| half::f16::from_f32(v);
    assert!(check_close(&array![h(1000.0)], &array![h(1000.5)], Tolerance::default()).is_ok());
    assert!(check_close(&array![3i32], &array![4i32], Tolerance::default()).is_err());
    assert!(check_close(&array![f32::NAN], &array![f32::NAN], Tolerance::default()).is_ok());
    assert!(check_close(&array![f32::NAN], &array![0.0f32], Tolerance::default()).is_err());
    assert!(check_close(
        &array![f32::INFINITY],
        &array![f32::INFINITY],
        Tolerance::default()
    )
    .is_ok());
    let loose = Tolerance {
        rtol: Some(0.1),
        atol: Some(0.0),
    };
    assert!(check_close(&array![1.05f32], &array![1.0f32], loose).is_ok());
    let e = check_close(&array![1.0f32, 2.0], &array![1.0f32], Tolerance::default()).unwrap_err();
    assert!(e.contains("shapes differ"), "{e}");
}

#[test]
#[should_panic(expected = "assert_close: 1 of 2 elements differ")]
fn assert_close_panics_naming_the_mismatch() {
    assert_close(&array![1.0f64, 2.0], &array![1.0f64, 2.5]);
}
