//! The compiled CPU backend on kernels traced with the tracing API directly.

use ndarray::Array1;
use tritium_backend::{launch, Device, KernelArgs, KernelKey, LaunchOptions};
use tritium_dsl::ir::{CmpPred, Function};
use tritium_dsl::trace::lang::*;
use tritium_dsl::trace::{ptr_param, scalar_param, Specialization, Tracer};
use tritium_dsl::DType;

fn vadd(spec: &Specialization, block: usize) -> tritium_dsl::Result<Function> {
    let t = Tracer::begin("vadd")?;
    let out = ptr_param("out", DType::F32);
    let a = ptr_param("a", DType::F32);
    let b = ptr_param("b", DType::F32);
    let n = scalar_param("n", DType::I32, 3, spec);
    let offs = program_id(0) * block + arange(0, block);
    let mask = compare(offs, CmpPred::Lt, n);
    let x = load(a + offs, mask, NoArg);
    let y = load(b + offs, mask, NoArg);
    store(out + offs, x + y, mask);
    t.finish()
}

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
        vadd(s, block)
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
