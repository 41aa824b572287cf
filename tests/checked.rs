//! Checked mode changes no result: kernels that stay in bounds give bit-identical outputs
//! with it on and off, on every device (the CUDA emulator and CUDA device 0 included).
//! The faults themselves are tested in `launch_errors.rs` and the backend's `checked.rs`.

use crate::common::{all_devices, random_f32};
use half::f16;
use ndarray::{Array1, Array2};
use tritium::{Device, LaunchOptions, Result};
use tritium_kernels::matmul::matmul;
use tritium_kernels::misc::{histogram, row_stats};
use tritium_kernels::softmax::softmax;
use tritium_kernels::vector_add::add;

/// A kernel run on a device with options; its outputs as bits.
type Run = fn(&Device, &LaunchOptions) -> Result<Vec<u32>>;

fn bits(v: impl IntoIterator<Item = f32>) -> Vec<u32> {
    v.into_iter().map(f32::to_bits).collect()
}

fn cases() -> Vec<(&'static str, Run)> {
    vec![
        ("vector add, masked tail", |d, o| {
            let n = 1000;
            let (x, y) = (random_f32(n, 1), random_f32(n, 2));
            let mut out = vec![0f32; n];
            add::launch_with(
                d,
                n.div_ceil(256),
                o,
                &mut out[..],
                &x[..],
                &y[..],
                n as i32,
                256,
            )?;
            Ok(bits(out))
        }),
        ("softmax of strided f16 rows", |d, o| {
            let (rows, cols) = (5, 33);
            let x = Array2::from_shape_vec((rows, 40), random_f32(rows * 40, 3))
                .unwrap()
                .mapv(f16::from_f32);
            let mut out = Array2::from_elem((rows, cols), f16::ZERO);
            softmax::launch_explicit(d, rows, o, &mut out, &x, 40, cols as i32, cols as i32, 64)?;
            Ok(bits(out.iter().map(|v| v.to_f32())))
        }),
        (
            "f16 matmul (tensor cores, loop-carried pointers)",
            |d, o| {
                let (m, n, k) = (33, 17, 40);
                let a = Array2::from_shape_vec((m, k), random_f32(m * k, 4))
                    .unwrap()
                    .mapv(f16::from_f32);
                let b = Array2::from_shape_vec((k, n), random_f32(k * n, 5))
                    .unwrap()
                    .mapv(f16::from_f32);
                let mut c = Array2::<f32>::zeros((m, n));
                let (mi, ni, ki) = (m as i32, n as i32, k as i32);
                let grid = [m.div_ceil(32), n.div_ceil(16)];
                matmul::launch_explicit(
                    d, grid, o, &mut c, &a, &b, mi, ni, ki, ki, 1, ni, 1, ni, 1, 32, 16, 16,
                )?;
                Ok(bits(c))
            },
        ),
        ("histogram (tile atomics)", |d, o| {
            let n: usize = 3000;
            let bins = Array1::from_iter((0..n).map(|i| ((i * 7919) % 41) as i32 - 2));
            let mut counts = Array1::<i32>::zeros(37);
            histogram::launch_with(d, n.div_ceil(256), o, &mut counts, &bins, n as i32, 37, 256)?;
            Ok(counts.iter().map(|c| *c as u32).collect())
        }),
        ("row statistics (scalar atomics)", |d, o| {
            let (rows, cols) = (9, 50);
            let x = Array2::from_shape_vec((rows, cols), random_f32(rows * cols, 6)).unwrap();
            let mut arg = Array1::<i32>::zeros(rows);
            let mut hi = Array1::from_elem(1, f32::NEG_INFINITY);
            let mut lo = Array1::from_elem(1, f32::INFINITY);
            row_stats::launch_with(d, rows, o, &mut arg, &mut hi, &mut lo, &x, cols as i32, 64)?;
            let arg = arg.iter().map(|a| *a as u32);
            Ok(arg.chain(bits([hi[0], lo[0]])).collect())
        }),
    ]
}

#[test]
fn in_bounds_kernels_give_identical_results_with_checked_mode() {
    let options = |on| LaunchOptions {
        bounds_check: Some(on),
        ..Default::default()
    };
    for (name, run) in cases() {
        for d in all_devices() {
            let plain = run(&d, &options(false)).unwrap_or_else(|e| panic!("{name} on {d:?}: {e}"));
            let checked =
                run(&d, &options(true)).unwrap_or_else(|e| panic!("{name} on {d:?}: {e}"));
            assert_eq!(checked, plain, "{name} on {d:?}");
        }
    }
}
