//! RoPE against candle-nn's `rope` and `rope_slow` (forward) and candle's autograd over
//! `rope_slow` (backward), f32/f16/bf16, head dims 64 and 128, t = 1, views, errors.

use crate::{assert_close, assert_mentions, f64s, randn, BWD, FWD};
use candle_core::{DType, Device, Tensor, Var};
use tritium_candle::rope;

/// Llama's tables: `cos`, `sin` of `(t, d/2)` (θ = 10000).
fn cos_sin(t: usize, half: usize) -> (Tensor, Tensor) {
    let inv: Vec<f32> = (0..half)
        .map(|i| 1.0 / 10000f32.powf(i as f32 / half as f32))
        .collect();
    let inv = Tensor::from_vec(inv, (1, half), &Device::Cpu).unwrap();
    let pos = Tensor::arange(0u32, t as u32, &Device::Cpu)
        .unwrap()
        .to_dtype(DType::F32)
        .unwrap()
        .reshape((t, 1))
        .unwrap();
    let f = pos.broadcast_mul(&inv).unwrap();
    (f.cos().unwrap(), f.sin().unwrap())
}

/// (b, h, t, d): head dims 64 and 128, t = 1, an odd number of pairs.
const ROPE_SHAPES: [[usize; 4]; 5] = [
    [2, 3, 5, 64],
    [1, 4, 37, 128],
    [2, 2, 1, 128],
    [1, 3, 9, 6],
    [3, 1, 70, 80],
];

#[test]
fn rope_forward_matches_candle_nn() {
    for (dtype, tol) in FWD {
        for [b, h, t, d] in ROPE_SHAPES {
            let what = format!("{dtype:?} {:?}", [b, h, t, d]);
            let x = randn(&[b, h, t, d], 11).to_dtype(dtype).unwrap();
            let (cos, sin) = cos_sin(t, d / 2);
            let (cos, sin) = (cos.to_dtype(dtype).unwrap(), sin.to_dtype(dtype).unwrap());
            let ours = rope(&x, &cos, &sin).unwrap();
            assert_eq!(ours.dtype(), dtype);
            let theirs = candle_nn::rotary_emb::rope(&x, &cos, &sin).unwrap();
            assert_close(&ours, &theirs, tol, &what);
            let slow = candle_nn::rotary_emb::rope_slow(&x, &cos, &sin).unwrap();
            assert_close(&ours, &slow, tol, &format!("{what} (rope_slow)"));
        }
    }
}

#[test]
fn rope_reads_views_and_longer_or_batched_tables() {
    let (b, h, t, d) = (2usize, 4usize, 13usize, 64usize);
    for (dtype, tol) in FWD {
        let (cos, sin) = cos_sin(t + 5, d / 2);
        let (cos, sin) = (cos.to_dtype(dtype).unwrap(), sin.to_dtype(dtype).unwrap());
        // Attention's layout: (b, t, h, d) projected, viewed as (b, h, t, d) without a copy.
        let bthd = randn(&[b, t, h, d], 12).to_dtype(dtype).unwrap();
        let x = bthd.transpose(1, 2).unwrap();
        assert!(!x.is_contiguous());
        let ours = rope(&x, &cos, &sin).unwrap();
        assert!(ours.is_contiguous());
        let theirs = candle_nn::rotary_emb::rope(&x.contiguous().unwrap(), &cos, &sin).unwrap();
        assert_close(&ours, &theirs, tol, &format!("{dtype:?} transposed"));
        // A view whose last dim is strided (copied), and a window of a larger tensor.
        let x = randn(&[b, h, d, t], 13)
            .to_dtype(dtype)
            .unwrap()
            .transpose(2, 3)
            .unwrap();
        let ours = rope(&x, &cos, &sin).unwrap();
        let theirs = candle_nn::rotary_emb::rope(&x.contiguous().unwrap(), &cos, &sin).unwrap();
        assert_close(&ours, &theirs, tol, &format!("{dtype:?} last dim strided"));
        let big = randn(&[b + 1, h, t + 3, d], 14).to_dtype(dtype).unwrap();
        let x = big.narrow(0, 1, b).unwrap().narrow(2, 2, t).unwrap();
        let ours = rope(&x, &cos, &sin).unwrap();
        let theirs = candle_nn::rotary_emb::rope(&x.contiguous().unwrap(), &cos, &sin).unwrap();
        assert_close(&ours, &theirs, tol, &format!("{dtype:?} window"));
        // Tables per batch, (b, t, d/2), and tables given as views.
        let cos_b = Tensor::stack(
            &[&cos.narrow(0, 0, t).unwrap(), &cos.narrow(0, 5, t).unwrap()],
            0,
        )
        .unwrap();
        let sin_b = Tensor::stack(
            &[&sin.narrow(0, 0, t).unwrap(), &sin.narrow(0, 5, t).unwrap()],
            0,
        )
        .unwrap();
        let x = randn(&[b, h, t, d], 15).to_dtype(dtype).unwrap();
        let ours = rope(&x, &cos_b, &sin_b).unwrap();
        let theirs = candle_nn::rotary_emb::rope(&x, &cos_b, &sin_b).unwrap();
        assert_close(&ours, &theirs, tol, &format!("{dtype:?} batched tables"));
        let cos_v = cos.narrow(0, 2, t).unwrap();
        let sin_v = sin.narrow(0, 2, t).unwrap();
        let ours = rope(&x, &cos_v, &sin_v).unwrap();
        let theirs = candle_nn::rotary_emb::rope(
            &x,
            &cos_v.contiguous().unwrap(),
            &sin_v.contiguous().unwrap(),
        )
        .unwrap();
        assert_close(&ours, &theirs, tol, &format!("{dtype:?} table views"));
    }
}

#[test]
fn rope_backward_matches_candle_autograd() {
    for (dtype, tol) in BWD {
        for (shape, transposed) in [
            ([2usize, 3, 7, 64], false),
            ([1, 4, 1, 128], false),
            ([2, 3, 11, 128], true),
        ] {
            let [b, h, t, d] = shape;
            let what = format!("{dtype:?} {shape:?} transposed {transposed}");
            let x0 = match transposed {
                true => randn(&[b, t, h, d], 21),
                false => randn(&shape, 21),
            }
            .to_dtype(dtype)
            .unwrap();
            let (cos, sin) = cos_sin(t, d / 2);
            let (cos, sin) = (cos.to_dtype(dtype).unwrap(), sin.to_dtype(dtype).unwrap());
            let g = randn(&shape, 22).to_dtype(dtype).unwrap();
            let grad = |ours: bool| {
                let v = Var::from_tensor(&x0).unwrap();
                let x = match transposed {
                    true => v.as_tensor().transpose(1, 2).unwrap(),
                    false => v.as_tensor().clone(),
                };
                let y = match ours {
                    true => rope(&x, &cos, &sin).unwrap(),
                    false => candle_nn::rotary_emb::rope_slow(&x, &cos, &sin).unwrap(),
                };
                let store = (y * &g).unwrap().sum_all().unwrap().backward().unwrap();
                store.get(v.as_tensor()).unwrap().clone()
            };
            let (dx, dx_ref) = (grad(true), grad(false));
            assert_eq!(dx.dtype(), dtype);
            assert_close(&dx, &dx_ref, tol, &what);
        }
    }
}

#[test]
fn rope_tables_get_no_gradient() {
    let (cos, sin) = cos_sin(5, 32);
    let (x, cos, sin) = (
        Var::from_tensor(&randn(&[1, 2, 5, 64], 23)).unwrap(),
        Var::from_tensor(&cos).unwrap(),
        Var::from_tensor(&sin).unwrap(),
    );
    let y = rope(x.as_tensor(), cos.as_tensor(), sin.as_tensor()).unwrap();
    let store = y.sum_all().unwrap().backward().unwrap();
    assert!(store.get(x.as_tensor()).is_some());
    assert!(store.get(cos.as_tensor()).is_none());
    assert!(store.get(sin.as_tensor()).is_none());
}

#[test]
fn rope_errors_name_what_was_wrong() {
    let x = randn(&[1, 2, 3, 8], 61);
    let (cos, sin) = cos_sin(3, 4);
    assert_mentions(
        rope(&randn(&[2, 3, 8], 1), &cos, &sin),
        &["tritium-rope", "(b, h, t, d)", "[2, 3, 8]"],
    );
    assert_mentions(rope(&randn(&[1, 2, 3, 7], 1), &cos, &sin), &["even", "7"]);
    let (c2, s2) = cos_sin(2, 4);
    assert_mentions(rope(&x, &c2, &s2), &["cos must have shape", "[2, 4]"]);
    let (c5, s5) = cos_sin(3, 5);
    assert_mentions(rope(&x, &c5, &s5), &["cos must have shape", "[3, 5]"]);
    assert_mentions(
        rope(&x, &cos, &s5),
        &["sin must have cos's shape", "[3, 5]"],
    );
    assert_mentions(
        rope(&x, &cos.to_dtype(DType::BF16).unwrap(), &sin),
        &["x is F32 but cos is BF16"],
    );
    assert_mentions(
        rope(&f64s(&x), &f64s(&cos), &f64s(&sin)),
        &["f32, f16 or bf16", "F64"],
    );
}
