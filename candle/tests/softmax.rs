//! Softmax over the last dim against candle-nn's `softmax_last_dim` (forward) and
//! candle's autograd over candle-nn's composed `softmax` (backward), rows of 32000, views,
//! errors.

use crate::{assert_close, assert_mentions, f64s, max_diff, randn, BWD, FWD};
use candle_core::{DType, Device, Tensor, Var, D};
use tritium_candle::softmax_last_dim;

#[test]
fn softmax_forward_matches_candle_nn() {
    for (dtype, tol) in FWD {
        for shape in [
            vec![4usize, 7, 33],
            vec![3, 32000],
            vec![5, 1],
            vec![2, 1000],
            vec![7],
        ] {
            let what = format!("{dtype:?} {shape:?}");
            let x = (randn(&shape, 41) * 3.0).unwrap().to_dtype(dtype).unwrap();
            let ours = softmax_last_dim(&x).unwrap();
            assert_eq!(ours.dtype(), dtype);
            let theirs = candle_nn::ops::softmax_last_dim(&x).unwrap();
            assert_close(&ours, &theirs, tol, &what);
        }
        // A transposed view.
        let x = randn(&[50, 6], 42).to_dtype(dtype).unwrap().t().unwrap();
        let ours = softmax_last_dim(&x).unwrap();
        let theirs = candle_nn::ops::softmax_last_dim(&x.contiguous().unwrap()).unwrap();
        assert_close(&ours, &theirs, tol, &format!("{dtype:?} transposed"));
    }
}

#[test]
fn softmax_backward_matches_candle_autograd() {
    for (dtype, tol) in BWD {
        for (shape, transposed) in [
            (vec![4usize, 7, 33], false),
            (vec![2, 32000], false),
            (vec![9, 40], true),
        ] {
            let what = format!("{dtype:?} {shape:?} transposed {transposed}");
            let x0 = randn(&shape, 43).to_dtype(dtype).unwrap();
            let view = |t: &Tensor| match transposed {
                true => t.t().unwrap(),
                false => t.clone(),
            };
            let g = view(&randn(&shape, 44).to_dtype(dtype).unwrap())
                .contiguous()
                .unwrap();
            // candle's composition in f32 on the same values (in bf16 its sum of 32000
            // exponentials loses every bit).
            let grad = |ours: bool| {
                let v = match ours {
                    true => Var::from_tensor(&x0).unwrap(),
                    false => Var::from_tensor(&x0.to_dtype(DType::F32).unwrap()).unwrap(),
                };
                let x = view(v.as_tensor());
                let y = match ours {
                    true => softmax_last_dim(&x).unwrap(),
                    false => candle_nn::ops::softmax(&x, D::Minus1)
                        .unwrap()
                        .to_dtype(dtype)
                        .unwrap(),
                };
                let store = (y * &g).unwrap().sum_all().unwrap().backward().unwrap();
                store.get(v.as_tensor()).unwrap().clone()
            };
            let (dx, dx_ref) = (grad(true), grad(false));
            assert_eq!(dx.dtype(), dtype);
            // Gradients of a softmax over 32000 are small: relative to their own magnitude.
            let scale = max_diff(&dx_ref, &dx_ref.zeros_like().unwrap());
            let d = max_diff(&dx, &dx_ref);
            assert!(
                d <= tol * scale.max(1e-3),
                "{what}: {d} (magnitude {scale})"
            );
        }
    }
}

#[test]
fn softmax_errors_name_what_was_wrong() {
    let g = randn(&[4, 6], 2);
    assert_mentions(
        softmax_last_dim(&Tensor::new(1f32, &Device::Cpu).unwrap()),
        &["tritium-softmax", "scalar"],
    );
    assert_mentions(softmax_last_dim(&f64s(&g)), &["f32, f16 or bf16", "F64"]);
}
