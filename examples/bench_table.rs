//! The benchmark table of issue 2: every Tritium kernel timed side by side with its
//! baselines in one run, reported as ratios (and GB/s against the bandwidth loop).
//!
//!     scripts/dev bench          # or: cargo run --release --example bench_table
//!     cargo run --release --example bench_table -- compile   # the cold-compile rows only
//!     cargo run --release --example bench_table -- checks    # checked mode's and race checking's costs
//!     cargo run --release --example bench_table -- launches  # a cached launch's overhead
//!     cargo run --release --example bench_table -- safety    # default (proven) launches vs `launch_unchecked`
//!     cargo run --release --example bench_table -- matmul    # the matmul rows only
//!     cargo run --release --example bench_table -- attention # the matmul and attention rows
//!     cargo run --release --example bench_table -- matmul-blocks 4096 96 64 64 [ROUNDS]
//!                                              # tutorial 03 with the given blocks vs OpenBLAS
//!     cargo run --release --example bench_table -- dot-ceiling [BM BN BK]
//!                                              # `dot` on hot tiles vs the FMA peak
//!     cargo run --release --example bench_table -- libm [NAME…]
//!                                              # f32 libdevice functions vs `exp`
//!                                              # (LIBM_N=65536 LIBM_ROUNDS=200: in cache)
//!
//! Each row's candidates are timed interleaved (round after round, best of each), so that
//! a busy machine slows them alike; the bandwidth loop is timed again with every
//! memory-bound kernel it is compared with.

use ndarray::{Array1, Array2, Axis, Zip};
use std::time::Duration;
use tritium::Device;
use tritium_kernels::attention::{attention, attention_backward, AttentionConfig};
use tritium_kernels::bench::{
    bandwidth_loop, fma_peak_gflops, fma_peak_lanes, gbps, interleaved, OpenBlas,
};
use tritium_kernels::grouped_gemm::grouped_matmul_2d;
use tritium_kernels::layer_norm::{layer_norm_into, LayerNormOutMut};
use tritium_kernels::matmul::{
    matmul_2d, matmul_2d_into, matmul_carried_2d_into, matmul_persistent_2d, MatmulBlocks,
};
use tritium_kernels::softmax::softmax_rows_into;
use tritium_kernels::vector_add::{add, ADD_BLOCK};

fn ms(t: Duration) -> f64 {
    t.as_secs_f64() * 1e3
}

fn row(name: &str, t: Duration, base: Duration, gb: f64) {
    println!(
        "{name:<34} {:>11.3} {:>11.3} {:>8.2} {:>9.1}",
        ms(t),
        ms(base),
        base.as_secs_f64() / t.as_secs_f64(),
        gb
    );
}

/// The child process of [`cold_compile_rows`]: the first launch of each kernel in a
/// fresh process whose disk cache is `TRITIUM_CACHE_DIR`, with where its time went.
fn cold_compile_child() -> tritium::Result<()> {
    use tritium::backend::pipeline::stats;
    let device = Device::cpu();
    let phases = || stats().phases;
    let timed = |name: &str, launch: &mut dyn FnMut() -> tritium::Result<()>| {
        let before = phases();
        let start = std::time::Instant::now();
        launch()?;
        let wall = start.elapsed();
        let p = phases().since(&before);
        println!(
            "  {name:<24} {:>7.1} {:>6.1} {:>6.1} {:>6.1} {:>7.1} {:>6.1} {:>6.1} {:>6.1} {:>6.1}",
            ms(wall),
            ms(p.trace),
            ms(p.key),
            ms(p.link),
            ms(p.codegen),
            ms(p.verify),
            ms(p.optimize),
            ms(p.emit),
            ms(p.load)
        );
        Ok::<_, tritium::Error>(())
    };
    println!(
        "  {:<24} {:>7} {:>6} {:>6} {:>6} {:>7} {:>6} {:>6} {:>6} {:>6}",
        "first launch (ms)",
        "wall",
        "trace",
        "key",
        "link",
        "codegen",
        "verify",
        "O3",
        "emit",
        "load"
    );
    // LLVM's and the JIT's one-time set-up, paid by whichever kernel comes first.
    let (x64, mut o64) = (vec![1f64; 4096], vec![0f64; 4096]);
    timed("process set-up (add f64)", &mut || {
        add::launch(&device, 4, &mut o64, &x64, &x64, 4096, ADD_BLOCK)
    })?;
    timed("vector add f32", &mut || first_vector_add(&device))?;
    timed("softmax f32", &mut || first_softmax(&device))?;
    timed("matmul f32", &mut || first_matmul(&device))?;
    if std::env::args().nth(2).as_deref() == Some(WITHOUT_AUTOTUNING) {
        return Ok(());
    }
    let a = Array2::<f32>::ones((128, 128));
    // Tutorial 03's seven configs compiled (side by side on the machine's cores), then timed.
    timed("matmul autotuned, 7 cfgs", &mut || {
        tritium_kernels::matmul::matmul_autotuned::<f32, f32>(&device, a.view(), a.view())
            .map(|_| ())
    })?;
    Ok(())
}

/// The argument after [`COLD_CHILD`] that skips the autotuned row (`scripts/dev
/// compile-counts`, where it would only add minutes under valgrind).
const WITHOUT_AUTOTUNING: &str = "--without-autotuning";

// One function per kernel of the cold-compile rows, never inlined, so that `scripts/dev
// compile-counts` can count each one's instructions (valgrind's `--toggle-collect`).

#[inline(never)]
fn first_vector_add(device: &Device) -> tritium::Result<()> {
    let (x, mut out) = (vec![1f32; 4096], vec![0f32; 4096]);
    add::launch(device, 4, &mut out, &x, &x, 4096, ADD_BLOCK)
}

#[inline(never)]
fn first_softmax(device: &Device) -> tritium::Result<()> {
    let xm = Array2::<f32>::ones((64, 1024));
    let mut sm = Array2::<f32>::zeros((64, 1024));
    softmax_rows_into(device, xm.view(), sm.view_mut())
}

#[inline(never)]
fn first_matmul(device: &Device) -> tritium::Result<()> {
    let a = Array2::<f32>::ones((128, 128));
    matmul_2d::<f32, f32>(device, a.view(), a.view(), MatmulBlocks::default()).map(|_| ())
}

/// Cold compiles: the first launch of vector add, softmax and matmul in a fresh process
/// with an empty disk cache, then in a second process that finds them on disk.
fn cold_compile_rows() {
    let dir = std::env::temp_dir().join(format!("tritium-bench-cold-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let exe = std::env::current_exe().expect("the bench's own path");
    for what in ["empty disk cache", "disk-cache hits"] {
        println!("cold compile, {what}:");
        let out = std::process::Command::new(&exe)
            .arg(COLD_CHILD)
            .env("TRITIUM_CACHE_DIR", &dir)
            .env_remove("TRITIUM_DUMP")
            .output()
            .expect("run the cold-compile child");
        print!("{}", String::from_utf8_lossy(&out.stdout));
        if !out.status.success() {
            println!("  failed: {}", String::from_utf8_lossy(&out.stderr));
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// What checked mode and race checking cost: vector add over 2^20 f32 on the CPU, plain,
/// checked and race-checked, and on the interpreter, interleaved.
fn checking_rows() {
    let device = Device::cpu();
    let n = 1 << 20;
    let x = Array1::from_iter((0..n).map(|i| (i % 97) as f32));
    let mut out = Array1::<f32>::zeros(n);
    let grid = n.div_ceil(ADD_BLOCK);
    let options = |bounds, race, interpret| tritium::LaunchOptions {
        bounds_check: Some(bounds),
        race_check: Some(race),
        interpret: Some(interpret),
        ..Default::default()
    };
    let (plain, checked, raced) = (
        options(false, false, false),
        options(true, false, false),
        options(false, true, false),
    );
    let interp = options(false, false, true);
    let out = std::cell::RefCell::new(&mut out);
    let run = |o: &tritium::LaunchOptions| {
        let mut out = out.borrow_mut();
        add::launch_with(&device, grid, o, &mut **out, &x, &x, n as i32, ADD_BLOCK).unwrap()
    };
    let [t_plain, t_checked, t_race, t_interp] = interleaved(
        3,
        [
            &mut || run(&plain),
            &mut || run(&checked),
            &mut || run(&raced),
            &mut || run(&interp),
        ],
    );
    println!("checking costs, vector add 2^20 f32 (ratio: time / unchecked time):");
    for (name, t) in [
        ("unchecked", t_plain),
        ("checked mode", t_checked),
        ("race checking", t_race),
        ("interpreter", t_interp),
    ] {
        println!(
            "  {name:<24} {:>10.3} ms {:>9.1}x",
            ms(t),
            t.as_secs_f64() / t_plain.as_secs_f64()
        );
    }
}

/// What sound launches cost (issue 43): each kernel's default launch, whose bounds proof
/// runs at every launch and whose unproven accesses would be checked, against the same
/// launch made with `LaunchOptions::unchecked` (`launch_unchecked`), interleaved. A ratio
/// is unchecked time / default time: 1.0 is free.
fn safety_rows(device: &Device) {
    use tritium_kernels::attention::attention_forward;
    use tritium_kernels::layer_norm::layer_norm_fwd;
    use tritium_kernels::matmul::matmul;
    use tritium_kernels::softmax::softmax_rows_into_with;
    let safe = tritium::LaunchOptions::default();
    // SAFETY: every launch below passes buffers of the sizes its kernel indexes (the same
    // launches succeed by default, where the bounds proof checks exactly that).
    let unchecked = unsafe { tritium::LaunchOptions::default().unchecked() };
    let rounds = 10;
    println!(
        "{:<40} {:>11} {:>13} {:>8}",
        "sound launches (CPU)", "default ms", "unchecked ms", "ratio"
    );
    let row = |name: &str, [t, u]: [Duration; 2]| {
        println!(
            "{name:<40} {:>11.3} {:>13.3} {:>8.3}",
            ms(t),
            ms(u),
            u.as_secs_f64() / t.as_secs_f64()
        )
    };
    // Vector add, 2^24 f32.
    let n = 1 << 24;
    let x = Array1::from_iter((0..n).map(|i| (i % 97) as f32));
    let mut out = Array1::<f32>::zeros(n);
    let out = std::cell::RefCell::new(&mut out);
    let grid = n.div_ceil(ADD_BLOCK);
    let add = |o: &tritium::LaunchOptions| {
        let mut out = out.borrow_mut();
        add::launch_with(device, grid, o, &mut **out, &x, &x, n as i32, ADD_BLOCK).unwrap()
    };
    row(
        "vector add 2^24",
        interleaved(rounds, [&mut || add(&safe), &mut || add(&unchecked)]),
    );
    // Softmax 4096 x 1024.
    let (r, c) = (4096, 1024);
    let xm = Array2::from_shape_fn((r, c), |(i, j)| ((i * 31 + j * 17) % 101) as f32 / 25.0);
    let sm_out = std::cell::RefCell::new(Array2::<f32>::zeros((r, c)));
    let sm = |o: &tritium::LaunchOptions| {
        softmax_rows_into_with(device, o, xm.view(), sm_out.borrow_mut().view_mut()).unwrap()
    };
    row(
        "softmax 4096x1024",
        interleaved(rounds, [&mut || sm(&safe), &mut || sm(&unchecked)]),
    );
    // Layer norm forward 4096 x 1024.
    let w = Array1::from_elem(c, 1.5f32);
    let b = Array1::from_elem(c, 0.25f32);
    let ln = std::cell::RefCell::new((
        Array2::<f32>::zeros((r, c)),
        Array1::<f32>::zeros(r),
        Array1::<f32>::zeros(r),
    ));
    let norm = |o: &tritium::LaunchOptions| {
        let mut ln = ln.borrow_mut();
        let (y, mean, rstd) = &mut *ln;
        layer_norm_fwd::launch_with(
            device, r, o, &xm, y, &w, &b, mean, rstd, c as i32, c as i32, 1e-5, 1024,
        )
        .unwrap()
    };
    row(
        "layer norm 4096x1024",
        interleaved(rounds, [&mut || norm(&safe), &mut || norm(&unchecked)]),
    );
    // Matmul 1024^3 f32, tutorial 03's blocks for the CPU.
    let m = 1024;
    let (a, bm) = (matmul_input(m, m, 1), matmul_input(m, m, 2));
    let cm = std::cell::RefCell::new(Array2::<f32>::zeros((m, m)));
    let blocks = MatmulBlocks::default();
    let mm = |o: &tritium::LaunchOptions| {
        let grid = [m.div_ceil(blocks.m), m.div_ceil(blocks.n)];
        let (s, one) = (m as i32, 1);
        matmul::launch_explicit(
            device,
            grid,
            o,
            cm.borrow_mut().view_mut(),
            a.view(),
            bm.view(),
            s,
            s,
            s,
            s,
            one,
            s,
            one,
            s,
            one,
            blocks.m,
            blocks.n,
            blocks.k,
        )
        .unwrap()
    };
    row(
        "matmul 1024^3 f32",
        interleaved(rounds, [&mut || mm(&safe), &mut || mm(&unchecked)]),
    );
    // Attention forward, Z·H = 8, N = 1024, D = 64, f32.
    let (zh, ctx, d) = (8, 1024, 64);
    let q = ndarray::Array4::from_shape_fn((1, zh, ctx, d), |(_, h, i, j)| {
        ((h * 7 + i * 3 + j) % 17) as f32 / 17.0
    });
    let att = std::cell::RefCell::new((
        ndarray::Array4::<f32>::zeros((1, zh, ctx, d)),
        ndarray::Array3::<f32>::zeros((1, zh, ctx)),
    ));
    let cfg = AttentionConfig::default();
    let attend = |o: &tritium::LaunchOptions| {
        let mut att = att.borrow_mut();
        let (out, lse) = &mut *att;
        let grid = [ctx.div_ceil(cfg.block_m), zh];
        attention_forward::launch_with(
            device,
            grid,
            o,
            out,
            lse,
            q.view(),
            q.view(),
            q.view(),
            0.125,
            ctx as i32,
            cfg.block_m,
            cfg.block_n,
            d,
            false,
        )
        .unwrap()
    };
    row(
        "attention fwd 8x1024x64 f32",
        interleaved(3, [&mut || attend(&safe), &mut || attend(&unchecked)]),
    );
}

/// The cost of a cached launch: vector add over grids of 1 and 64 programs of 16 elements
/// (the kernel's own work is a few nanoseconds per program), median of many launches,
/// against rayon's `install` of an empty parallel loop over 64 items (the pool's floor).
fn launch_rows() {
    let device = Device::cpu();
    let n = 64 * 16;
    let x = vec![1f32; n];
    let mut out = vec![0f32; n];
    let median = |f: &mut dyn FnMut()| {
        let mut times: Vec<f64> = (0..2001)
            .map(|_| {
                let t = std::time::Instant::now();
                f();
                t.elapsed().as_secs_f64() * 1e6
            })
            .collect();
        times.sort_by(f64::total_cmp);
        times[times.len() / 2]
    };
    println!("cached launch overhead (median of 2001 launches, µs):");
    for programs in [1usize, 64] {
        let len = programs * 16;
        let t = median(&mut || {
            add::launch(
                &device,
                programs,
                &mut out[..len],
                &x[..len],
                &x[..len],
                len as i32,
                16,
            )
            .unwrap()
        });
        println!("  vector add, {programs:>2} programs of 16 {t:>10.2}");
        // SAFETY: the buffers hold the `len` elements the launch indexes.
        let unchecked = unsafe { tritium::LaunchOptions::default().unchecked() };
        let u = median(&mut || {
            add::launch_with(
                &device,
                programs,
                &unchecked,
                &mut out[..len],
                &x[..len],
                &x[..len],
                len as i32,
                16,
            )
            .unwrap()
        });
        println!("    the same, launch_unchecked  {u:>10.2}");
    }
    // `n` alternating between two right values: the memoized verdict never applies, so
    // every launch evaluates the bounds proof afresh.
    let (len, mut k) = (16, 0usize);
    let mut fresh = |options: &tritium::LaunchOptions| {
        k += 1;
        let n = len as i32 - (k % 2) as i32;
        add::launch_with(
            &device,
            1,
            options,
            &mut out[..len],
            &x[..len],
            &x[..len],
            n,
            16,
        )
        .unwrap()
    };
    let t = median(&mut || fresh(&tritium::LaunchOptions::default()));
    println!("  vector add, n changing every launch (a fresh bounds proof) {t:>6.2}");
    // SAFETY: both values of `n` index inside the 16 elements of every buffer.
    let unchecked = unsafe { tritium::LaunchOptions::default().unchecked() };
    let u = median(&mut || fresh(&unchecked));
    println!("    the same, launch_unchecked  {u:>10.2}");
    use rayon::prelude::*;
    let t = median(&mut || {
        (0..64).into_par_iter().for_each(|i| {
            std::hint::black_box(i);
        })
    });
    println!("  rayon: 64 empty items     {t:>10.2}");
}

/// MindSpore's CustomAdd, compiled at run time by the AOT operator rows.
const AOT_ADD_CC: &str = include_str!("../aot/tests/data/add.cc");

/// An AOT operator (MindSpore's CustomAdd) called in this process and isolated in a worker
/// process (`AotOpBuilder::isolated`), median per call: what isolation costs.
fn isolation_rows() {
    use tritium::aot::{AotOp, DType};
    let dir = std::env::temp_dir().join(format!("tritium-bench-aot-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temporary directory");
    let src = dir.join("add.cc");
    std::fs::write(&src, AOT_ADD_CC).expect("writing add.cc");
    let build = |isolated: bool| {
        let b = AotOp::builder(format!("{}:CustomAdd", src.display()))
            .infer_shape(|x| x[0].clone())
            .out_dtype(DType::F32);
        let b = if isolated { b.isolated() } else { b };
        b.build().expect("CustomAdd builds")
    };
    let (here, isolated) = (build(false), build(true));
    println!("AOT CustomAdd per call (median, µs)   in-process     isolated  overhead   ratio");
    for (n, calls) in [(16usize, 2001), (1 << 24, 11)] {
        let x = ndarray::Array1::from_elem(n, 1.5f32);
        let y = ndarray::Array1::from_elem(n, 2.0f32);
        let median = |op: &AotOp| {
            op.call1((&x, &y)).expect("a warm-up call");
            let mut times: Vec<f64> = (0..calls)
                .map(|_| {
                    let t = std::time::Instant::now();
                    std::hint::black_box(op.call1((&x, &y)).expect("a call"));
                    t.elapsed().as_secs_f64() * 1e6
                })
                .collect();
            times.sort_by(f64::total_cmp);
            times[times.len() / 2]
        };
        let (a, b) = (median(&here), median(&isolated));
        println!(
            "  {:<36} {a:>10.1} {b:>12.1} {:>9.1} {:>7.2}",
            format!("{n} f32 elements"),
            b - a,
            a / b
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Row softmax the straightforward ndarray way (the baseline of the softmax rows).
fn ndarray_softmax(x: &Array2<f32>) -> Array2<f32> {
    let m = x.map_axis(Axis(1), |row| row.fold(f32::NEG_INFINITY, |a, b| a.max(*b)));
    let e = (x - &m.insert_axis(Axis(1))).mapv(f32::exp);
    let s = e.sum_axis(Axis(1));
    &e / &s.insert_axis(Axis(1))
}

/// The argument that makes this example [`cold_compile_child`].
const COLD_CHILD: &str = "--cold-compile-child";

fn main() -> tritium::Result<()> {
    // SAFETY: first in `main`, while this process has one thread.
    unsafe { OpenBlas::sleep_idle_threads() };
    let arg = std::env::args().nth(1);
    match arg.as_deref() {
        Some(COLD_CHILD) => return cold_compile_child(),
        Some("compile") => {
            cold_compile_rows();
            return Ok(());
        }
        Some("checks") => {
            checking_rows();
            return Ok(());
        }
        Some("launches") => {
            launch_rows();
            return Ok(());
        }
        Some("safety") => {
            safety_rows(&Device::cpu());
            return Ok(());
        }
        Some("isolation") => {
            isolation_rows();
            return Ok(());
        }
        Some("matmul") => {
            matmul_rows(&Device::cpu());
            return Ok(());
        }
        Some("dot-ceiling") => {
            dot_ceiling_rows(&Device::cpu());
            return Ok(());
        }
        Some("matmul-blocks") => {
            matmul_blocks_row(&Device::cpu());
            return Ok(());
        }
        Some("matmul-carried") => {
            matmul_carried_row(&Device::cpu());
            return Ok(());
        }
        Some("libm") => {
            libm_rows(&Device::cpu());
            return Ok(());
        }
        Some("attention") => {
            let device = Device::cpu();
            let matmul_gflops = matmul_rows(&device);
            attention_rows(&device, matmul_gflops);
            return Ok(());
        }
        _ => {}
    }
    let device = Device::cpu();
    let rounds = 20;
    println!("threads: {}", tritium::backend::cpu::num_threads());
    println!(
        "{:<34} {:>11} {:>11} {:>8} {:>9}",
        "kernel (baseline)", "tritium ms", "base ms", "ratio", "GB/s"
    );

    // The bandwidth loop: out[i] = a[i] + b[i] over 2^24 f32, parallel chunks.
    let n = 1 << 24;
    let x = Array1::from_iter((0..n).map(|i| (i % 97) as f32));
    let y = Array1::from_iter((0..n).map(|i| (i % 13) as f32));
    let (xs, ys) = (x.as_slice().unwrap(), y.as_slice().unwrap());
    let mut w = vec![0f32; n];
    let bytes = 12 * n;
    let mut bw = || bandwidth_loop(&mut w, xs, ys);

    // Vector add, 2^24 f32.
    let mut out = Array1::<f32>::zeros(n);
    let mut z = Array1::<f32>::zeros(n);
    let grid = n.div_ceil(ADD_BLOCK);
    let [t_add, t_zip, t_bw] = interleaved(
        rounds,
        [
            &mut || add::launch(&device, grid, &mut out, &x, &y, n as i32, ADD_BLOCK).unwrap(),
            &mut || {
                Zip::from(&mut z)
                    .and(&x)
                    .and(&y)
                    .par_for_each(|o, a, b| *o = a + b)
            },
            &mut bw,
        ],
    );
    assert_eq!(out, &x + &y);
    row(
        "vector add 2^24 (ndarray par Zip)",
        t_add,
        t_zip,
        gbps(bytes, t_add),
    );
    row(
        "vector add 2^24 (bandwidth loop)",
        t_add,
        t_bw,
        gbps(bytes, t_add),
    );

    // Fused softmax 4096 x 1024, into a preallocated output.
    let (r, c) = (4096, 1024);
    let xm = Array2::from_shape_fn((r, c), |(i, j)| ((i * 31 + j * 17) % 101) as f32 / 25.0);
    let mut sm_out = Array2::<f32>::zeros((r, c));
    let [t_sm, t_sm_nd, t_bw] = interleaved(
        rounds,
        [
            &mut || softmax_rows_into(&device, xm.view(), sm_out.view_mut()).unwrap(),
            &mut || {
                ndarray_softmax(&xm);
            },
            &mut bw,
        ],
    );
    let sm_bytes = 2 * 4 * r * c;
    let bw_gbps = gbps(bytes, t_bw);
    row(
        "softmax 4096x1024 (ndarray)",
        t_sm,
        t_sm_nd,
        gbps(sm_bytes, t_sm),
    );
    println!(
        "{:<34} {:>11.1}% of bandwidth loop ({:.1} GB/s); ndarray {:.1}%",
        "  softmax as bandwidth fraction",
        100.0 * gbps(sm_bytes, t_sm) / bw_gbps,
        bw_gbps,
        100.0 * gbps(sm_bytes, t_sm_nd) / bw_gbps
    );

    // Softmax 4096 x 1000: every row is a partial block (the masked copy of the code),
    // against ndarray and per element against the full rows above.
    let c_odd = 1000;
    let xo = Array2::from_shape_fn((r, c_odd), |(i, j)| ((i * 31 + j * 17) % 101) as f32 / 25.0);
    let mut so = Array2::<f32>::zeros((r, c_odd));
    let [t_odd, t_odd_nd, t_full] = interleaved(
        rounds,
        [
            &mut || softmax_rows_into(&device, xo.view(), so.view_mut()).unwrap(),
            &mut || {
                ndarray_softmax(&xo);
            },
            &mut || softmax_rows_into(&device, xm.view(), sm_out.view_mut()).unwrap(),
        ],
    );
    row(
        "softmax 4096x1000 (ndarray)",
        t_odd,
        t_odd_nd,
        gbps(2 * 4 * r * c_odd, t_odd),
    );
    let per_elem = |t: std::time::Duration, n: usize| t.as_secs_f64() * 1e9 / n as f64;
    println!(
        "{:<34} {:>11.3} ns per element; 4096x1024: {:.3} ns",
        "  softmax 4096x1000",
        per_elem(t_odd, r * c_odd),
        per_elem(t_full, r * c)
    );

    // The same 4096 x 1000 rows read as a column block of the 4096 x 1024 matrix (a strided
    // view with gaps between its rows, proven at launch like a dense one), against the
    // contiguous copy's rows.
    let block = xm.slice(ndarray::s![.., ..c_odd]);
    let mut so_view = Array2::<f32>::zeros((r, c_odd));
    let [t_view, t_dense] = interleaved(
        rounds,
        [
            &mut || softmax_rows_into(&device, block, so_view.view_mut()).unwrap(),
            &mut || softmax_rows_into(&device, xo.view(), so.view_mut()).unwrap(),
        ],
    );
    row(
        "softmax 4096x1000 view (contiguous)",
        t_view,
        t_dense,
        gbps(2 * 4 * r * c_odd, t_view),
    );

    // Layer norm 4096 x 1024, into preallocated outputs (as the bandwidth loop's: a fresh
    // 16 MB output would cost page faults).
    let wv = Array1::from_shape_fn(c, |j| 1.0 + (j % 5) as f32 * 0.1);
    let bv = Array1::from_shape_fn(c, |j| (j % 3) as f32 * 0.1);
    let mut ln_y = Array2::<f32>::zeros((r, c));
    let (mut ln_mean, mut ln_rstd) = (Array1::<f32>::zeros(r), Array1::<f32>::zeros(r));
    let [t_ln, t_ln_nd, t_bw] = interleaved(
        rounds,
        [
            &mut || {
                let out = LayerNormOutMut {
                    y: ln_y.view_mut(),
                    mean: ln_mean.view_mut(),
                    rstd: ln_rstd.view_mut(),
                };
                layer_norm_into(&device, xm.view(), wv.view(), bv.view(), 1e-5, out).unwrap();
            },
            &mut || {
                let mean = xm.mean_axis(Axis(1)).unwrap();
                let centered = &xm - &mean.insert_axis(Axis(1));
                let var = centered.mapv(|v| v * v).mean_axis(Axis(1)).unwrap();
                let rstd = var.mapv(|v| 1.0 / (v + 1e-5).sqrt());
                let _ = &(&centered * &rstd.insert_axis(Axis(1))) * &wv + &bv;
            },
            &mut bw,
        ],
    );
    let bw_gbps = gbps(bytes, t_bw);
    row(
        "layer norm 4096x1024 (ndarray)",
        t_ln,
        t_ln_nd,
        gbps(sm_bytes, t_ln),
    );
    println!(
        "{:<34} {:>11.1}% of bandwidth loop ({:.1} GB/s); ndarray {:.1}%",
        "  layer norm as bandwidth fraction",
        100.0 * gbps(sm_bytes, t_ln) / bw_gbps,
        bw_gbps,
        100.0 * gbps(sm_bytes, t_ln_nd) / bw_gbps
    );
    if arg.as_deref() == Some("memory") {
        return Ok(());
    }

    // Matmul 1024^3 f32.
    let k = 1024;
    let a = Array2::from_shape_fn((k, k), |(i, j)| ((i + 2 * j) % 17) as f32 / 17.0);
    let b = Array2::from_shape_fn((k, k), |(i, j)| ((3 * i + j) % 13) as f32 / 13.0);
    let blocks = MatmulBlocks::default();
    let [t_mm, t_dot] = interleaved(
        5,
        [
            &mut || {
                let _: Array2<f32> = matmul_2d(&device, a.view(), b.view(), blocks).unwrap();
            },
            &mut || {
                let _ = a.dot(&b);
            },
        ],
    );
    let flops = 2.0 * (k * k * k) as f64;
    row("matmul 1024^3 f32 (ndarray .dot)", t_mm, t_dot, 0.0);
    println!(
        "{:<34} {:>11.1} GFLOP/s; ndarray {:.1} GFLOP/s",
        "  matmul throughput",
        flops / t_mm.as_secs_f64() / 1e9,
        flops / t_dot.as_secs_f64() / 1e9
    );

    let matmul_gflops = matmul_rows(&device);
    attention_rows(&device, matmul_gflops);
    safety_rows(&device);

    // Tutorial 09's persistent matmul (one program per worker thread) against the
    // one-program-per-tile matmul above, same blocks.
    let workers = tritium::backend::cpu::num_threads();
    let [t_pers, t_tiles] = interleaved(
        5,
        [
            &mut || {
                let _: Array2<f32> =
                    matmul_persistent_2d(&device, a.view(), b.view(), blocks, workers).unwrap();
            },
            &mut || {
                let _: Array2<f32> = matmul_2d(&device, a.view(), b.view(), blocks).unwrap();
            },
        ],
    );
    row("persistent matmul 1024^3 (matmul)", t_pers, t_tiles, 0.0);

    // Tutorial 08's grouped GEMM: four problems of different shapes in one launch (one
    // program per worker thread) against one tutorial-03 matmul launch per problem.
    let shapes = [
        (512, 512, 512),
        (256, 1024, 256),
        (1024, 128, 384),
        (128, 128, 1024),
    ];
    let group: Vec<(Array2<f32>, Array2<f32>)> = (shapes.iter())
        .map(|&(m, n, k)| {
            let a = Array2::from_shape_fn((m, k), |(i, j)| ((i + 2 * j) % 11) as f32 / 11.0);
            let b = Array2::from_shape_fn((k, n), |(i, j)| ((3 * i + j) % 7) as f32 / 7.0);
            (a, b)
        })
        .collect();
    let problems: Vec<_> = group.iter().map(|(a, b)| (a.view(), b.view())).collect();
    let [t_grouped, t_each] = interleaved(
        5,
        [
            &mut || {
                grouped_matmul_2d(&device, &problems, blocks, workers).unwrap();
            },
            &mut || {
                for (a, b) in &problems {
                    let _: Array2<f32> = matmul_2d(&device, a.view(), b.view(), blocks).unwrap();
                }
            },
        ],
    );
    row(
        "grouped GEMM, 4 shapes (matmul each)",
        t_grouped,
        t_each,
        0.0,
    );

    // Fused attention (tutorial 06's forward pass), 8 heads × 1024 positions × 64, f32,
    // against the unfused ndarray computation (S = QKᵀ·scale, row softmax, P V per head).
    let (heads, ctx, dim) = (8, 1024, 64);
    let shape = (1, heads, ctx, dim);
    let data = |seed: usize| {
        ndarray::Array4::from_shape_fn(shape, |(_, h, i, j)| {
            ((h * 131 + i * 31 + j * 7 + seed) % 29) as f32 / 29.0 - 0.5
        })
    };
    let (q, kk, v) = (data(1), data(2), data(3));
    let scale = 1.0 / (dim as f32).sqrt();
    let [t_att, t_att_nd] = interleaved(
        5,
        [
            &mut || {
                let config = AttentionConfig::default();
                attention(&device, q.view(), kk.view(), v.view(), scale, config).unwrap();
            },
            &mut || {
                for h in 0..heads {
                    let at = |a: &ndarray::Array4<f32>| -> Array2<f32> {
                        a.slice(ndarray::s![0, h, .., ..]).to_owned()
                    };
                    let mut s = at(&q).dot(&at(&kk).t()) * scale;
                    for mut r in s.rows_mut() {
                        let m = r.fold(f32::NEG_INFINITY, |a, &b| a.max(b));
                        r.mapv_inplace(|x| (x - m).exp());
                        let total = r.sum();
                        r /= total;
                    }
                    let _ = s.dot(&at(&v));
                }
            },
        ],
    );
    row("attention 8x1024x64 f32 (ndarray)", t_att, t_att_nd, 0.0);
    let att_flops = 4.0 * (heads * ctx * ctx * dim) as f64;
    println!(
        "{:<34} {:>11.1} GFLOP/s; ndarray {:.1} GFLOP/s",
        "  attention throughput",
        att_flops / t_att.as_secs_f64() / 1e9,
        att_flops / t_att_nd.as_secs_f64() / 1e9
    );
    // Its backward pass (dq, dk, dv for an output gradient) against the unfused ndarray
    // gradients (P recomputed, dV = PᵀdO, dS = P∘(dO Vᵀ − delta), dQ = dS K, dK = dSᵀQ).
    let config = AttentionConfig::default();
    let (o, lse) = attention(&device, q.view(), kk.view(), v.view(), scale, config)?;
    let d_o = data(4);
    let [t_bwd, t_bwd_nd] = interleaved(
        3,
        [
            &mut || {
                let (q, k, v) = (q.view(), kk.view(), v.view());
                attention_backward(
                    &device,
                    q,
                    k,
                    v,
                    o.view(),
                    d_o.view(),
                    lse.view(),
                    scale,
                    config,
                )
                .unwrap();
            },
            &mut || {
                for h in 0..heads {
                    let at = |a: &ndarray::Array4<f32>| -> Array2<f32> {
                        a.slice(ndarray::s![0, h, .., ..]).to_owned()
                    };
                    let (qm, km, vm, dom) = (at(&q), at(&kk), at(&v), at(&d_o));
                    let mut p = qm.dot(&km.t()) * scale;
                    for mut r in p.rows_mut() {
                        let m = r.fold(f32::NEG_INFINITY, |a, &b| a.max(b));
                        r.mapv_inplace(|x| (x - m).exp());
                        let total = r.sum();
                        r /= total;
                    }
                    let _dv = p.t().dot(&dom);
                    let delta = (&p.dot(&vm) * &dom).sum_axis(Axis(1)).insert_axis(Axis(1));
                    let ds = &p * &(&dom.dot(&vm.t()) - &delta);
                    let _dq = ds.dot(&km) * scale;
                    let _dk = ds.t().dot(&qm) * scale;
                }
            },
        ],
    );
    row("attention bwd 8x1024x64 (ndarray)", t_bwd, t_bwd_nd, 0.0);
    libm_rows(&device);
    cold_compile_rows();
    println!("ratio column: baseline time / tritium time (> 1 means Tritium is faster)");
    Ok(())
}

/// Elementwise kernels over f32 for the libm rows: [`libm::FUNCTIONS`]`[F]` of `x` (and
/// `y`), and GeGLU's and SwiGLU's forward passes.
mod libm {
    use tritium::dsl::trace::{lang, Tile};
    use tritium::prelude::*;

    /// A function of one or two f32 tiles, with the name its row shows.
    pub type Function = (&'static str, fn(Tile, Tile) -> Tile);

    /// `exp` (every row's baseline) first, then the f32 algorithms of `trace/libm.rs` (and
    /// three of them on arguments that leave no tile to their usual case), then `tanh`
    /// computed in f64 and rounded (the path every f32 function took before), last.
    pub const FUNCTIONS: &[Function] = &[
        ("exp", |x, _| lang::exp(x)),
        ("tanh", |x, _| lang::tanh(x)),
        ("sinh", |x, _| lang::sinh(x)),
        ("cosh", |x, _| lang::cosh(x)),
        ("asinh", |x, _| lang::asinh(x)),
        ("acosh", |x, _| lang::acosh(x + 2.0)),
        ("atanh", |x, _| lang::atanh(x)),
        ("atan", |x, _| lang::atan(x)),
        ("asin", |x, _| lang::asin(x)),
        ("acos", |x, _| lang::acos(x)),
        ("exp10", |x, _| lang::exp10(x)),
        ("expm1", |x, _| lang::expm1(x)),
        ("log1p", |x, _| lang::log1p(x)),
        ("log10", |x, _| lang::log10(x + 2.0)),
        ("cbrt", |x, _| lang::cbrt(x)),
        ("erf", |x, _| lang::erf(x)),
        ("erfc", |x, _| lang::erfc(x)),
        ("erfinv", |x, _| lang::erfinv(x)),
        ("tgamma", |x, _| lang::tgamma(x + 2.0)),
        ("lgamma", |x, _| lang::lgamma(x + 2.0)),
        ("atan2", |x, y| lang::atan2(x, y)),
        ("pow", |x, y| lang::pow(x + 2.0, y)),
        ("hypot", |x, y| lang::hypot(x, y)),
        // Arguments from −3 to 3: every tile has rare lanes (below 0 and 1, a negative
        // base), so that the CPU runs the copy of the loop that computes every case.
        ("tgamma (rare)", |x, _| lang::tgamma(x * 3.0)),
        ("lgamma (rare)", |x, _| lang::lgamma(x * 3.0)),
        ("pow (rare)", |x, y| lang::pow(x * 3.0, y)),
        ("tanh (f64 path)", |x, _| {
            lang::cast(lang::tanh(lang::cast(x, DType::F64)), DType::F32)
        }),
    ];

    /// Whether [`FUNCTIONS`]`[f]` reads `y`.
    pub fn binary(f: usize) -> bool {
        let name = FUNCTIONS[f].0.split(' ').next();
        matches!(name, Some("atan2" | "pow" | "hypot"))
    }

    /// `out = FUNCTIONS[F](x)` for one argument.
    #[kernel]
    pub fn map1(
        out: Ptr<f32>,
        x: Ptr<f32>,
        n: i32,
        #[constexpr] F: usize,
        #[constexpr] BLOCK: usize,
    ) {
        let offs = program_id(0) * BLOCK as i32 + arange(0, BLOCK);
        let mask = offs < n;
        let a = load(x + offs, mask = mask);
        store(out + offs, (FUNCTIONS[F].1)(a, a), mask = mask);
    }

    /// `out = FUNCTIONS[F](x, y)` for two.
    #[kernel]
    pub fn map2(
        out: Ptr<f32>,
        x: Ptr<f32>,
        y: Ptr<f32>,
        n: i32,
        #[constexpr] F: usize,
        #[constexpr] BLOCK: usize,
    ) {
        let offs = program_id(0) * BLOCK as i32 + arange(0, BLOCK);
        let mask = offs < n;
        let a = load(x + offs, mask = mask);
        let b = load(y + offs, mask = mask);
        store(out + offs, (FUNCTIONS[F].1)(a, b), mask = mask);
    }

    /// Liger-Kernel's GeGLU forward, `gelu_tanh(a) · b` with `gelu_tanh(a) = a/2 · (1 +
    /// tanh(√(2/π) (a + 0.044715 a³)))`, its `tanh` in f32 or (`WIDE`) in f64 and rounded;
    /// or (`SWIGLU`) SwiGLU's `a · sigmoid(a) · b`.
    #[kernel]
    pub fn glu(
        out: Ptr<f32>,
        x: Ptr<f32>,
        y: Ptr<f32>,
        n: i32,
        #[constexpr] WIDE: bool,
        #[constexpr] SWIGLU: bool,
        #[constexpr] BLOCK: usize,
    ) {
        let offs = program_id(0) * BLOCK as i32 + arange(0, BLOCK);
        let mask = offs < n;
        let a = load(x + offs, mask = mask);
        let b = load(y + offs, mask = mask);
        let inner = 0.797_884_6 * (a + 0.044_715 * a * a * a);
        let t = if WIDE {
            cast(tanh(cast(inner, DType::F64)), DType::F32)
        } else {
            tanh(inner)
        };
        let gated = if SWIGLU {
            a * sigmoid(a)
        } else {
            0.5 * a * (1.0 + t)
        };
        store(out + offs, gated * b, mask = mask);
    }
}

/// The core's clock in GHz, from a chain of dependent integer adds (one a cycle on any
/// x86-64 core); `None` on other targets. On a shared host it moves with the other tenants'
/// load: compute-bound rows slow down with it and memory-bound ones do not, so printed
/// beside the libm ratios it says which state of the host they were taken in.
fn clock_ghz() -> Option<f64> {
    #[cfg(target_arch = "x86_64")]
    {
        let adds: u64 = 200_000_000;
        let (mut x, mut left) = (0u64, adds);
        let start = std::time::Instant::now();
        // SAFETY: registers only (no memory, no stack); the flags are declared clobbered
        // (asm!'s default).
        unsafe {
            std::arch::asm!(
                "2:",
                "add {x}, 1",
                "add {x}, 1",
                "add {x}, 1",
                "add {x}, 1",
                "sub {left}, 4",
                "jnz 2b",
                x = inout(reg) x,
                left = inout(reg) left,
                options(nomem, nostack),
            );
        }
        std::hint::black_box((x, left));
        Some(adds as f64 / start.elapsed().as_secs_f64() / 1e9)
    }
    #[cfg(not(target_arch = "x86_64"))]
    None
}

/// `libm [NAME…]`: each f32 libdevice function (or those named) against `exp`, over 2^24
/// f32 elements on the CPU, timed interleaved; the ratio is the function's time over
/// `exp`'s (the binary functions read a second array). Then (`tanh-f64`) `tanh` computed
/// in f64 and rounded (the old path) against the f32 one, and (`geglu`) GeGLU's forward
/// pass with either `tanh` against SwiGLU's.
fn libm_rows(device: &Device) {
    use libm::{binary, glu, map1, map2, FUNCTIONS};
    // 2^24 elements, best of 10, unless LIBM_N and LIBM_ROUNDS say otherwise: `exp` is
    // memory-bound over 2^24, and the others compute-bound, so that a busy machine raises
    // their ratios; over 2^16 (in cache, with TRITIUM_NUM_THREADS=1) every row is
    // compute-bound.
    let var = |name: &str, default: usize| {
        std::env::var(name)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    };
    let n = var("LIBM_N", 1 << 24);
    let block = 1024;
    let grid = n.div_ceil(block);
    let rounds = var("LIBM_ROUNDS", 10);
    // In (−1, 1), so that every function is in its domain (acosh, log10, tgamma, lgamma
    // and pow shift it by 2); the algorithms are branch-free, so the time depends little
    // on the values.
    let x: Vec<f32> = (0..n)
        .map(|i| ((i * 7919) % 1999) as f32 / 1000.0 - 0.999)
        .collect();
    let y: Vec<f32> = (0..n)
        .map(|i| ((i * 104_729) % 3989) as f32 / 500.0 - 3.99)
        .collect();
    let (mut out, mut base) = (vec![0f32; n], vec![0f32; n]);
    let names: Vec<String> = std::env::args().skip(2).collect();
    let wanted = |name: &str| names.is_empty() || names.iter().any(|m| m == name);
    let print = |name: &str, t: Duration, base: Duration| {
        let ratio = t.as_secs_f64() / base.as_secs_f64();
        println!("{name:<34} {:>11.3} {:>11.3} {ratio:>8.2}", ms(t), ms(base));
    };
    println!(
        "{:<34} {:>11} {:>11} {:>8}",
        format!("f32 function, {n} elements"),
        "fn ms",
        "base ms",
        "fn/base"
    );
    let launch = |f: usize, out: &mut [f32]| {
        if binary(f) {
            map2::launch(device, grid, out, &x[..], &y[..], n as i32, f, block).unwrap();
        } else {
            map1::launch(device, grid, out, &x[..], n as i32, f, block).unwrap();
        }
    };
    let clock_before = clock_ghz();
    let exp = 0;
    let tanh_f64 = FUNCTIONS.len() - 1;
    for (f, (name, _)) in FUNCTIONS.iter().enumerate().take(tanh_f64).skip(1) {
        if wanted(name) {
            let [t, t_exp] = interleaved(
                rounds,
                [&mut || launch(f, &mut out), &mut || launch(exp, &mut base)],
            );
            print(&format!("libm f32 {name} / exp"), t, t_exp);
        }
    }
    if wanted("tanh-f64") {
        let tanh = FUNCTIONS
            .iter()
            .position(|(name, _)| *name == "tanh")
            .unwrap();
        let [t64, t32] = interleaved(
            rounds,
            [&mut || launch(tanh_f64, &mut out), &mut || {
                launch(tanh, &mut base)
            }],
        );
        print("libm tanh f64 path / f32 path", t64, t32);
    }
    if let (Some(before), Some(after)) = (clock_before, clock_ghz()) {
        println!(
            "{:<34} {before:>11.2} {after:>11.2}",
            "core clock GHz, before and after"
        );
    }
    if !wanted("geglu") {
        return;
    }
    let glu = |wide: bool, swiglu: bool, out: &mut [f32]| {
        let (x, y) = (&x[..], &y[..]);
        glu::launch(device, grid, out, x, y, n as i32, wide, swiglu, block).unwrap()
    };
    let (mut geglu, mut geglu64, mut swiglu) = (vec![0f32; n], vec![0f32; n], vec![0f32; n]);
    let [t32, t64, tsw] = interleaved(
        rounds,
        [
            &mut || glu(false, false, &mut geglu),
            &mut || glu(true, false, &mut geglu64),
            &mut || glu(false, true, &mut swiglu),
        ],
    );
    print("GeGLU fwd f64 tanh / f32 tanh", t64, t32);
    print("GeGLU fwd f32 tanh / SwiGLU", t32, tsw);
    print("GeGLU fwd f64 tanh / SwiGLU", t64, tsw);
}

mod hot {
    use tritium::prelude::*;

    /// `acc = dot(a, b, acc)` `reps` times on one `BM × BK` and one `BK × BN` tile per program,
    /// loaded once: the `dot` lowering's speed with its operands in L1/L2, the ceiling of any
    /// kernel built on it (tutorial 03 adds loading fresh tiles from memory every step).
    #[kernel]
    pub fn hot_dot(
        c: Ptr<f32>,
        a: Ptr<f32>,
        b: Ptr<f32>,
        reps: i32,
        #[constexpr] BM: usize,
        #[constexpr] BN: usize,
        #[constexpr] BK: usize,
    ) {
        let pid = program_id(0);
        let (rm, rn, rk) = (arange(0, BM), arange(0, BN), arange(0, BK));
        let ta = load(a + pid * (BM * BK) as i32 + rm[(.., None)] * BK as i32 + rk[(None, ..)]);
        let tb = load(b + pid * (BK * BN) as i32 + rk[(.., None)] * BN as i32 + rn[(None, ..)]);
        let mut acc = zeros([BM, BN], DType::F32);
        for _ in range(0, reps) {
            acc = dot(ta, tb, acc);
        }
        store(
            c + pid * (BM * BN) as i32 + rm[(.., None)] * BN as i32 + rn[(None, ..)],
            acc,
        );
    }

    /// [`hot_dot`] with the tiles loaded again at every step, from addresses that move by
    /// `step` elements (0: the same tiles, which stay in L1/L2): tutorial 03's per-step
    /// copies without its trips to memory. The row strides `lda`, `ldb` are run-time
    /// values, as tutorial 03's are, so the copies are the same code.
    #[kernel]
    pub fn warm_dot(
        c: Ptr<f32>,
        a: Ptr<f32>,
        b: Ptr<f32>,
        reps: i32,
        step: i32,
        lda: i32,
        ldb: i32,
        #[constexpr] BM: usize,
        #[constexpr] BN: usize,
        #[constexpr] BK: usize,
    ) {
        let pid = program_id(0);
        let (rm, rn, rk) = (arange(0, BM), arange(0, BN), arange(0, BK));
        let a_ptrs = a + pid * BM as i32 * lda + rm[(.., None)] * lda + rk[(None, ..)];
        let b_ptrs = b + pid * BK as i32 * ldb + rk[(.., None)] * ldb + rn[(None, ..)];
        let mut acc = zeros([BM, BN], DType::F32);
        for r in range(0, reps) {
            let ta = load(a_ptrs + r * step);
            let tb = load(b_ptrs + r * step);
            acc = dot(ta, tb, acc);
        }
        store(
            c + pid * (BM * BN) as i32 + rm[(.., None)] * BN as i32 + rn[(None, ..)],
            acc,
        );
    }
}

/// `dot-ceiling [BM BN BK]`: [`hot::hot_dot`] with tutorial 03's default blocks (or those),
/// interleaved with tutorial 03 at 1024³ and `cblas_sgemm`, as fractions of the FMA peak on
/// as many threads (measured in every round too, the best kept).
fn dot_ceiling_rows(device: &Device) {
    let threads = tritium::backend::cpu::num_threads();
    if fma_peak_gflops(threads).is_none() {
        println!("dot ceiling skipped: no AVX2 and FMA");
        return;
    }
    let mut peak = 0f64;
    let blas = OpenBlas::load().ok();
    if let Some(blas) = &blas {
        blas.set_threads(threads);
    }
    let blocks = match numeric_args("dot-ceiling [BM BN BK]", &[0, 3])[..] {
        [m, n, k] => MatmulBlocks { m, n, k },
        _ => MatmulBlocks::default(),
    };
    let MatmulBlocks {
        m: bm,
        n: bn,
        k: bk,
    } = blocks;
    let (programs, reps) = (64usize, 100i32);
    let ta = Array2::<f32>::from_elem((programs * bm, bk), 1e-3);
    let tb = Array2::<f32>::from_elem((programs * bk, bn), 2e-3);
    let mut tc = Array2::<f32>::zeros((programs * bm, bn));
    let size = 1024;
    let (a, b) = (matmul_input(size, size, 1), matmul_input(size, size, 2));
    let mut c = Array2::<f32>::zeros((size, size));
    let mut ours = Array2::<f32>::zeros((size, size));
    let mut tw = tc.clone();
    let [_, t_hot, t_warm, t_mm, t_blas] = interleaved(
        10,
        [
            &mut || peak = peak.max(fma_peak_gflops(threads).unwrap_or(0.0)),
            &mut || {
                hot::hot_dot::launch(device, programs, &mut tc, &ta, &tb, reps, bm, bn, bk).unwrap()
            },
            &mut || {
                let (lda, ldb) = (bk as i32, bn as i32);
                hot::warm_dot::launch(
                    device, programs, &mut tw, &ta, &tb, reps, 0, lda, ldb, bm, bn, bk,
                )
                .unwrap()
            },
            &mut || matmul_2d_into(device, a.view(), b.view(), ours.view_mut(), blocks).unwrap(),
            &mut || {
                if let Some(blas) = &blas {
                    blas.sgemm(a.view(), b.view(), &mut c)
                }
            },
        ],
    );
    let want = 2e-6 * (bk * reps as usize) as f32;
    assert!(
        tc.iter()
            .chain(&tw)
            .all(|x| (x - want).abs() <= 1e-3 * want),
        "hot_dot or warm_dot: wrong sums"
    );
    let hot = (programs * reps as usize * bm * bn * bk * 2) as f64 / t_hot.as_secs_f64() / 1e9;
    let mm = 2.0 * (size * size * size) as f64 / 1e9;
    let lanes = fma_peak_lanes().unwrap_or(0);
    println!("FMA peak on {threads} threads ({lanes}-lane vectors): {peak:.1} GFLOP/s");
    let line =
        |name: &str, g: f64| println!("{name:<44} {g:>7.1} GFLOP/s = {:.2} of peak", g / peak);
    line(&format!("dot on hot {bm}x{bk} @ {bk}x{bn} tiles"), hot);
    line(
        "the same, tiles loaded again every step",
        hot * t_hot.as_secs_f64() / t_warm.as_secs_f64(),
    );
    line(
        &format!("tutorial 03 {size}^3, {bm}x{bn}x{bk} blocks"),
        mm / t_mm.as_secs_f64(),
    );
    if let Some(blas) = &blas {
        line(
            &format!("cblas_sgemm {size}^3 ({})", blas.core()),
            mm / t_blas.as_secs_f64(),
        );
    }
}

/// The arguments after the section's name as positive numbers, as many as one of `counts`;
/// else the usage on stderr and exit status 2.
fn numeric_args(usage: &str, counts: &[usize]) -> Vec<usize> {
    let args: Vec<String> = std::env::args().skip(2).collect();
    let numbers: Option<Vec<usize>> = args
        .iter()
        .map(|a| a.parse().ok().filter(|n| *n > 0))
        .collect();
    match numbers {
        Some(n) if counts.contains(&n.len()) => n,
        _ => {
            eprintln!("usage: bench_table {usage} (positive whole numbers), not {args:?}");
            std::process::exit(2)
        }
    }
}

/// `matmul-blocks SIZE BM BN BK [ROUNDS]`: tutorial 03 at `SIZE³` f32 with the given
/// blocks (no autotuning) alternated with `cblas_sgemm`, for trying one config.
fn matmul_blocks_row(device: &Device) {
    let usage = "matmul-blocks SIZE BM BN BK [ROUNDS]";
    let args = numeric_args(usage, &[4, 5]);
    let [size, bm, bn, bk] = args[..4] else {
        unreachable!("numeric_args checked the count")
    };
    let rounds = args.get(4).copied().unwrap_or(5);
    let blas = match OpenBlas::load() {
        Ok(blas) => blas,
        Err(e) => {
            eprintln!("bench_table {usage}: {e}");
            std::process::exit(1)
        }
    };
    blas.set_threads(tritium::backend::cpu::num_threads());
    let blocks = MatmulBlocks {
        m: bm,
        n: bn,
        k: bk,
    };
    matmul_against_openblas(
        &blas,
        size,
        rounds,
        &format!("matmul {size}^3 {bm}x{bn}x{bk}"),
        |a, b, c| matmul_2d_into(device, a.view(), b.view(), c.view_mut(), blocks).unwrap(),
    );
}

/// `matmul-carried SIZE BM BN BK [ROUNDS]`: tutorial 03 at `SIZE³` f32 written as Triton
/// writes it (`matmul_carried`: pointers carried through the K loop, advanced at every
/// iteration) alternated with the same blocks computing them from the counter (`matmul`).
fn matmul_carried_row(device: &Device) {
    let usage = "matmul-carried SIZE BM BN BK [ROUNDS]";
    let args = numeric_args(usage, &[4, 5]);
    let [size, bm, bn, bk] = args[..4] else {
        unreachable!("numeric_args checked the count")
    };
    let rounds = args.get(4).copied().unwrap_or(5);
    let blocks = MatmulBlocks {
        m: bm,
        n: bn,
        k: bk,
    };
    let (a, b) = (matmul_input(size, size, 1), matmul_input(size, size, 2));
    let (mut c, mut carried) = (
        Array2::<f32>::zeros((size, size)),
        Array2::<f32>::zeros((size, size)),
    );
    let [t_counter, t_carried] = interleaved(
        rounds,
        [
            &mut || matmul_2d_into(device, a.view(), b.view(), c.view_mut(), blocks).unwrap(),
            &mut || {
                matmul_carried_2d_into(device, a.view(), b.view(), carried.view_mut(), blocks)
                    .unwrap()
            },
        ],
    );
    assert_eq!(c, carried, "the two forms compute the same products");
    let ms = |t: std::time::Duration| t.as_secs_f64() * 1e3;
    println!(
        "matmul {size}^3 {bm}x{bn}x{bk}: pointers from the counter {:.2} ms, carried {:.2} ms \
         ({:.2}x)",
        ms(t_counter),
        ms(t_carried),
        t_carried.as_secs_f64() / t_counter.as_secs_f64()
    );
}

/// The matmul rows' inputs: `r × c` values in [-0.5, 0.5), varied by `salt`.
fn matmul_input(r: usize, c: usize, salt: usize) -> Array2<f32> {
    Array2::from_shape_fn((r, c), |(i, j)| {
        ((i * 7 + j * 3 + salt) % 17) as f32 / 17.0 - 0.5
    })
}

/// `ours` (`c = a @ b` into an output allocated once, as `cblas_sgemm` writes its `c`)
/// alternated with `cblas_sgemm` at `size³` over `rounds`; checks that they agree and
/// prints the row `name` and both throughputs. Returns Tritium's GFLOP/s.
fn matmul_against_openblas(
    blas: &OpenBlas,
    size: usize,
    rounds: usize,
    name: &str,
    mut ours: impl FnMut(&Array2<f32>, &Array2<f32>, &mut Array2<f32>),
) -> f64 {
    let (a, b) = (matmul_input(size, size, 1), matmul_input(size, size, 2));
    let mut c = Array2::<f32>::zeros((size, size));
    let mut mine = Array2::<f32>::zeros((size, size));
    let [t_mm, t_blas] = interleaved(
        rounds,
        [&mut || ours(&a, &b, &mut mine), &mut || {
            blas.sgemm(a.view(), b.view(), &mut c)
        }],
    );
    let worst = (&mine - &c).iter().fold(0f32, |m, d| m.max(d.abs()));
    assert!(
        worst < 1e-2 * size as f32,
        "{name}: differs from OpenBLAS by {worst}"
    );
    let flops = 2.0 * (size * size * size) as f64;
    let gflops = flops / t_mm.as_secs_f64() / 1e9;
    row(name, t_mm, t_blas, 0.0);
    println!(
        "{:<34} {:>11.1} GFLOP/s; OpenBLAS {:.1} GFLOP/s",
        "  matmul throughput",
        gflops,
        flops / t_blas.as_secs_f64() / 1e9
    );
    gflops
}

/// Tutorial 03's matmul (autotuned blocks) against OpenBLAS's `cblas_sgemm` on as many
/// threads, f32 at 1024³, 4096³ and an odd 1000³; f16 and bf16 inputs (f32 accumulation)
/// against the f32 kernel's GFLOP/s. Returns the f32 GFLOP/s at 1024³ (`None` without
/// OpenBLAS).
fn matmul_rows(device: &Device) -> Option<f64> {
    use half::{bf16, f16};
    use tritium_kernels::matmul::matmul_into;
    let blas = match OpenBlas::load() {
        Ok(b) => b,
        Err(e) => {
            println!("matmul rows skipped: {e}");
            return None;
        }
    };
    blas.set_threads(tritium::backend::cpu::num_threads());
    println!("OpenBLAS core: {}", blas.core());
    let mut f32_gflops = 0.0;
    for (size, rounds) in [(1024usize, 10), (1000, 10), (4096, 2)] {
        let gflops = matmul_against_openblas(
            &blas,
            size,
            rounds,
            &format!("matmul {size}^3 f32 (OpenBLAS)"),
            |a, b, c| matmul_into(device, a.view(), b.view(), c.view_mut()).unwrap(),
        );
        if size == 1024 {
            f32_gflops = gflops;
        }
    }
    // Narrow inputs, f32 accumulation: their GFLOP/s over the f32 kernel's at 1024³.
    let size = 1024;
    let flops = 2.0 * (size * size * size) as f64;
    let (a, b) = (matmul_input(size, size, 1), matmul_input(size, size, 2));
    let (ah, bh) = (a.mapv(f16::from_f32), b.mapv(f16::from_f32));
    let (ab, bb) = (a.mapv(bf16::from_f32), b.mapv(bf16::from_f32));
    let (mut ch, mut cb) = (
        Array2::<f32>::zeros((size, size)),
        Array2::<f32>::zeros((size, size)),
    );
    let [t_h, t_b] = interleaved(
        5,
        [
            &mut || matmul_into(device, ah.view(), bh.view(), ch.view_mut()).unwrap(),
            &mut || matmul_into(device, ab.view(), bb.view(), cb.view_mut()).unwrap(),
        ],
    );
    for (name, t) in [("f16", t_h), ("bf16", t_b)] {
        let g = flops / t.as_secs_f64() / 1e9;
        println!(
            "{:<34} {:>11.3} ms {:>7.1} GFLOP/s = {:.2} of f32's",
            format!("matmul 1024^3 {name} in, f32 acc"),
            ms(t),
            g,
            g / f32_gflops
        );
    }
    Some(f32_gflops)
}

/// Tutorial 06's fused attention forward against an unfused implementation a user would
/// write (S = QKᵀ and O = PV with OpenBLAS, the scaled, masked row softmax with ndarray;
/// bf16 inputs converted to f32 first), per sequence length, head dim, causality and
/// dtype; GFLOP/s (4·N²·D per head, half of it when causal) against the matmul row's.
fn attention_rows(device: &Device, matmul_gflops: Option<f64>) {
    use half::bf16;
    use ndarray::{s, Array4};
    let blas = match OpenBlas::load() {
        Ok(b) => b,
        Err(e) => {
            println!("attention rows skipped: {e}");
            return;
        }
    };
    blas.set_threads(tritium::backend::cpu::num_threads());
    let unfused = |q: &Array4<f32>, k: &Array4<f32>, v: &Array4<f32>, causal: bool| {
        let (_, heads, n, d) = q.dim();
        let scale = 1.0 / (d as f32).sqrt();
        let mut s = Array2::<f32>::zeros((n, n));
        let mut o = Array2::<f32>::zeros((n, d));
        for h in 0..heads {
            let (qh, kh, vh) = (
                q.slice(s![0, h, .., ..]),
                k.slice(s![0, h, .., ..]),
                v.slice(s![0, h, .., ..]),
            );
            blas.sgemm(qh, kh.t(), &mut s);
            for (i, mut r) in s.rows_mut().into_iter().enumerate() {
                if causal {
                    r.slice_mut(s![i + 1..]).fill(f32::NEG_INFINITY);
                }
                let m = r.fold(f32::NEG_INFINITY, |a, &b| a.max(b)) * scale;
                r.mapv_inplace(|x| (x * scale - m).exp());
                let total = r.sum();
                r /= total;
            }
            blas.sgemm(s.view(), vh, &mut o);
        }
    };
    let data = |shape: (usize, usize, usize, usize), seed: usize| {
        Array4::from_shape_fn(shape, |(_, h, i, j)| {
            ((h * 131 + i * 31 + j * 7 + seed) % 29) as f32 / 29.0 - 0.5
        })
    };
    println!(
        "{:<34} {:>11} {:>11} {:>8} {:>9} {:>8}",
        "attention (unfused OpenBLAS)", "tritium ms", "base ms", "ratio", "GFLOP/s", "/matmul"
    );
    // (dtype is bf16, sequence length, head dim, heads)
    let cases = [
        (false, 1024, 64, 8),
        (false, 1024, 128, 8),
        (false, 4096, 64, 2),
        (false, 4096, 128, 2),
        (false, 8192, 64, 1),
        (false, 8192, 128, 1),
        (true, 1024, 64, 8),
        (true, 4096, 128, 2),
    ];
    for (half_inputs, n, d, heads) in cases {
        for causal in [false, true] {
            if half_inputs && causal {
                continue;
            }
            let shape = (1, heads, n, d);
            let (q, k, v) = (data(shape, 1), data(shape, 2), data(shape, 3));
            let scale = 1.0 / (d as f32).sqrt();
            let config = AttentionConfig {
                causal,
                ..AttentionConfig::for_head_dim(d)
            };
            let rounds = if n >= 4096 { 3 } else { 8 };
            let [t_fused, t_unfused] = if half_inputs {
                let (qb, kb, vb) = (
                    q.mapv(bf16::from_f32),
                    k.mapv(bf16::from_f32),
                    v.mapv(bf16::from_f32),
                );
                interleaved(
                    rounds,
                    [
                        &mut || {
                            attention(device, qb.view(), kb.view(), vb.view(), scale, config)
                                .unwrap();
                        },
                        &mut || {
                            let f = |x: &Array4<bf16>| x.mapv(f32::from);
                            unfused(&f(&qb), &f(&kb), &f(&vb), causal)
                        },
                    ],
                )
            } else {
                interleaved(
                    rounds,
                    [
                        &mut || {
                            attention(device, q.view(), k.view(), v.view(), scale, config).unwrap();
                        },
                        &mut || unfused(&q, &k, &v, causal),
                    ],
                )
            };
            let flops = 4.0 * (heads * n * n * d) as f64 * if causal { 0.5 } else { 1.0 };
            let gflops = flops / t_fused.as_secs_f64() / 1e9;
            println!(
                "{:<34} {:>11.3} {:>11.3} {:>8.2} {:>9.1} {:>8}",
                format!(
                    "{} N={n} D={d} H={heads}{}",
                    if half_inputs { "bf16" } else { "f32" },
                    if causal { " causal" } else { "" }
                ),
                ms(t_fused),
                ms(t_unfused),
                t_unfused.as_secs_f64() / t_fused.as_secs_f64(),
                gflops,
                matmul_gflops.map_or("-".to_string(), |m| format!("{:.2}", gflops / m))
            );
        }
    }
}
