//! Race detection (`LaunchOptions::race_check`, `TRITIUM_RACE_CHECK=1`) on the CPU and the
//! interpreter: planted races are errors naming both programs, both lines and the buffer;
//! the kernels of `tritium-kernels` are race-free; atomics never race with atomics.

use crate::common::random_f32;
use ndarray::{Array1, Array2};
use tritium::prelude::*;
use tritium::{Error, Result};
use tritium_kernels::activation::sigmoid_gated;
use tritium_kernels::attention::attention_forward;
use tritium_kernels::dropout::seeded_dropout;
use tritium_kernels::layer_norm::{layer_norm_bwd_dwdb, layer_norm_bwd_dx, layer_norm_fwd};
use tritium_kernels::matmul::matmul;
use tritium_kernels::misc::{collatz, histogram, row_stats};
use tritium_kernels::softmax::softmax;
use tritium_kernels::vector_add::add;

fn race_checked() -> LaunchOptions {
    LaunchOptions {
        race_check: Some(true),
        ..Default::default()
    }
}

fn devices() -> [Device; 2] {
    [Device::cpu(), Device::interpreter()]
}

/// Program `p` writes `BLOCK` elements from `p · (BLOCK − 1)`: one element overlaps the
/// next program's block.
#[kernel]
fn overlapping_blocks(out: Ptr<f32>, #[constexpr] BLOCK: usize) {
    let pid = program_id(0);
    let offs = pid * (BLOCK as i32 - 1) + arange(0, BLOCK);
    store(out + offs, pid.to(DType::F32));
}

/// Every program stores its id into one scalar.
#[kernel]
fn shared_scalar(out: Ptr<i32>) {
    store(out, program_id(0));
}

/// Program `p` writes `out[p]`, then reads its neighbour's `out[p + 1]`.
#[kernel]
fn neighbour_read(out: Ptr<f32>, copy: Ptr<f32>, n: i32) {
    let p = program_id(0);
    store(out + p, p.to(DType::F32));
    let q = minimum(p + 1, n - 1);
    store(copy + p, load(out + q));
}

/// Program 0 stores into the counter, every other program adds to it atomically.
#[kernel]
fn store_against_atomics(counter: Ptr<i32>) {
    let p = program_id(0);
    if p == 0 {
        store(counter, 5);
    } else {
        atomic_add(counter, 1);
    }
}

/// Every program adds to the counter atomically: no race.
#[kernel]
fn only_atomics(counter: Ptr<i32>) {
    atomic_add(counter, 1);
}

/// The runtime error of `r`, as (location, message).
fn race_of(r: Result<()>, what: &str, device: &Device) -> (String, String) {
    match r {
        Err(Error::Runtime {
            location, message, ..
        }) => (location, message),
        other => panic!("{device:?} {what}: expected a data race, got {other:?}"),
    }
}

/// The source line of the first line of this file that contains `text`.
fn line_of(text: &str) -> String {
    let src = include_str!("race_check.rs");
    let n = src
        .lines()
        .position(|l| l.contains(text))
        .expect("in this file")
        + 1;
    format!("race_check.rs:{n}:")
}

#[test]
fn planted_races_name_both_programs_both_lines_and_the_buffer() {
    for device in devices() {
        let o = race_checked();
        // Overlapping blocks: element 15 is program 0's last and program 1's first.
        let mut out = vec![0f32; 64];
        let r = overlapping_blocks::launch_with(&device, 4, &o, &mut out[..], 16);
        let (location, message) = race_of(r, "overlapping blocks", &device);
        let store = line_of("store(out + offs, pid.to(DType::F32))");
        assert!(location.contains(&store), "{device:?}: {location}");
        assert!(
            message.starts_with("data race on `out` element "),
            "{message}"
        );
        let element: usize = message["data race on `out` element ".len()..]
            .split(':')
            .next()
            .unwrap()
            .parse()
            .unwrap();
        assert_eq!(element % 15, 0, "{message}");
        let (a, b) = (element / 15 - 1, element / 15);
        for p in [a, b] {
            assert!(
                message.contains(&format!("program ({p}, 0, 0) stores it at")),
                "{message}"
            );
        }
        // One shared scalar.
        let mut one = [0i32; 1];
        let r = shared_scalar::launch_with(&device, 3, &o, &mut one[..]);
        let (_, message) = race_of(r, "shared scalar", &device);
        assert!(
            message.contains("data race on `out` element 0"),
            "{message}"
        );
        assert_eq!(message.matches("stores it at").count(), 2, "{message}");
        // A read of the neighbour's output.
        let (mut out, mut copy) = (vec![0f32; 8], vec![0f32; 8]);
        let r = neighbour_read::launch_with(&device, 8, &o, &mut out[..], &mut copy[..], 8);
        let (_, message) = race_of(r, "neighbour read", &device);
        assert!(message.contains("loads it at"), "{message}");
        assert!(message.contains("stores it at"), "{message}");
        assert!(
            message.contains(&line_of("store(copy + p, load(out + q))")),
            "{message}"
        );
        // A plain store against atomics.
        let mut counter = [0i32; 1];
        let r = store_against_atomics::launch_with(&device, 4, &o, &mut counter[..]);
        let (_, message) = race_of(r, "store against atomics", &device);
        assert!(message.contains("updates atomically"), "{message}");
        // Atomics alone are fine, and without race checking the races above run.
        let mut counter = [0i32; 1];
        only_atomics::launch_with(&device, 16, &o, &mut counter[..]).unwrap();
        assert_eq!(counter[0], 16);
        let mut one = [0i32; 1];
        shared_scalar::launch(&device, 3, &mut one[..]).unwrap();
    }
}

#[test]
fn race_checking_on_a_gpu_device_is_an_error() {
    let mut one = [0i32; 1];
    let r = shared_scalar::launch_with(&Device::cuda_emulator(), 1, &race_checked(), &mut one[..]);
    match r {
        Err(Error::Launch { message, .. }) => {
            assert!(
                message.contains("runs on the CPU and the interpreter"),
                "{message}"
            )
        }
        other => panic!("expected a launch error, got {other:?}"),
    }
}

/// One kernel of `tritium-kernels`, launched race-checked.
type Clean = (&'static str, fn(&Device, &LaunchOptions) -> Result<()>);

fn clean_kernels() -> Vec<Clean> {
    vec![
        ("vector add", |d, o| {
            let n = 3000;
            let (x, y) = (random_f32(n, 1), random_f32(n, 2));
            let mut out = vec![0f32; n];
            add::launch_with(
                d,
                n.div_ceil(1024),
                o,
                &mut out[..],
                &x[..],
                &y[..],
                n as i32,
                1024,
            )
        }),
        ("softmax", |d, o| {
            let x = Array2::from_shape_vec((6, 40), random_f32(240, 3)).unwrap();
            let mut out = Array2::<f32>::zeros((6, 40));
            softmax::launch_explicit(d, 6, o, &mut out, &x, 40, 40, 40, 64)
        }),
        ("matmul", |d, o| {
            let (m, n, k) = (40, 24, 36);
            let a = Array2::from_shape_vec((m, k), random_f32(m * k, 4)).unwrap();
            let b = Array2::from_shape_vec((k, n), random_f32(k * n, 5)).unwrap();
            let mut c = Array2::<f32>::zeros((m, n));
            let (mi, ni, ki) = (m as i32, n as i32, k as i32);
            let grid = [m.div_ceil(16), n.div_ceil(16)];
            matmul::launch_explicit(
                d, grid, o, &mut c, &a, &b, mi, ni, ki, ki, 1, ni, 1, ni, 1, 16, 16, 16,
            )
        }),
        ("histogram (tile atomics)", |d, o| {
            let bins = Array1::from_iter((0..2000).map(|i| (i * 7919) % 37));
            let mut counts = Array1::<i32>::zeros(37);
            histogram::launch_with(d, 8, o, &mut counts, &bins, 2000, 37, 256)
        }),
        ("row statistics (scalar atomics)", |d, o| {
            let x = Array2::from_shape_vec((9, 50), random_f32(450, 6)).unwrap();
            let mut arg = Array1::<i32>::zeros(9);
            let mut hi = Array1::from_elem(1, f32::NEG_INFINITY);
            let mut lo = Array1::from_elem(1, f32::INFINITY);
            row_stats::launch_with(d, 9, o, &mut arg, &mut hi, &mut lo, &x, 50, 64)
        }),
        ("dropout", |d, o| {
            let x = random_f32(3000, 7);
            let mut out = vec![0f32; 3000];
            seeded_dropout::launch_with(d, 3, o, &mut out[..], &x[..], 3000, 0.5, 42, 1024)
        }),
        ("SiLU", |d, o| {
            let x = random_f32(3000, 8);
            let mut out = vec![0f32; 3000];
            sigmoid_gated::launch_with(d, 3, o, &mut out[..], &x[..], 3000, 1.0, 1024)
        }),
        ("collatz (while loops)", |d, o| {
            let start = Array1::from_iter((1..=40).map(i64::from));
            let mut steps = Array1::<i32>::zeros(40);
            collatz::launch_with(d, 3, o, &mut steps, &start, 40, 16)
        }),
        (
            "fused attention forward (block pointers, causal)",
            |d, o| {
                let (heads, n, dim) = (2, 32, 16);
                let data = |seed| {
                    ndarray::Array4::from_shape_vec(
                        (1, heads, n, dim),
                        random_f32(heads * n * dim, seed),
                    )
                    .unwrap()
                };
                let (q, k, v) = (data(11), data(12), data(13));
                let mut out = ndarray::Array4::<f32>::zeros((1, heads, n, dim));
                let mut lse = ndarray::Array3::<f32>::zeros((1, heads, n));
                let grid = [n / 16, heads];
                attention_forward::launch_with(
                    d, grid, o, &mut out, &mut lse, &q, &k, &v, 0.25, n as i32, 16, 16, dim, true,
                )
            },
        ),
        ("layer norm forward and backward", |d, o| {
            let (rows, n) = (6, 40);
            let x = Array2::from_shape_vec((rows, n), random_f32(rows * n, 9)).unwrap();
            let dy = Array2::from_shape_vec((rows, n), random_f32(rows * n, 10)).unwrap();
            let (w, b) = (Array1::<f32>::ones(n), Array1::<f32>::zeros(n));
            let mut y = Array2::<f32>::zeros((rows, n));
            let (mut mean, mut rstd) = (Array1::<f32>::zeros(rows), Array1::<f32>::zeros(rows));
            let (ni, s) = (n as i32, n as i32);
            layer_norm_fwd::launch_with(
                d, rows, o, &x, &mut y, &w, &b, &mut mean, &mut rstd, s, ni, 1e-5, 64,
            )?;
            let mut dx = Array2::<f32>::zeros((rows, n));
            let (mut dw_rows, mut db_rows) = (
                Array2::<f32>::zeros((rows, n)),
                Array2::<f32>::zeros((rows, n)),
            );
            layer_norm_bwd_dx::launch_with(
                d,
                rows,
                o,
                &mut dx,
                &dy,
                &x,
                &w,
                &mean,
                &rstd,
                &mut dw_rows,
                &mut db_rows,
                s,
                ni,
                64,
            )?;
            let (mut dw, mut db) = (Array1::<f32>::zeros(n), Array1::<f32>::zeros(n));
            layer_norm_bwd_dwdb::launch_with(
                d,
                n.div_ceil(16),
                o,
                &mut dw,
                &mut db,
                &dw_rows,
                &db_rows,
                rows as i32,
                ni,
                4,
                16,
            )
        }),
    ]
}

#[test]
fn the_kernels_of_tritium_kernels_are_race_free() {
    for device in devices() {
        for (name, run) in clean_kernels() {
            run(&device, &race_checked()).unwrap_or_else(|e| panic!("{device:?} {name}: {e}"));
        }
    }
}
