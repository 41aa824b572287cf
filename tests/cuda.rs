//! The CUDA backend. PTX generation runs everywhere (no GPU or CUDA toolkit needed);
//! launches run only where a GPU is present and are reported as skipped otherwise.

use crate::common::{assert_close, cuda_device, random_f32};
use ndarray::{Array1, Array2};
use rstest::rstest;
use tritium::backend::cuda::{compile_ptx, unavailable_reason, CudaCompileOptions, CudaTensor};
use tritium::dsl::ir::Function;
use tritium::dsl::trace::Specialization;
use tritium::Device;
use tritium_kernels::custom_add::{self, AddOp};
use tritium_kernels::{layer_norm, matmul, misc, softmax, vector_add};

/// Every kernel of `tritium-kernels`, traced for one specialization.
fn kernels() -> Vec<Function> {
    let s = Specialization::default();
    vec![
        vector_add::add::trace::<f32>(&s, 1024).unwrap(),
        vector_add::add::trace::<half::f16>(&s, 1024).unwrap(),
        vector_add::add::trace::<i32>(&s, 256).unwrap(),
        softmax::softmax::trace::<f32>(&s, 1024).unwrap(),
        softmax::softmax::trace::<half::f16>(&s, 128).unwrap(),
        matmul::matmul::trace::<f32, f32>(&s, 64, 64, 32).unwrap(),
        matmul::matmul::trace::<half::f16, f32>(&s, 64, 64, 32).unwrap(),
        layer_norm::layer_norm_fwd::trace::<f32>(&s, 1024).unwrap(),
        layer_norm::layer_norm_bwd_dx::trace::<f32>(&s, 1024).unwrap(),
        layer_norm::layer_norm_bwd_dwdb::trace::<f32>(&s, 32, 64).unwrap(),
        misc::histogram::trace(&s, 256).unwrap(),
        misc::row_stats::trace(&s, 256).unwrap(),
        misc::collatz::trace(&s, 128).unwrap(),
        custom_add::custom_add::trace::<f32>(&s, 1000, AddOp::Simd).unwrap(),
        custom_add::custom_add::trace::<half::f16>(&s, 1024, AddOp::Simt).unwrap(),
        custom_add::custom_add::trace::<i32>(&s, 32, AddOp::MixSimt).unwrap(),
        custom_add::custom_add::trace::<f32>(&s, 32, AddOp::MixSimd).unwrap(),
        custom_add::custom_divmod::trace(&s, 100, true).unwrap(),
        custom_add::custom_divmod::trace(&s, 100, false).unwrap(),
        custom_add::custom_scale::trace::<f32>(&s, 8, 16, true).unwrap(),
        custom_add::custom_add_blocked::trace::<f32>(&s, 256, AddOp::Simt).unwrap(),
    ]
}

fn ptx(f: &Function, sm: u32, num_warps: u32) -> String {
    compile_ptx(f, "k", &CudaCompileOptions { sm, num_warps })
        .unwrap_or_else(|e| panic!("{} for sm_{sm}: {e}", f.name))
        .text
}

#[rstest]
fn every_kernel_compiles_to_ptx(#[values(80, 90)] sm: u32) {
    for f in kernels() {
        let text = ptx(&f, sm, 4);
        for want in [
            ".entry k(".to_string(),
            format!(".target sm_{sm}"),
            ".maxntid 128, 1, 1".to_string(),
        ] {
            assert!(text.contains(&want), "{}: no `{want}` in\n{text}", f.name);
        }
    }
}

#[test]
fn num_warps_sets_the_cta_size() {
    let f = vector_add::add::trace::<f32>(&Specialization::default(), 1024).unwrap();
    assert!(ptx(&f, 80, 8).contains(".maxntid 256, 1, 1"));
    let e = compile_ptx(
        &f,
        "k",
        &CudaCompileOptions {
            sm: 80,
            num_warps: 0,
        },
    )
    .unwrap_err();
    assert!(e.to_string().contains("num_warps is 0"), "{e}");
}

#[test]
fn unsupported_architecture_is_an_error() {
    let f = vector_add::add::trace::<f32>(&Specialization::default(), 1024).unwrap();
    let e = compile_ptx(
        &f,
        "k",
        &CudaCompileOptions {
            sm: 70,
            num_warps: 4,
        },
    )
    .unwrap_err();
    assert!(e.to_string().contains("sm_70 is not supported"), "{e}");
}

#[test]
fn vector_add_loads_and_stores_four_floats_at_a_time() {
    let f = vector_add::add::trace::<f32>(&Specialization::default(), 1024).unwrap();
    let text = ptx(&f, 80, 4);
    assert!(text.contains("ld.global.v4.f32"), "{text}");
    assert!(text.contains("st.global.v4.f32"), "{text}");
}

#[rstest]
fn f16_and_bf16_dot_use_tensor_cores(#[values(80, 90)] sm: u32) {
    let s = Specialization::default();
    let f16 = matmul::matmul::trace::<half::f16, f32>(&s, 64, 64, 32).unwrap();
    let text = ptx(&f16, sm, 4);
    assert!(
        text.contains("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"),
        "{text}"
    );
    let bf16 = matmul::matmul::trace::<half::bf16, f32>(&s, 32, 32, 16).unwrap();
    let text = ptx(&bf16, sm, 4);
    assert!(
        text.contains("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"),
        "{text}"
    );
    // f32 inputs take the fallback.
    let f32 = matmul::matmul::trace::<f32, f32>(&s, 64, 64, 32).unwrap();
    assert!(!ptx(&f32, sm, 4).contains("mma.sync"));
}

#[test]
fn softmax_reduces_with_warp_shuffles() {
    let f = softmax::softmax::trace::<f32>(&Specialization::default(), 1024).unwrap();
    let text = ptx(&f, 90, 4);
    assert!(text.contains("shfl.sync.bfly"), "{text}");
    assert!(text.contains("bar.sync"), "{text}");
}

#[test]
fn oversized_tiles_are_an_error_not_a_panic() {
    let f = vector_add::add::trace::<f32>(&Specialization::default(), 1 << 16).unwrap();
    let e = compile_ptx(
        &f,
        "k",
        &CudaCompileOptions {
            sm: 80,
            num_warps: 1,
        },
    )
    .unwrap_err();
    assert!(e.to_string().contains("raise num_warps"), "{e}");
}

#[test]
fn ptx_is_dumped_and_cached_on_disk() {
    use tritium::backend::cuda::compile_cached;
    let dir = std::env::temp_dir().join(format!("tritium-cuda-cache-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let (cache, dump) = (dir.join("cache"), dir.join("dump"));
    let s = Specialization::default();
    let f = || softmax::softmax::trace::<f32>(&s, 256).unwrap();
    let copts = CudaCompileOptions {
        sm: 90,
        num_warps: 2,
    };
    let dumping = tritium::LaunchOptions {
        cache_dir: Some(cache.clone()),
        dump_dir: Some(dump.clone()),
        ..Default::default()
    };
    let first = compile_cached(f(), &copts, &dumping).unwrap();
    for ext in ["tir", "ll", "opt.ll", "ptx"] {
        let path = dump.join(format!("{}.{ext}", first.entry));
        assert!(path.exists(), "no {}", path.display());
    }
    let ptx_dump = std::fs::read_to_string(dump.join(format!("{}.ptx", first.entry))).unwrap();
    assert_eq!(ptx_dump, first.text);
    let entries = std::fs::read_dir(&cache).unwrap().count();
    assert!(entries > 0, "the PTX was not cached");
    // From the cache: the same PTX; a damaged entry is recompiled, never trusted.
    let cached = tritium::LaunchOptions {
        cache_dir: Some(cache.clone()),
        ..Default::default()
    };
    assert_eq!(compile_cached(f(), &copts, &cached).unwrap(), first);
    for e in walk(&cache) {
        let mut bytes = std::fs::read(&e).unwrap();
        let mid = bytes.len() / 2;
        bytes[mid] ^= 0xff;
        std::fs::write(&e, bytes).unwrap();
    }
    assert_eq!(compile_cached(f(), &copts, &cached).unwrap(), first);
    let _ = std::fs::remove_dir_all(&dir);
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

#[test]
fn cuda_without_a_gpu_is_an_error() {
    let Some(reason) = unavailable_reason() else {
        eprintln!("skipped cuda_without_a_gpu_is_an_error: a CUDA device is present");
        return;
    };
    let e = Device::cuda(0).unwrap_err();
    assert!(e.to_string().contains(&reason), "{e}");
    assert!(e.to_string().contains("CUDA device 0"), "{e}");
}

#[rstest]
fn vector_add_on_cuda(#[values(1, 7, 1024, 1000003)] n: usize) {
    let Some(gpu) = cuda_device("vector_add_on_cuda") else {
        return;
    };
    let x = Array1::from(random_f32(n, 1));
    let y = Array1::from(random_f32(n, 2));
    let got = vector_add::vector_add(&gpu, x.view(), y.view()).unwrap();
    assert_eq!(got, &x + &y);
}

#[test]
fn device_tensors_round_trip_and_launch() {
    let Some(gpu) = cuda_device("device_tensors_round_trip_and_launch") else {
        return;
    };
    let n = 5000;
    let x = Array1::from(random_f32(n, 3));
    let y = Array1::from(random_f32(n, 4));
    let (dx, dy) = (
        CudaTensor::from_ndarray(&gpu, &x).unwrap(),
        CudaTensor::from_ndarray(&gpu, &y).unwrap(),
    );
    let mut out = CudaTensor::<f32>::zeros(&gpu, &[n]).unwrap();
    vector_add::add::launch(&gpu, n.div_ceil(1024), &mut out, &dx, &dy, n as i32, 1024).unwrap();
    let got = out.to_ndarray().unwrap();
    assert_eq!(got.into_dimensionality().unwrap(), &x + &y);
    // A device tensor passed to the CPU is an error.
    let mut host = Array1::<f32>::zeros(n);
    let e = vector_add::add::launch(&Device::cpu(), 1, &mut host, &dx, &dy, n as i32, 1024)
        .unwrap_err();
    assert!(e.to_string().contains("CUDA device"), "{e}");
}

#[rstest]
fn softmax_on_cuda(#[values((1, 1), (17, 33), (256, 781))] shape: (usize, usize)) {
    let Some(gpu) = cuda_device("softmax_on_cuda") else {
        return;
    };
    let x = Array2::from_shape_vec(shape, random_f32(shape.0 * shape.1, 5)).unwrap() * 4.0;
    let got = softmax::softmax_rows(&gpu, x.view()).unwrap();
    let want = softmax::softmax_rows(&Device::interpreter(), x.view()).unwrap();
    assert_close(&got, &want, 1e-5, 1e-6, "cuda vs interpreter");
}

#[rstest]
fn matmul_on_cuda(#[values((1, 1, 1), (65, 33, 70), (128, 256, 64))] mkn: (usize, usize, usize)) {
    let Some(gpu) = cuda_device("matmul_on_cuda") else {
        return;
    };
    let (m, k, n) = mkn;
    let a = Array2::from_shape_vec((m, k), random_f32(m * k, 7)).unwrap();
    let b = Array2::from_shape_vec((k, n), random_f32(k * n, 8)).unwrap();
    let blocks = matmul::MatmulBlocks::default();
    let got: Array2<f32> = matmul::matmul_2d(&gpu, a.view(), b.view(), blocks).unwrap();
    let want: Array2<f32> =
        matmul::matmul_2d(&Device::interpreter(), a.view(), b.view(), blocks).unwrap();
    assert_close(&got, &want, 1e-4, 1e-4, "cuda vs interpreter");
}

// The CUDA lowering executed by the emulator (host threads), against the interpreter.

#[rstest]
fn vector_add_emulated(#[values(1, 7, 1024, 5000)] n: usize, #[values(1, 4)] num_warps: u32) {
    let emu = Device::cuda_emulator();
    let x = Array1::from(random_f32(n, 1));
    let y = Array1::from(random_f32(n, 2));
    let mut got = Array1::<f32>::zeros(n);
    let opts = tritium::LaunchOptions {
        num_warps,
        ..Default::default()
    };
    vector_add::add::launch_with(
        &emu,
        n.div_ceil(1024),
        &opts,
        &mut got,
        &x,
        &y,
        n as i32,
        1024,
    )
    .unwrap();
    assert_eq!(got, &x + &y);
}

#[rstest]
fn softmax_emulated(#[values((1, 1), (17, 33), (5, 781))] shape: (usize, usize)) {
    let x = Array2::from_shape_vec(shape, random_f32(shape.0 * shape.1, 5)).unwrap() * 4.0;
    let got = softmax::softmax_rows(&Device::cuda_emulator(), x.view()).unwrap();
    let want = softmax::softmax_rows(&Device::interpreter(), x.view()).unwrap();
    assert_close(&got, &want, 1e-5, 1e-6, "emulated CUDA vs interpreter");
}

#[rstest]
fn matmul_emulated(#[values((1, 1, 1), (65, 33, 70))] mkn: (usize, usize, usize)) {
    let (m, k, n) = mkn;
    let a = Array2::from_shape_vec((m, k), random_f32(m * k, 7)).unwrap();
    let b = Array2::from_shape_vec((k, n), random_f32(k * n, 8)).unwrap();
    let blocks = matmul::MatmulBlocks {
        m: 32,
        n: 32,
        k: 16,
    };
    let got: Array2<f32> =
        matmul::matmul_2d(&Device::cuda_emulator(), a.view(), b.view(), blocks).unwrap();
    let want: Array2<f32> =
        matmul::matmul_2d(&Device::interpreter(), a.view(), b.view(), blocks).unwrap();
    assert_close(&got, &want, 1e-5, 1e-5, "emulated CUDA vs interpreter");
}

#[rstest]
fn f16_softmax_and_matmul_emulated(#[values((3, 50), (16, 130))] shape: (usize, usize)) {
    use half::f16;
    let emu = Device::cuda_emulator();
    let x = (Array2::from_shape_vec(shape, random_f32(shape.0 * shape.1, 9)).unwrap() * 4.0)
        .mapv(f16::from_f32);
    let got = softmax::softmax_rows(&emu, x.view()).unwrap();
    let want = softmax::softmax_rows(&Device::interpreter(), x.view()).unwrap();
    assert_close(
        &got.mapv(f16::to_f32),
        &want.mapv(f16::to_f32),
        2e-3,
        1e-3,
        "softmax f16",
    );
    let (m, k) = shape;
    let a = x.clone();
    let b = Array2::from_shape_vec((k, m), random_f32(k * m, 10))
        .unwrap()
        .mapv(f16::from_f32);
    let blocks = matmul::MatmulBlocks {
        m: 32,
        n: 16,
        k: 32,
    };
    let got: Array2<f32> = matmul::matmul_2d(&emu, a.view(), b.view(), blocks).unwrap();
    let want: Array2<f32> =
        matmul::matmul_2d(&Device::interpreter(), a.view(), b.view(), blocks).unwrap();
    assert_close(&got, &want, 1e-4, 1e-4, "matmul f16 inputs");
}

#[rstest]
fn bf16_matmul_on_tensor_cores_emulated(
    #[values((16, 8, 16), (48, 40, 64), (33, 17, 20))] mnk: (usize, usize, usize),
    #[values(1, 4)] num_warps: u32,
) {
    use half::bf16;
    let (m, n, k) = mnk;
    let a = Array2::from_shape_vec((m, k), random_f32(m * k, 11))
        .unwrap()
        .mapv(bf16::from_f32);
    let b = Array2::from_shape_vec((k, n), random_f32(k * n, 12))
        .unwrap()
        .mapv(bf16::from_f32);
    let (bm, bn, bk) = (16, 8, 16);
    let mut got = Array2::<f32>::zeros((m, n));
    let mut want = Array2::<f32>::zeros((m, n));
    let opts = tritium::LaunchOptions {
        num_warps,
        ..Default::default()
    };
    for (d, out) in [
        (Device::cuda_emulator(), &mut got),
        (Device::interpreter(), &mut want),
    ] {
        matmul::matmul::launch_with(
            &d,
            [m.div_ceil(bm), n.div_ceil(bn)],
            &opts,
            out,
            &a,
            &b,
            m as i32,
            n as i32,
            k as i32,
            k as i32,
            1,
            n as i32,
            1,
            n as i32,
            1,
            bm,
            bn,
            bk,
        )
        .unwrap();
    }
    assert_close(&got, &want, 1e-4, 1e-4, "bf16 mma vs interpreter");
}

// Custom ops on CUDA: NVPTX bitcode is linked and inlined; host bitcode is refused.

mod custom {
    use super::ptx;
    use tritium::backend::cuda::{compile_ptx, CudaCompileOptions};
    use tritium::dsl::custom::{CustomArgs, CustomImpl};
    use tritium::dsl::ir::Bitcode;
    use tritium::dsl::trace::Specialization;
    use tritium::prelude::*;
    use tritium_kernels::custom_bitcode::{ADD_BC, ADD_NVPTX_BC};

    #[register_custom_op(core = Vector, pipe = PipeV, mode = Simt)]
    struct NvptxAdd;
    impl NvptxAdd {
        fn init(_: &CustomArgs) -> Result<CustomImpl, String> {
            Ok(CustomImpl::new("custom_add_simt_float32")
                .bitcode(Bitcode::from_bytes("add.nvptx.bc", ADD_NVPTX_BC)))
        }
    }

    #[register_custom_op(core = Vector, pipe = PipeV, mode = Simd)]
    struct NvptxAddSimd;
    impl NvptxAddSimd {
        fn init(_: &CustomArgs) -> Result<CustomImpl, String> {
            Ok(CustomImpl::new("custom_add_float32")
                .bitcode(Bitcode::from_bytes("add.nvptx.bc", ADD_NVPTX_BC)))
        }
    }

    #[register_custom_op(core = Vector, pipe = PipeV, mode = Simt)]
    struct HostAdd;
    impl HostAdd {
        fn init(_: &CustomArgs) -> Result<CustomImpl, String> {
            Ok(CustomImpl::new("custom_add_simt_float32")
                .bitcode(Bitcode::from_bytes("add.bc", ADD_BC)))
        }
    }

    #[kernel]
    fn add_with(
        out: Ptr<f32>,
        a: Ptr<f32>,
        b: Ptr<f32>,
        #[constexpr] N: usize,
        #[constexpr] op: u32,
    ) {
        let i = arange(0, N);
        let x = load(a + i);
        let y = load(b + i);
        let buf = zeros([N], DType::F32);
        let r = if op == 0 {
            custom("nvptx_add", x, y, out = buf)
        } else if op == 1 {
            custom("nvptx_add_simd", x, y, out = buf)
        } else {
            custom("host_add", x, y, out = buf)
        };
        store(out + i, r);
    }

    #[kernel]
    fn gather(out: Ptr<f32>, src: Ptr<f32>, idx: Ptr<i64>, #[constexpr] N: usize) {
        let i = arange(0, N);
        let ix = load(idx + i);
        let buf = full([N], -1.0, DType::F32);
        let g = custom("__builtin_gather_load", src, ix, 50, out = buf);
        store(out + i, g);
    }

    #[rstest::rstest]
    fn nvptx_bitcode_is_linked_and_inlined(#[values(80, 90)] sm: u32) {
        let s = Specialization::default();
        let simt = add_with::trace(&s, 256, 0).unwrap();
        let text = ptx(&simt, sm, 4);
        assert!(text.contains("add.rn.f32"), "{text}");
        assert!(
            !text.contains("call.uni"),
            "the Simt entry is inlined:\n{text}"
        );
        let simd = add_with::trace(&s, 256, 1).unwrap();
        let text = ptx(&simd, sm, 4);
        assert!(text.contains("bar.sync"), "{text}");
    }

    /// A cooperative Simd entry's thread helpers become `%tid.x`, `%ntid.x` and
    /// `bar.sync`, inlined into the kernel.
    #[rstest::rstest]
    fn cooperative_simd_is_called_by_every_thread(#[values(80, 90)] sm: u32) {
        let s = Specialization::default();
        let f = tritium_kernels::custom_add::custom_add_reversed::trace::<f32>(&s, 256).unwrap();
        let text = ptx(&f, sm, 4);
        for want in ["%tid.x", "%ntid.x", "bar.sync"] {
            assert!(text.contains(want), "no `{want}` in\n{text}");
        }
        assert!(!text.contains("call.uni"), "the entry is inlined:\n{text}");
    }

    #[rstest::rstest]
    fn builtins_compile_to_ptx(#[values(80, 90)] sm: u32) {
        let f = gather::trace(&Specialization::default(), 64).unwrap();
        let text = ptx(&f, sm, 4);
        assert!(text.contains(".entry k("), "{text}");
    }

    #[test]
    fn host_bitcode_on_cuda_is_an_error() {
        let f = add_with::trace(&Specialization::default(), 256, 2).unwrap();
        let e = compile_ptx(&f, "k", &CudaCompileOptions::default()).unwrap_err();
        let m = e.to_string();
        assert!(
            m.contains("custom op `host_add`") && m.contains("nvptx64-nvidia-cuda"),
            "{m}"
        );
    }
}

/// Float atomics are `atomicrmw fadd/fmax/fmin`: PTX has `atom`/`red.global.add.f32`, and
/// every device (the emulator included) sums and takes extremes of contended tiles.
mod float_atomics {
    use crate::common::all_devices;
    use ndarray::Array1;
    use tritium::backend::cuda::{compile_ptx, CudaCompileOptions};
    use tritium::dsl::trace::Specialization;
    use tritium::prelude::*;

    /// Element `i` of `x` goes to bucket `i % 4` of `sum`, `hi` and `lo`.
    #[kernel]
    fn buckets(sum: Ptr<f32>, hi: Ptr<f32>, lo: Ptr<f32>, x: Ptr<f32>, #[constexpr] N: usize) {
        let i = arange(0, N);
        let v = load(x + i);
        let b = i % 4;
        atomic_add(sum + b, v);
        atomic_max(hi + b, v);
        atomic_min(lo + b, v);
    }

    #[rstest::rstest]
    fn ptx_uses_float_atomic_add(#[values(80, 90)] sm: u32) {
        let f = buckets::trace(&Specialization::default(), 256).unwrap();
        let text = compile_ptx(&f, "k", &CudaCompileOptions { sm, num_warps: 4 })
            .unwrap()
            .text;
        assert!(
            text.contains("atom.global.add.f32") || text.contains("red.global.add.f32"),
            "{text}"
        );
    }

    #[rstest::rstest]
    fn contended_float_atomics(#[values(4, 300)] n: usize) {
        // Halves and small integers: every order of the sums is exact.
        let x: Array1<f32> = (0..n).map(|i| (i % 37) as f32 * 0.5 - 6.0).collect();
        let mut want = ([0f32; 4], [f32::NEG_INFINITY; 4], [f32::INFINITY; 4]);
        for (i, v) in x.iter().enumerate() {
            want.0[i % 4] += v;
            want.1[i % 4] = want.1[i % 4].max(*v);
            want.2[i % 4] = want.2[i % 4].min(*v);
        }
        for device in all_devices() {
            let mut sum = Array1::<f32>::zeros(4);
            let mut hi = Array1::from_elem(4, f32::NEG_INFINITY);
            let mut lo = Array1::from_elem(4, f32::INFINITY);
            buckets::launch(&device, [1], &mut sum, &mut hi, &mut lo, &x, n).unwrap();
            let got = (sum.to_vec(), hi.to_vec(), lo.to_vec());
            let want = (want.0.to_vec(), want.1.to_vec(), want.2.to_vec());
            assert_eq!(got, want, "{device:?} n={n}");
        }
    }
}

/// `exp`, `exp2`, `log`, `log2`, `sin`, `cos` in f64 and f32: the CUDA lowering computes
/// them itself (no libdevice; `backend/src/llvm/math`, and PTX `ex2.approx` for f32 `exp2`)
/// and agrees with the CPU's libm and the interpreter within a few ulps; a GPU computes
/// exactly what the emulator does (but f32 `exp2` and `exp`).
mod math_functions {
    use crate::common::devices_for;
    use ndarray::{Array1, Array2};
    use tritium::prelude::*;

    /// Row k of `out` is function k (`exp`, `exp2`, `log`, `log2`, `sin`, `cos`) of `x`.
    #[kernel]
    fn math<T: Element>(out: Ptr<T>, x: Ptr<T>, n: i32, #[constexpr] BLOCK: usize) {
        let offs = program_id(0) * BLOCK as i32 + arange(0, BLOCK);
        let mask = offs < n;
        let v = load(x + offs, mask = mask, other = 1.0);
        store(out + offs, exp(v), mask = mask);
        store(out + n + offs, exp2(v), mask = mask);
        store(out + 2 * n + offs, log(v), mask = mask);
        store(out + 3 * n + offs, log2(v), mask = mask);
        store(out + 4 * n + offs, sin(v), mask = mask);
        store(out + 5 * n + offs, cos(v), mask = mask);
    }

    const NAMES: [&str; 6] = ["exp", "exp2", "log", "log2", "sin", "cos"];

    /// `n` inputs: moderate values of both signs, then magnitudes from 2^-1074 to 2^1023
    /// (overflowing and underflowing `exp`, huge `sin`/`cos` arguments; 0 or inf in f32),
    /// zeros, infinities and NaN.
    fn inputs(n: usize) -> Vec<f64> {
        let specials = [0.0, -0.0, f64::INFINITY, f64::NEG_INFINITY, f64::NAN, 1.0];
        let mut s = 0x2545_F491_4F6C_DD1Du64;
        (0..n)
            .map(|i| {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                let u = (s >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0;
                match i % 4 {
                    _ if i % 97 == 13 => specials[i / 97 % specials.len()],
                    0 | 1 => u * 40.0,
                    2 => u * 2f64.powi((s % 2098) as i32 - 1074),
                    _ => u * 2f64.powi((s % 60) as i32),
                }
            })
            .collect()
    }

    /// Runs `math::<T>` on every device against the interpreter: equal, both NaN, or within
    /// `rtol` relative (or `atol` absolute, for subnormal results), except where
    /// `documented(row, x)`. Where a GPU is present, the rows of `bit_equal` must match the
    /// emulator's bit for bit.
    fn agrees_across_devices<T>(
        n: usize,
        cast: fn(f64) -> T,
        rtol: f64,
        atol: f64,
        bit_equal: &[usize],
        documented: fn(usize, f64) -> bool,
    ) where
        T: Element + Copy + Default + Into<f64>,
    {
        const BLOCK: usize = 512;
        let x: Array1<T> = inputs(n).into_iter().map(cast).collect();
        let run = |d: &Device| {
            let mut out = Array2::<T>::from_elem((6, n), T::default());
            math::launch(d, n.div_ceil(BLOCK), &mut out, &x, n as i32, BLOCK).unwrap();
            out.mapv(Into::into)
        };
        let want = run(&Device::interpreter());
        let mut emulated = None;
        for d in devices_for(6 * n) {
            let got = run(&d);
            for ((k, i), &g) in got.indexed_iter() {
                let (w, xi): (f64, f64) = (want[[k, i]], x[i].into());
                let ok = g == w
                    || (g.is_nan() && w.is_nan())
                    || (g - w).abs() <= rtol * w.abs() + atol
                    || documented(k, xi);
                assert!(
                    ok,
                    "{d:?}: {}({xi:e}) = {g:e}, the interpreter's {w:e}",
                    NAMES[k]
                );
            }
            match d {
                Device::CudaEmulator => emulated = Some(got),
                Device::Cuda(_) => {
                    let Some(e) = &emulated else { continue };
                    for ((k, i), &g) in got.indexed_iter() {
                        let em = e[[k, i]];
                        let same = g.to_bits() == em.to_bits() || (g.is_nan() && em.is_nan());
                        let xi: f64 = x[i].into();
                        assert!(
                            same || !bit_equal.contains(&k),
                            "{}({xi:e}): GPU {g:e}, emulator {em:e}",
                            NAMES[k]
                        );
                    }
                }
                _ => {}
            }
        }
    }

    #[rstest::rstest]
    fn f64_math_agrees_across_devices(#[values(1, 100, 4097, 100_003)] n: usize) {
        // 4 ulps, a few subnormal steps.
        let all = [0, 1, 2, 3, 4, 5];
        agrees_across_devices::<f64>(n, |v| v, 2f64.powi(-50), 1e-320, &all, |_, _| false);
    }

    #[rstest::rstest]
    fn f32_math_agrees_across_devices(#[values(1, 100, 4097, 100_003)] n: usize) {
        // 4 ulps (`ex2.approx` is within 2), subnormal results loosely: the GPU's `exp2`
        // is an approximation there too. `exp` is contracted by each target's rules, and
        // its polynomial (CPU and CUDA) gives +inf in f32's last half binade (x > 88.38).
        agrees_across_devices::<f32>(
            n,
            |v| v as f32,
            2f64.powi(-21),
            2f64.powi(-126),
            &[2, 3, 4, 5],
            |row, x| row == 0 && x > 88.37 && x < 88.73,
        );
    }
}
