//! SwiGLU against candle's `silu(g) · u` (forward) and candle's autograd over it
//! (backward), f32/f16/bf16, odd sizes, views, errors.

use crate::{assert_close, assert_mentions, f64s, randn, BWD, FWD};
use candle_core::{DType, Tensor, Var};
use tritium_candle::swiglu;

/// `silu(g) · u` as candle composes it, in f32.
fn swiglu_ref(g: &Tensor, u: &Tensor) -> Tensor {
    let (g, u) = (
        g.to_dtype(DType::F32).unwrap(),
        u.to_dtype(DType::F32).unwrap(),
    );
    (candle_nn::ops::silu(&g).unwrap() * u).unwrap()
}

#[test]
fn swiglu_forward_matches_candle() {
    for (dtype, tol) in FWD {
        for shape in [vec![4usize, 7, 33], vec![1], vec![3, 1000], vec![2, 4099]] {
            let what = format!("{dtype:?} {shape:?}");
            let g = randn(&shape, 31).to_dtype(dtype).unwrap();
            let u = randn(&shape, 32).to_dtype(dtype).unwrap();
            let ours = swiglu(&g, &u).unwrap();
            assert_eq!(ours.dtype(), dtype);
            assert_eq!(ours.dims(), &shape[..]);
            assert_close(&ours, &swiglu_ref(&g, &u), tol, &what);
            // candle's own dtype arithmetic, within its rounding.
            let theirs = (candle_nn::ops::silu(&g).unwrap() * &u).unwrap();
            assert_close(
                &ours,
                &theirs,
                tol * 2.0,
                &format!("{what} (candle in {dtype:?})"),
            );
        }
        // Views: a transposed gate, a window of up.
        let g = randn(&[33, 20], 33).to_dtype(dtype).unwrap().t().unwrap();
        let u = randn(&[20, 40], 34)
            .to_dtype(dtype)
            .unwrap()
            .narrow(1, 3, 33)
            .unwrap();
        let ours = swiglu(&g, &u).unwrap();
        assert_close(&ours, &swiglu_ref(&g, &u), tol, &format!("{dtype:?} views"));
        // A broadcast (stride 0) up.
        let u = randn(&[1, 33], 38)
            .to_dtype(dtype)
            .unwrap()
            .broadcast_as((20, 33))
            .unwrap();
        let ours = swiglu(&g, &u).unwrap();
        assert_close(
            &ours,
            &swiglu_ref(&g, &u),
            tol,
            &format!("{dtype:?} broadcast"),
        );
    }
}

#[test]
fn swiglu_backward_matches_candle_autograd() {
    for (dtype, tol) in BWD {
        for shape in [vec![4usize, 7, 33], vec![2, 5000]] {
            let what = format!("{dtype:?} {shape:?}");
            let g0 = randn(&shape, 35).to_dtype(dtype).unwrap();
            let u0 = randn(&shape, 36).to_dtype(dtype).unwrap();
            let dy = randn(&shape, 37).to_dtype(dtype).unwrap();
            let grads = |ours: bool| {
                let (g, u) = (
                    Var::from_tensor(&g0).unwrap(),
                    Var::from_tensor(&u0).unwrap(),
                );
                let y = match ours {
                    true => swiglu(g.as_tensor(), u.as_tensor()).unwrap(),
                    false => {
                        (candle_nn::ops::silu(g.as_tensor()).unwrap() * u.as_tensor()).unwrap()
                    }
                };
                let store = (y * &dy).unwrap().sum_all().unwrap().backward().unwrap();
                (
                    store.get(g.as_tensor()).unwrap().clone(),
                    store.get(u.as_tensor()).unwrap().clone(),
                )
            };
            let ((dg, du), (dg_ref, du_ref)) = (grads(true), grads(false));
            assert_eq!((dg.dtype(), du.dtype()), (dtype, dtype));
            assert_close(&dg, &dg_ref, tol, &format!("{what} dgate"));
            assert_close(&du, &du_ref, tol, &format!("{what} dup"));
        }
    }
}

#[test]
fn swiglu_errors_name_what_was_wrong() {
    let g = randn(&[4, 6], 2);
    assert_mentions(
        swiglu(&g, &randn(&[4, 5], 3)),
        &[
            "tritium-swiglu",
            "up must have gate's shape [4, 6]",
            "[4, 5]",
        ],
    );
    assert_mentions(
        swiglu(&g, &g.to_dtype(DType::F16).unwrap()),
        &["gate is F32 but up is F16"],
    );
    assert_mentions(swiglu(&f64s(&g), &f64s(&g)), &["f32, f16 or bf16", "F64"]);
}
