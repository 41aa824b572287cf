//! The fused ops' launches on the device [`launch_host_ops_on`] names: on the CUDA emulator
//! (the code a GPU runs, on host memory) and the interpreter every op, forward and
//! backward, gives the CPU's results. These are the launches their CUDA tensors' path (`cuda_fwd`) queues, with its
//! scratch buffers (`On::zeros`) and strided and integer inputs, checked where candle has
//! no GPU.

use crate::{magnitude, max_diff, randn};
use candle_core::{Device, Tensor, Var};
use tritium::backend::pipeline::{stats, TargetKind};
use tritium_candle::{host_ops_device, launch_host_ops_on};

/// An op's outputs and gradients for one run on tensors of a candle device, wherever the
/// ops launch.
pub type Run = Box<dyn Fn(&Device) -> Vec<Tensor>>;

/// `y`, then the gradients of `Σ y·g` (a fixed `g`) for each of `vars`.
fn with_grads(y: Tensor, vars: &[&Var]) -> Vec<Tensor> {
    let g = randn(y.dims(), 99).to_device(y.device()).unwrap();
    let grads = (&y * &g).unwrap().sum_all().unwrap().backward().unwrap();
    let mut out = vec![y];
    out.extend(
        vars.iter()
            .map(|v| grads.get(v).expect("a gradient").clone()),
    );
    out
}

fn var(shape: &[usize], seed: u64, dev: &Device) -> Var {
    Var::from_tensor(&randn(shape, seed).to_device(dev).unwrap()).unwrap()
}

fn tensor(shape: &[usize], seed: u64, dev: &Device) -> Tensor {
    randn(shape, seed).to_device(dev).unwrap()
}

/// Each op, the kernels it launches, and a run giving its output and gradients.
pub fn cases() -> Vec<(&'static str, &'static [&'static str], Run)> {
    vec![
        (
            "rms_norm",
            &["rms_norm_fwd", "rms_norm_bwd", "rms_norm_bwd_dw"],
            Box::new(|dev| {
                let (x, w) = (var(&[2, 7, 40], 1, dev), var(&[40], 2, dev));
                with_grads(tritium_candle::rms_norm(&x, &w, 1e-6).unwrap(), &[&x, &w])
            }),
        ),
        (
            "rope",
            &["rope"],
            Box::new(|dev| {
                // (b, t, h, d) viewed as (b, h, t, d): read through its strides.
                let x = var(&[2, 5, 3, 16], 3, dev);
                let view = x.transpose(1, 2).unwrap();
                let (cos, sin) = (tensor(&[7, 8], 4, dev), tensor(&[7, 8], 5, dev));
                with_grads(tritium_candle::rope(&view, &cos, &sin).unwrap(), &[&x])
            }),
        ),
        (
            "cross_entropy",
            &[
                "cross_entropy_fwd",
                "cross_entropy_mean",
                "cross_entropy_bwd",
            ],
            Box::new(|dev| {
                let x = var(&[6, 70], 6, dev);
                let targets = [3i64, -100, 69, 0, 12, -100];
                let t = Tensor::new(&targets, dev).unwrap();
                with_grads(tritium_candle::cross_entropy(&x, &t).unwrap(), &[&x])
            }),
        ),
        (
            "softmax",
            &["softmax", "softmax_bwd"],
            Box::new(|dev| {
                let x = var(&[5, 33], 7, dev);
                with_grads(tritium_candle::softmax_last_dim(&x).unwrap(), &[&x])
            }),
        ),
        (
            "swiglu",
            &["swiglu_fwd", "swiglu_bwd"],
            Box::new(|dev| {
                let (g, u) = (var(&[4, 50], 8, dev), var(&[4, 50], 9, dev));
                with_grads(tritium_candle::swiglu(&g, &u).unwrap(), &[&g, &u])
            }),
        ),
    ]
}

#[test]
fn fused_ops_launch_on_the_emulator_and_the_interpreter_as_on_the_cpu() {
    for (op, kernels, run) in cases() {
        let cpu = run(&Device::Cpu);
        for dev in [
            tritium::Device::cuda_emulator(),
            tritium::Device::interpreter(),
        ] {
            let other = launch_host_ops_on(dev.clone(), || run(&Device::Cpu));
            assert_eq!(cpu.len(), other.len());
            for (k, (a, b)) in cpu.iter().zip(&other).enumerate() {
                assert_eq!(a.dims(), b.dims(), "{op} output {k} on {dev:?}");
                assert_eq!(b.dtype(), a.dtype(), "{op} output {k} on {dev:?}");
                let d = max_diff(a, b) / magnitude(a);
                assert!(d <= 1e-5, "{op} output {k} on {dev:?}: {d}");
            }
        }
        for kernel in kernels {
            let compiles = stats().kernel_on(TargetKind::Emulator, kernel).compiles;
            assert!(compiles > 0, "{op}: {kernel} ran on the emulator");
        }
    }
}

/// Outside its closure (after a nested one, and after it unwinds), ops launch where they
/// did before.
#[test]
fn launch_host_ops_on_restores_the_device_before_it() {
    use tritium::Device as Tritium;
    assert_eq!(host_ops_device(), Tritium::cpu());
    launch_host_ops_on(Tritium::cuda_emulator(), || {
        launch_host_ops_on(Tritium::interpreter(), || {
            assert_eq!(host_ops_device(), Tritium::interpreter());
        });
        assert_eq!(host_ops_device(), Tritium::cuda_emulator());
        let unwound = std::panic::catch_unwind(|| {
            launch_host_ops_on(Tritium::interpreter(), || panic!("a failing check"))
        });
        assert!(unwound.is_err());
        assert_eq!(host_ops_device(), Tritium::cuda_emulator());
    });
    assert_eq!(host_ops_device(), Tritium::cpu());
}
