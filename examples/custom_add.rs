//! The seed's custom op, end to end (triton-ascend `test_custom_op.py` in Rust):
//!
//! 1. C++: `kernels/csrc/add.cpp` defines `_mlir_ciface_custom_add_int32(memref_t*…)`
//!    against the shipped `custom_op.h`;
//! 2. bitcode: `kernels/build.rs` compiles it with clang 19 (`tritium-build`) and the
//!    bytes are embedded in the binary;
//! 3. registration: `#[register_custom_op(core = Vector, pipe = PipeV, mode = Simd)]
//!    struct Add` in `kernels/src/custom_add.rs` picks `custom_add_<dtype>` per call;
//! 4. kernel: `custom("add", a, b, out = buf)` inside `#[kernel] fn custom_add`;
//! 5. launch on CPU threads (and through the reference interpreter) and check.
//!
//!     scripts/dev example        # or: cargo run --release --example custom_add

use ndarray::Array1;
use std::time::Instant;
use tritium::dsl::ir::print_function;
use tritium::dsl::trace::Specialization;
use tritium::Device;
use tritium_kernels::custom_add::{custom_add, custom_add_blocked, AddOp};
use tritium_kernels::custom_bitcode::ADD_BC;
use tritium_kernels::vector_add::add;

fn main() -> tritium::Result<()> {
    println!(
        "add.cpp → add.bc: {} bytes of LLVM bitcode embedded in this binary",
        ADD_BC.len()
    );
    let l = 32;
    let f = custom_add::trace::<i32>(&Specialization::default(), l, AddOp::Simd)?;
    println!("\nthe traced kernel (IR text):\n{}", print_function(&f));

    // The seed's test: L = 32, int32, a = b = ones → out = 2.
    for device in [Device::cpu(), Device::interpreter()] {
        for l in [32usize, 1000, 1024] {
            let (a, b) = (Array1::<i32>::ones(l), Array1::<i32>::ones(l));
            let mut out = Array1::<i32>::zeros(l);
            for op in AddOp::ALL {
                custom_add::launch(&device, [1], &mut out, &a, &b, l, op)?;
                assert_eq!(out, &a + &b, "{device:?} {op} L={l}");
            }
        }
        println!(
            "test_custom passed on {device:?}: L in 32, 1000, 1024 through Simd, Simt and Mix"
        );
    }

    // 2^24 elements on CPU threads: the Simt custom add next to the native DSL add.
    let n = 1usize << 24;
    let block = 4096;
    let grid = n.div_ceil(block);
    let x = Array1::from_iter((0..n).map(|i| (i % 97) as f32));
    let y = Array1::from_iter((0..n).map(|i| (i % 13) as f32));
    let mut out = Array1::<f32>::zeros(n);
    let mut out2 = Array1::<f32>::zeros(n);
    let device = Device::cpu();
    let mut custom = || {
        custom_add_blocked::launch(
            &device,
            grid,
            &mut out,
            &x,
            &y,
            n as i32,
            block,
            AddOp::Simt,
        )
    };
    custom()?; // compile (or load from the disk cache) and warm up
    let mut native = || add::launch(&device, grid, &mut out2, &x, &y, n as i32, block);
    native()?;
    // Interleaved rounds, best of each: both see the same machine load.
    let ms = |f: &mut dyn FnMut() -> tritium::Result<()>| -> tritium::Result<f64> {
        let t = Instant::now();
        f()?;
        Ok(t.elapsed().as_secs_f64() * 1e3)
    };
    let (mut t_custom, mut t_native) = (f64::MAX, f64::MAX);
    for _ in 0..10 {
        t_custom = t_custom.min(ms(&mut custom)?);
        t_native = t_native.min(ms(&mut native)?);
    }
    assert_eq!(out, &x + &y);
    assert_eq!(out2, out);
    println!(
        "\n2^24 f32 on {} threads: custom Simt add {t_custom:.2} ms, native DSL add {t_native:.2} ms, best of 10 interleaved rounds (ratio {:.2}; `cargo run --release --example bench_custom` for the benchmark)",
        tritium::backend::cpu::num_threads(),
        t_custom / t_native
    );
    Ok(())
}
