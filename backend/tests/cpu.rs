//! The compiled CPU backend on kernels traced with the tracing API directly.

use crate::common::vadd;
use ndarray::Array1;
use tritium_backend::{launch, Device, KernelArgs, KernelKey, LaunchOptions};

fn run_vadd(
    device: &Device,
    n: usize,
    options: &LaunchOptions,
) -> tritium_backend::Result<Array1<f32>> {
    let a = Array1::from_iter((0..n).map(|i| i as f32));
    let b = Array1::from_iter((0..n).map(|i| 2.0 * i as f32));
    let mut out = Array1::<f32>::zeros(n);
    let block = 256;
    let mut args = KernelArgs::new();
    args.ptr("out", &mut out);
    args.ptr("a", &a);
    args.ptr("b", &b);
    args.scalar("n", n as i32);
    let key = KernelKey {
        name: "vadd",
        constexprs: format!("BLOCK={block}"),
    };
    launch(device, n.div_ceil(block), options, key, args, &|s| {
        vadd("vadd", s, block)
    })?;
    Ok(out)
}

#[test]
fn vector_add_compiles_and_runs() {
    for n in [1usize, 7, 1024, 100_003] {
        let out = run_vadd(&Device::cpu(), n, &LaunchOptions::default()).unwrap();
        let want = Array1::from_iter((0..n).map(|i| 3.0 * i as f32));
        assert_eq!(out, want, "n = {n}");
    }
}
