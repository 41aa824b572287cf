//! tritium-candle against candle itself: RMSNorm forward and backward (f32, bf16) as
//! candle-nn computes them, candle tensors as kernel arguments, and errors; the other fused
//! ops in their modules (forward against candle-nn, backward against candle's autograd).

mod cross_entropy;
#[cfg(feature = "cuda")]
mod cuda;
mod host_device;
mod kernel_op;
mod layouts;
mod rope;
mod softmax;
mod swiglu;

use candle_core::{DType, Device, Tensor, Var};
use tritium_candle::{rms_norm, tensor_from};
use tritium_kernels::vector_add::add;

fn max_diff(a: &Tensor, b: &Tensor) -> f32 {
    let d = (a.to_dtype(DType::F32).unwrap() - b.to_dtype(DType::F32).unwrap()).unwrap();
    d.abs()
        .unwrap()
        .flatten_all()
        .unwrap()
        .max(0)
        .unwrap()
        .to_scalar::<f32>()
        .unwrap()
}

fn randn(shape: &[usize], seed: u64) -> Tensor {
    // A fixed pseudo-random fill (candle's CPU RNG is not seedable per call).
    let n: usize = shape.iter().product();
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let v: Vec<f32> = (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 40) as f32 / (1u64 << 24) as f32 * 4.0 - 2.0
        })
        .collect();
    Tensor::from_vec(v, shape, &Device::Cpu).unwrap()
}

/// Forward tolerances, Liger-Kernel's (relative to the reference's largest magnitude, at
/// least 1).
const FWD: [(DType, f32); 3] = [(DType::F32, 1e-5), (DType::F16, 5e-3), (DType::BF16, 2e-2)];
/// Gradient tolerances.
const BWD: [(DType, f32); 2] = [(DType::F32, 1e-4), (DType::BF16, 5e-2)];

/// The largest magnitude of `t`, at least 1.
fn magnitude(t: &Tensor) -> f32 {
    max_diff(t, &t.zeros_like().unwrap()).max(1.0)
}

/// `ours` has `theirs`' shape and lies within `tol` of it relative to its magnitude.
#[track_caller]
fn assert_close(ours: &Tensor, theirs: &Tensor, tol: f32, what: &str) {
    assert_eq!(ours.dims(), theirs.dims(), "{what}: shape");
    let d = max_diff(ours, theirs);
    assert!(
        d <= tol * magnitude(theirs),
        "{what}: max difference {d} (reference magnitude {})",
        magnitude(theirs)
    );
}

/// The error `r` must be, with every one of `parts` in its message.
#[track_caller]
fn assert_mentions(r: candle_core::Result<Tensor>, parts: &[&str]) {
    match r {
        Ok(t) => panic!("no error but {t:?}, want one mentioning {parts:?}"),
        Err(e) => {
            let e = e.to_string();
            assert!(parts.iter().all(|p| e.contains(p)), "{e} lacks {parts:?}");
        }
    }
}

/// `t` in f64 (a dtype the ops refuse).
fn f64s(t: &Tensor) -> Tensor {
    t.to_dtype(DType::F64).unwrap()
}

/// Liger-Kernel's tolerances for RMSNorm: f32 1e-5 (here 1e-4 absolute on values near 1),
/// bf16 2e-1 on gradients, 1e-2 on values.
#[test]
fn rms_norm_forward_matches_candle_nn() {
    for (dtype, tol) in [(DType::F32, 1e-4), (DType::BF16, 2e-2)] {
        for shape in [[4usize, 7, 64], [3, 5, 1000], [1, 1, 1]] {
            let x = randn(&shape, 1).to_dtype(dtype).unwrap();
            let w = randn(&[shape[2]], 2).to_dtype(dtype).unwrap();
            let ours = rms_norm(&x, &w, 1e-6).unwrap();
            let theirs = candle_nn::ops::rms_norm(&x, &w, 1e-6).unwrap();
            assert_eq!(ours.dtype(), dtype);
            assert_eq!(ours.dims(), &shape);
            let d = max_diff(&ours, &theirs);
            assert!(d <= tol, "{dtype:?} {shape:?}: {d}");
        }
    }
}

#[test]
fn rms_norm_backward_matches_candle_autograd() {
    for (dtype, tol) in [(DType::F32, 1e-4), (DType::BF16, 2e-1)] {
        let shape = [2usize, 9, 96];
        let x0 = randn(&shape, 3).to_dtype(dtype).unwrap();
        let w0 = randn(&[shape[2]], 4).to_dtype(dtype).unwrap();
        let g = randn(&shape, 5).to_dtype(dtype).unwrap();
        let grads = |ours: bool| {
            let (x, w) = (
                Var::from_tensor(&x0).unwrap(),
                Var::from_tensor(&w0).unwrap(),
            );
            let y = match ours {
                true => rms_norm(x.as_tensor(), w.as_tensor(), 1e-6).unwrap(),
                false => candle_nn::ops::rms_norm_slow(x.as_tensor(), w.as_tensor(), 1e-6).unwrap(),
            };
            let loss = (y * &g).unwrap().sum_all().unwrap();
            let store = loss.backward().unwrap();
            (
                store.get(x.as_tensor()).unwrap().clone(),
                store.get(w.as_tensor()).unwrap().clone(),
            )
        };
        let ((dx, dw), (dx_ref, dw_ref)) = (grads(true), grads(false));
        let scale = |t: &Tensor| max_diff(t, &t.zeros_like().unwrap()).max(1.0);
        assert!(
            max_diff(&dx, &dx_ref) <= tol * scale(&dx_ref),
            "{dtype:?} dx: {}",
            max_diff(&dx, &dx_ref)
        );
        assert!(
            max_diff(&dw, &dw_ref) <= tol * scale(&dw_ref),
            "{dtype:?} dw: {}",
            max_diff(&dw, &dw_ref)
        );
    }
}

#[test]
fn candle_tensors_are_kernel_arguments_where_they_lie() {
    let x = tensor_from((0..100).map(|i| i as f32).collect(), 100).unwrap();
    let y = tensor_from(vec![0.5f32; 100], 100).unwrap();
    // A window of the tensor: its layout's offset is where the kernel's pointer starts.
    let (xw, yw) = (x.narrow(0, 30, 40).unwrap(), y.narrow(0, 10, 40).unwrap());
    let mut out = vec![0f32; 40];
    add::launch(&tritium::Device::cpu(), 1, &mut out, &xw, &yw, 40, 64).unwrap();
    assert_eq!(out, (30..70).map(|i| i as f32 + 0.5).collect::<Vec<_>>());
    // The same on the interpreter and the emulator.
    for d in [
        tritium::Device::interpreter(),
        tritium::Device::cuda_emulator(),
    ] {
        let mut again = vec![0f32; 40];
        add::launch(&d, 1, &mut again, &xw, &yw, 40, 64).unwrap();
        assert_eq!(again, out, "{d:?}");
    }
    // A launch past the window's end is an error, not a read of the tensor past it.
    let e = add::launch(
        &tritium::Device::cpu(),
        1,
        &mut vec![0f32; 64],
        &xw,
        &yw,
        64,
        64,
    )
    .unwrap_err();
    assert!(e.to_string().contains("out-of-bounds"), "{e}");
}

#[test]
fn wrong_tensors_are_errors_naming_what_was_wrong() {
    let x = tensor_from(vec![1f64; 8], 8).unwrap();
    let mut out = vec![0f32; 8];
    let e = add::launch(&tritium::Device::cpu(), 1, &mut out, &x, &x, 8, 8).unwrap_err();
    assert!(
        e.to_string().contains("`x`") && e.to_string().contains("f64"),
        "{e}"
    );
    let x = randn(&[2, 8], 1);
    let e = rms_norm(&x, &randn(&[7], 2), 1e-6).unwrap_err();
    assert!(e.to_string().contains("w must have shape [8]"), "{e}");
    let e = rms_norm(
        &x.to_dtype(DType::F64).unwrap(),
        &randn(&[8], 2).to_dtype(DType::F64).unwrap(),
        1e-6,
    )
    .unwrap_err();
    assert!(
        e.to_string().contains("f32, f16 or bf16") && e.to_string().contains("F64"),
        "{e}"
    );
    let e = rms_norm(&x, &randn(&[8], 2).to_dtype(DType::BF16).unwrap(), 1e-6).unwrap_err();
    assert!(e.to_string().contains("x is F32 but w is BF16"), "{e}");
}

mod llama;
