//! Custom-op benchmark (issue 3): the Simt custom add (C++ bitcode, called per element,
//! inlined and vectorized) against the same add written natively in the DSL, 2^24 f32,
//! side by side in one run; plus the per-program overhead of a Simd call.
//!
//!     cargo run --release --example bench_custom

use ndarray::Array1;
use tritium::Device;
use tritium_kernels::bench::best_of;
use tritium_kernels::custom_add::{custom_add_blocked, AddOp};
use tritium_kernels::vector_add::add;

fn main() -> tritium::Result<()> {
    let device = Device::cpu();
    let reps = 15;
    let n = 1usize << 24;
    let x = Array1::from_iter((0..n).map(|i| (i % 97) as f32));
    let y = Array1::from_iter((0..n).map(|i| (i % 13) as f32));
    let want = &x + &y;
    println!(
        "threads: {}, n = 2^24 f32",
        tritium::backend::cpu::num_threads()
    );
    println!(
        "{:<12} {:<26} {:>11} {:>11} {:>12} {:>16}",
        "block", "kernel", "native ms", "custom ms", "custom/native", "overhead/program"
    );
    for block in [1024usize, 4096] {
        let grid = n.div_ceil(block);
        let mut out = Array1::<f32>::zeros(n);
        let mut run_native =
            || add::launch(&device, grid, &mut out, &x, &y, n as i32, block).unwrap();
        run_native();
        for op in [AddOp::Simt, AddOp::Simd] {
            let mut out_c = Array1::<f32>::zeros(n);
            let mut run_custom = || {
                custom_add_blocked::launch(&device, grid, &mut out_c, &x, &y, n as i32, block, op)
                    .unwrap()
            };
            run_custom();
            // Interleave the two so both see the same machine state.
            let (mut t_native, mut t_custom) = (std::time::Duration::MAX, std::time::Duration::MAX);
            for _ in 0..3 {
                t_native = t_native.min(best_of(reps, &mut run_native));
                t_custom = t_custom.min(best_of(reps, &mut run_custom));
            }
            assert_eq!(out_c, want, "{op} result");
            let ratio = t_custom.as_secs_f64() / t_native.as_secs_f64();
            let per_program_ns = (t_custom.as_secs_f64() - t_native.as_secs_f64()) * 1e9
                / grid as f64
                * tritium::backend::cpu::num_threads() as f64;
            println!(
                "{block:<12} {:<26} {:>11.3} {:>11.3} {:>12.3} {:>13.0} ns",
                format!("{op} ({})", if op == AddOp::Simt { "Simt" } else { "Simd" }),
                t_native.as_secs_f64() * 1e3,
                t_custom.as_secs_f64() * 1e3,
                ratio,
                per_program_ns
            );
        }
        assert_eq!(out, want);
    }
    println!("custom/native ≤ 1.05 is the target for Simt; overhead/program = (custom − native) × threads / programs");
    Ok(())
}
