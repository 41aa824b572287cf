//! candle's CUDA tensors as kernel arguments (the `cuda` feature; run where a GPU is
//! present, reported as skipped elsewhere): read where they lie from their layout's
//! offset, the launch queued on candle's stream or ordered with it from another.

use candle_core::{Device, Tensor};
use tritium::backend::cuda::Stream;
use tritium_kernels::vector_add::add;

/// candle's CUDA device 0 and Tritium's, or `None` (the test is skipped) without a GPU.
fn gpus(test: &str) -> Option<(Device, tritium::Device)> {
    match (Device::new_cuda(0), tritium::Device::cuda(0)) {
        (Ok(c), Ok(t)) => Some((c, t)),
        (c, t) => {
            eprintln!(
                "skipped {test}: no GPU ({})",
                c.err()
                    .map_or_else(|| t.unwrap_err().to_string(), |e| e.to_string())
            );
            None
        }
    }
}

#[test]
fn candle_cuda_tensors_are_kernel_arguments_where_they_lie() {
    let Some((dev, gpu)) = gpus("candle_cuda_tensors_are_kernel_arguments_where_they_lie") else {
        return;
    };
    let x = Tensor::arange(0f32, 100.0, &dev).unwrap();
    let y = Tensor::full(0.5f32, 100, &dev).unwrap();
    // Windows: the layout's offset is where the kernel's pointer starts.
    let (xw, yw) = (x.narrow(0, 30, 40).unwrap(), y.narrow(0, 10, 40).unwrap());
    let want: Vec<f32> = (30..70).map(|i| i as f32 + 0.5).collect();
    let cuda = dev.as_cuda_device().unwrap();
    let candle_stream = cuda.cuda_stream();
    // The output in memory candle's stream allocated; the launch on Tritium's default
    // stream, ordered with candle's.
    let mut out = candle_stream.alloc_zeros::<f32>(40).unwrap();
    add::launch(&gpu, 1, &mut out, &xw, &yw, 40, 64).unwrap();
    assert_eq!(candle_stream.clone_dtoh(&out).unwrap(), want);
    // Queued on candle's stream itself.
    let options = tritium::LaunchOptions {
        stream: Some(Stream::from_cuda_stream(candle_stream.clone()).unwrap()),
        ..Default::default()
    };
    let mut on_candle = candle_stream.alloc_zeros::<f32>(40).unwrap();
    add::launch_with(&gpu, 1, &options, &mut on_candle, &xw, &yw, 40, 64).unwrap();
    assert_eq!(candle_stream.clone_dtoh(&on_candle).unwrap(), want);
    // A launch past the window's end is an error, not a read of the tensor past it.
    let mut long = candle_stream.alloc_zeros::<f32>(64).unwrap();
    let e = add::launch(&gpu, 1, &mut long, &xw, &yw, 64, 64).unwrap_err();
    assert!(e.to_string().contains("out-of-bounds"), "{e}");
    // A CPU tensor beside them is staged, as a host array is.
    let cpu = xw.to_device(&Device::Cpu).unwrap();
    add::launch(&gpu, 1, &mut out, &cpu, &yw, 40, 64).unwrap();
    assert_eq!(candle_stream.clone_dtoh(&out).unwrap(), want);
}

/// A kernel op on CUDA tensors (`cuda_fwd`): SwiGLU forward and both gradients against
/// candle's own CUDA ops and autograd, f32 and bf16, one operand a transposed view (read
/// through a row-major copy on the device), the other where it lies.
#[test]
fn kernel_ops_run_on_candle_cuda_tensors_forward_and_backward() {
    let Some((dev, _gpu)) = gpus("kernel_ops_run_on_candle_cuda_tensors_forward_and_backward")
    else {
        return;
    };
    use candle_core::{DType, Var};
    for (dtype, tol) in [(DType::F32, 1e-5f32), (DType::BF16, 2e-2)] {
        let on_gpu = |t: Tensor| t.to_dtype(dtype).unwrap().to_device(&dev).unwrap();
        let gate = Var::from_tensor(&on_gpu(super::randn(&[6, 33, 40], 21))).unwrap();
        let up = Var::from_tensor(&on_gpu(super::randn(&[6, 40, 33], 22))).unwrap();
        let g = on_gpu(super::randn(&[6, 33, 40], 23));
        let up_t = up.as_tensor().transpose(1, 2).unwrap();
        let ours = tritium_candle::swiglu(gate.as_tensor(), &up_t).unwrap();
        assert!(ours.device().is_cuda(), "the result stays on the GPU");
        let theirs = (candle_nn::ops::silu(gate.as_tensor()).unwrap() * &up_t).unwrap();
        let d = super::max_diff(&ours, &theirs);
        assert!(
            d <= tol * super::magnitude(&theirs),
            "{dtype:?} forward: {d}"
        );
        let grads = |y: Tensor| {
            let store = (y * &g).unwrap().sum_all().unwrap().backward().unwrap();
            let get = |v: &Var| store.get(v.as_tensor()).unwrap().clone();
            (get(&gate), get(&up))
        };
        let ((dg, du), (dg_ref, du_ref)) = (grads(ours), grads(theirs));
        for (what, a, b) in [("dgate", &dg, &dg_ref), ("dup", &du, &du_ref)] {
            let d = super::max_diff(a, b);
            assert!(
                d <= 4.0 * tol * super::magnitude(b),
                "{dtype:?} {what}: {d}"
            );
        }
    }
}

/// Softmax over the last dim on CUDA tensors (`cuda_fwd` of the op and of its gradient)
/// against candle-nn's softmax on the GPU and autograd, f32 and bf16.
#[test]
fn softmax_runs_on_candle_cuda_tensors_forward_and_backward() {
    let Some((dev, _gpu)) = gpus("softmax_runs_on_candle_cuda_tensors_forward_and_backward") else {
        return;
    };
    use candle_core::{DType, Var};
    for (dtype, tol) in [(DType::F32, 1e-5f32), (DType::BF16, 2e-2)] {
        let on_gpu = |t: Tensor| t.to_dtype(dtype).unwrap().to_device(&dev).unwrap();
        let x = Var::from_tensor(&on_gpu(super::randn(&[4, 9, 300], 41))).unwrap();
        let g = on_gpu(super::randn(&[4, 9, 300], 42));
        let ours = tritium_candle::softmax_last_dim(x.as_tensor()).unwrap();
        assert!(ours.device().is_cuda(), "the result stays on the GPU");
        // candle-nn's softmax of tensor ops (its fused `softmax_last_dim` needs candle-nn's
        // own `cuda` feature).
        let theirs = candle_nn::ops::softmax(x.as_tensor(), candle_core::D::Minus1).unwrap();
        let d = super::max_diff(&ours, &theirs);
        assert!(d <= tol, "{dtype:?} forward: {d}");
        let grad = |y: Tensor| {
            let store = (y * &g).unwrap().sum_all().unwrap().backward().unwrap();
            store.get(x.as_tensor()).unwrap().clone()
        };
        let (dx, dx_ref) = (grad(ours), grad(theirs));
        let d = super::max_diff(&dx, &dx_ref);
        assert!(
            d <= 4.0 * tol * super::magnitude(&dx_ref),
            "{dtype:?} dx: {d}"
        );
    }
}

/// Every fused op on CUDA tensors (`cuda_fwd`, forward and backward; scratch and outputs
/// allocated on candle's stream, a transposed view read through its strides, i64 targets
/// with ignored rows) gives Tritium's CPU results, and its results stay on the GPU.
#[test]
fn fused_ops_run_on_candle_cuda_tensors_as_on_the_cpu() {
    let Some((dev, _gpu)) = gpus("fused_ops_run_on_candle_cuda_tensors_as_on_the_cpu") else {
        return;
    };
    for (op, _, run) in super::host_device::cases() {
        let cpu = run(&Device::Cpu);
        let gpu = run(&dev);
        for (k, (a, b)) in cpu.iter().zip(&gpu).enumerate() {
            assert!(b.device().is_cuda(), "{op} output {k} stays on the GPU");
            assert_eq!(a.dims(), b.dims(), "{op} output {k}");
            let d = super::max_diff(a, &b.to_device(&Device::Cpu).unwrap());
            assert!(d <= 1e-5 * super::magnitude(a), "{op} output {k}: {d}");
        }
    }
}

/// The Llama decoder with its weights, caches and every launch on the GPU
/// (`Llama::to_device`): prefill and decode logits, and greedy generation, as on the CPU.
#[test]
fn llama_runs_on_candle_cuda_tensors_as_on_the_cpu() {
    let Some((dev, _gpu)) = gpus("llama_runs_on_candle_cuda_tensors_as_on_the_cpu") else {
        return;
    };
    use super::llama::{rel_diff, tiny, tokens_below};
    use tritium_candle::llama::{kernels::Sampling, weights, Llama};
    let cfg = tiny();
    let cpu = Llama::new(cfg.clone(), &weights::random(&cfg, 7).unwrap()).unwrap();
    let gpu = cpu.clone().to_device(&dev).unwrap();
    assert!(gpu.device().is_cuda());
    let (mut a, mut b) = (cpu.cache(2).unwrap(), gpu.cache(2).unwrap());
    // A prefill of 9 tokens (blocked matmul), then two decode steps (matvec).
    for (t, seed) in [(9, 1), (1, 2), (1, 3)] {
        let x = tokens_below(cfg.vocab, 2, t, seed);
        let want = cpu.forward_last(&x, &mut a).unwrap();
        let got = gpu.forward_last(&x, &mut b).unwrap();
        assert!(got.device().is_cuda(), "logits stay on the GPU");
        let d = rel_diff(&got.to_device(&Device::Cpu).unwrap(), &want);
        assert!(d < 1e-4, "t = {t}: {d}");
    }
    // A cache of the other device is an error, not a launch on memory of the wrong kind.
    let x = tokens_below(cfg.vocab, 2, 1, 5);
    let e = cpu
        .forward_last(&x, &mut gpu.cache(2).unwrap())
        .unwrap_err();
    assert!(e.to_string().contains("a cache made on"), "{e}");
    let prompt = tokens_below(cfg.vocab, 1, 6, 4);
    let want = cpu.generate(&prompt, 5, Sampling::Greedy).unwrap();
    let got = gpu.generate(&prompt, 5, Sampling::Greedy).unwrap();
    assert_eq!(
        got.to_vec2::<u32>().unwrap(),
        want.to_vec2::<u32>().unwrap()
    );
}
