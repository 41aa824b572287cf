//! Cross-entropy against candle-nn's `cross_entropy` (log_softmax + nll; forward) and
//! candle's autograd over it (backward), vocab 32000, u32 and i64 targets, ignored rows,
//! views, errors.

use crate::{assert_close, assert_mentions, f64s, max_diff, randn, BWD, FWD};
use candle_core::{DType, Device, Tensor, Var};
use tritium_candle::{cross_entropy, cross_entropy_with};

fn targets_u32(n: usize, v: usize, seed: u64) -> Vec<u32> {
    (0..n)
        .map(|i| ((i as u64 * 7919 + seed * 104_729) % v as u64) as u32)
        .collect()
}

#[test]
fn cross_entropy_forward_matches_candle_nn() {
    for (dtype, tol) in FWD {
        for (n, v) in [(8usize, 32000usize), (5, 7), (1, 1), (17, 1000), (3, 2049)] {
            let what = format!("{dtype:?} ({n}, {v})");
            let x = (randn(&[n, v], 51) * 4.0).unwrap().to_dtype(dtype).unwrap();
            let t = Tensor::new(targets_u32(n, v, 1), &Device::Cpu).unwrap();
            let ours = cross_entropy(&x, &t).unwrap();
            assert_eq!((ours.dtype(), ours.dims()), (DType::F32, &[][..]));
            // candle's log_softmax + nll on the same values, in f32.
            let theirs =
                candle_nn::loss::cross_entropy(&x.to_dtype(DType::F32).unwrap(), &t).unwrap();
            assert_close(&ours, &theirs, tol.min(1e-4), &what);
            // i64 targets give the same loss.
            let t64 = t.to_dtype(DType::I64).unwrap();
            let again = cross_entropy(&x, &t64).unwrap();
            assert_eq!(
                again.to_scalar::<f32>().unwrap(),
                ours.to_scalar::<f32>().unwrap(),
                "{what}"
            );
        }
        // Logits as a transposed view.
        let x = randn(&[300, 6], 52).to_dtype(dtype).unwrap().t().unwrap();
        let t = Tensor::new(targets_u32(6, 300, 2), &Device::Cpu).unwrap();
        let ours = cross_entropy(&x, &t).unwrap();
        let theirs = candle_nn::loss::cross_entropy(&x.to_dtype(DType::F32).unwrap(), &t).unwrap();
        assert_close(&ours, &theirs, 1e-4, &format!("{dtype:?} transposed"));
    }
}

/// Rows 1, 4 and 5 of 7 ignored (-100): the loss and gradient of candle over the rest.
#[test]
fn cross_entropy_ignores_rows_as_pytorch() {
    let (n, v) = (7usize, 32000usize);
    let ignored = [1usize, 4, 5];
    let kept: Vec<u32> = (0..n as u32)
        .filter(|r| !ignored.contains(&(*r as usize)))
        .collect();
    let mut targets: Vec<i64> = targets_u32(n, v, 3).iter().map(|&t| t as i64).collect();
    for &r in &ignored {
        targets[r] = -100;
    }
    let t = Tensor::new(targets.clone(), &Device::Cpu).unwrap();
    let kept = Tensor::new(kept, &Device::Cpu).unwrap();
    for (dtype, tol) in BWD {
        let x0 = randn(&[n, v], 53).to_dtype(dtype).unwrap();
        let xv = Var::from_tensor(&x0).unwrap();
        let loss = cross_entropy(xv.as_tensor(), &t).unwrap();
        let dx = (loss.clone() * 3.0)
            .unwrap()
            .backward()
            .unwrap()
            .get(xv.as_tensor())
            .unwrap()
            .clone();
        assert_eq!(dx.dtype(), dtype);
        let rv = Var::from_tensor(&x0.to_dtype(DType::F32).unwrap()).unwrap();
        let rows = rv.as_tensor().index_select(&kept, 0).unwrap();
        let kept_targets = t
            .index_select(&kept, 0)
            .unwrap()
            .to_dtype(DType::U32)
            .unwrap();
        let loss_ref = candle_nn::loss::cross_entropy(&rows, &kept_targets).unwrap();
        let dx_ref = (loss_ref.clone() * 3.0)
            .unwrap()
            .backward()
            .unwrap()
            .get(rv.as_tensor())
            .unwrap()
            .clone();
        assert_close(&loss, &loss_ref, 1e-4, &format!("{dtype:?} loss"));
        let d = max_diff(&dx, &dx_ref);
        assert!(d <= tol * 3.0 / 4.0, "{dtype:?} dx: {d}");
        for &r in &ignored {
            let row = dx.get(r).unwrap().to_dtype(DType::F32).unwrap();
            assert_eq!(max_diff(&row, &row.zeros_like().unwrap()), 0.0, "row {r}");
        }
    }
    // Every row ignored: NaN as PyTorch's mean, and no gradient.
    let t = Tensor::new(vec![-100i64; 3], &Device::Cpu).unwrap();
    let xv = Var::from_tensor(&randn(&[3, 10], 54)).unwrap();
    let loss = cross_entropy(xv.as_tensor(), &t).unwrap();
    assert!(loss.to_scalar::<f32>().unwrap().is_nan());
    let dx = loss
        .backward()
        .unwrap()
        .get(xv.as_tensor())
        .unwrap()
        .clone();
    assert_eq!(max_diff(&dx, &dx.zeros_like().unwrap()), 0.0);
    // Another ignore_index for u32 targets.
    let x = randn(&[3, 10], 55);
    let t = Tensor::new(&[2u32, u32::MAX, 9], &Device::Cpu).unwrap();
    let ours = cross_entropy_with(&x, &t, Some(u32::MAX as i64)).unwrap();
    let kept = Tensor::new(&[0u32, 2], &Device::Cpu).unwrap();
    let theirs = candle_nn::loss::cross_entropy(
        &x.index_select(&kept, 0).unwrap(),
        &Tensor::new(&[2u32, 9], &Device::Cpu).unwrap(),
    )
    .unwrap();
    assert_close(&ours, &theirs, 1e-5, "u32 ignore_index");
}

#[test]
fn cross_entropy_backward_matches_candle_autograd() {
    for (dtype, tol) in BWD {
        for (n, v, transposed) in [(6usize, 32000usize, false), (5, 7, false), (9, 300, true)] {
            let what = format!("{dtype:?} ({n}, {v}) transposed {transposed}");
            let x0 = match transposed {
                true => randn(&[v, n], 56),
                false => randn(&[n, v], 56),
            }
            .to_dtype(dtype)
            .unwrap();
            let t = Tensor::new(targets_u32(n, v, 4), &Device::Cpu).unwrap();
            let grad = |ours: bool| {
                let xv = match ours {
                    true => Var::from_tensor(&x0).unwrap(),
                    false => Var::from_tensor(&x0.to_dtype(DType::F32).unwrap()).unwrap(),
                };
                let x = match transposed {
                    true => xv.as_tensor().t().unwrap(),
                    false => xv.as_tensor().clone(),
                };
                let loss = match ours {
                    true => cross_entropy(&x, &t).unwrap(),
                    false => candle_nn::loss::cross_entropy(&x, &t).unwrap(),
                };
                let store = (loss * 2.5).unwrap().backward().unwrap();
                store.get(xv.as_tensor()).unwrap().clone()
            };
            let (dx, dx_ref) = (grad(true), grad(false));
            assert_eq!(dx.dtype(), dtype);
            // Gradients are at most 2.5/n: relative to that.
            let d = max_diff(&dx, &dx_ref);
            assert!(d <= tol * 2.5 / n as f32, "{what}: {d}");
        }
    }
}

#[test]
fn cross_entropy_errors_name_what_was_wrong() {
    let g = randn(&[4, 6], 2);
    let t = Tensor::new(&[0u32, 1, 2, 3], &Device::Cpu).unwrap();
    assert_mentions(
        cross_entropy(&randn(&[24], 4), &t),
        &[
            "tritium-cross-entropy",
            "logits must have shape (n, v)",
            "[24]",
        ],
    );
    assert_mentions(
        cross_entropy(&g, &Tensor::new(&[0u32, 1, 2], &Device::Cpu).unwrap()),
        &["targets must have shape (4,)", "[3]"],
    );
    assert_mentions(
        cross_entropy(&g, &t.to_dtype(DType::F32).unwrap()),
        &["targets must be u32 or i64", "F32"],
    );
    assert_mentions(
        cross_entropy(&g, &Tensor::new(&[0u32, 1, 6, 3], &Device::Cpu).unwrap()),
        &["target 6 of row 2", "0..6", "ignore_index -100"],
    );
    assert_mentions(
        cross_entropy(&g, &Tensor::new(&[0i64, -1, 2, 3], &Device::Cpu).unwrap()),
        &["target -1 of row 1"],
    );
    assert_mentions(
        cross_entropy_with(
            &g,
            &Tensor::new(&[0i64, -100, 2, 3], &Device::Cpu).unwrap(),
            None,
        ),
        &["target -100 of row 1", "0..6"],
    );
    assert_mentions(cross_entropy(&f64s(&g), &t), &["f32, f16 or bf16", "F64"]);
}
