//! The main example: Triton's tutorial 01 on CPU threads, checked against ndarray, timed
//! side by side with ndarray's fastest form (a parallel `Zip` into a preallocated output).
//!
//!     scripts/dev example        # or: cargo run --release --example vector_add

use ndarray::{Array1, Zip};
use tritium::prelude::*;
use tritium_kernels::bench::{best_of, gbps};

/// `out = x + y`, `BLOCK` elements per program.
#[kernel]
fn add(out: Ptr<f32>, x: Ptr<f32>, y: Ptr<f32>, n: i32, #[constexpr] BLOCK: usize) {
    let offs = program_id(0) * BLOCK as i32 + arange(0, BLOCK);
    let mask = offs < n;
    store(
        out + offs,
        load(x + offs, mask = mask) + load(y + offs, mask = mask),
        mask = mask,
    );
}

fn main() -> tritium::Result<()> {
    let n = 1 << 24;
    let x = Array1::from_iter((0..n).map(|i| (i % 1000) as f32));
    let y = Array1::from_iter((0..n).map(|i| (i % 7) as f32 * 0.5));
    let mut out = Array1::<f32>::zeros(n);
    let device = Device::cpu();
    let grid = cdiv(n, 4096);

    add::launch(&device, grid, &mut out, &x, &y, n as i32, 4096)?;
    let want = &x + &y;
    assert_eq!(out, want, "Tritium and ndarray disagree");
    println!(
        "vector add of {n} f32: results match ndarray (out[12345] = {})",
        out[12345]
    );

    let t_tritium = best_of(10, || {
        add::launch(&device, grid, &mut out, &x, &y, n as i32, 4096).unwrap()
    });
    let mut z = Array1::<f32>::zeros(n);
    let t_ndarray = best_of(10, || {
        Zip::from(&mut z)
            .and(&x)
            .and(&y)
            .par_for_each(|o, a, b| *o = a + b)
    });
    let bytes = 3 * 4 * n;
    println!("{:<28} {:>10} {:>10}", "", "time (ms)", "GB/s");
    println!(
        "{:<28} {:>10.3} {:>10.1}",
        "tritium add (CPU threads)",
        t_tritium.as_secs_f64() * 1e3,
        gbps(bytes, t_tritium)
    );
    println!(
        "{:<28} {:>10.3} {:>10.1}",
        "ndarray par Zip",
        t_ndarray.as_secs_f64() * 1e3,
        gbps(bytes, t_ndarray)
    );
    println!(
        "ratio tritium / ndarray time: {:.2}",
        t_tritium.as_secs_f64() / t_ndarray.as_secs_f64()
    );
    println!("threads: {}", tritium::backend::cpu::num_threads());
    Ok(())
}
