//! Backward (MindSpore's bprop) and reverse-mode `grad` over chains of operator calls.
use ndarray::array;
use tritium_aot::{grad, AotOp, DType, Tape, Tensor};

use super::common::op;

fn square_with_aot_backward() -> AotOp {
    let square_grad = op("square.cc", "CustomSquareGrad")
        .infer_shape(|x| x[0].clone())
        .out_dtype(DType::F32)
        .build()
        .unwrap();
    op("square.cc", "CustomSquare")
        .infer_shape(|x| x[0].clone())
        .infer_dtype(|x| x[0])
        .backward_op(square_grad)
        .build()
        .unwrap()
}

fn square_with_rust_backward() -> AotOp {
    op("square.cc", "CustomSquare")
        .infer_shape(|x| x[0].clone())
        .infer_dtype(|x| x[0])
        .backward(|x, _out, dout| Ok(vec![x[0].map(|v| 2.0 * v).mul(&dout[0])?]))
        .build()
        .unwrap()
}

#[test]
fn square_of_square() {
    let x = Tensor::from(array![1.0f32, 4.0, 9.0]);
    let sens = x.ones_like();
    for square in [square_with_aot_backward(), square_with_rust_backward()] {
        let dx = grad(
            |t, v| {
                let y = t.call(&square, &[v[0]])?;
                t.call(&square, &y)
            },
            std::slice::from_ref(&x),
            std::slice::from_ref(&sens),
        )
        .unwrap();
        assert_eq!(dx[0].to_vec::<f32>().unwrap(), [4.0, 256.0, 2916.0]);
    }
}

#[test]
fn add_mul_div_combined() {
    add_mul_div_net_and_its_gradients("add_mul_div.cc");
}

/// MindSpore's `AOTMultiOutputNet` over `CustomAddMulDiv` from `source` (the host's `.cc` or
/// the GPU's `.cu`): `(x + y + x·y) · x / y`, and its gradients through the operator's
/// backward.
pub(crate) fn add_mul_div_net_and_its_gradients(source: &str) {
    let amd = op(source, "CustomAddMulDiv")
        .out_dtypes([DType::F32; 3])
        .backward(|x, _out, d| {
            // o0 = x + y, o1 = x * y, o2 = x / y
            let (a, b) = (&x[0], &x[1]);
            let dx = d[0].add(&d[1].mul(b)?)?.add(&d[2].div(b)?)?;
            let dy = d[0]
                .add(&d[1].mul(a)?)?
                .sub(&d[2].mul(a)?.div(&b.mul(b)?)?)?;
            Ok(vec![dx, dy])
        })
        .build()
        .unwrap();
    let x = Tensor::from(array![1.0f32, 4.0, 9.0]);
    let y = Tensor::from(array![1.0f32, 1.0, 1.0]);
    let mut tape = Tape::new();
    let (vx, vy) = (tape.input(x.clone()), tape.input(y));
    let o = tape.call(&amd, &[vx, vy]).unwrap();
    let s = tape.add(o[0], o[1]).unwrap();
    let f = tape.mul(s, o[2]).unwrap();
    assert_eq!(tape.value(f).to_vec::<f32>().unwrap(), [3.0, 36.0, 171.0]);
    let g = tape.grad(&[f], &[x.ones_like()], &[vx, vy]).unwrap();
    assert_eq!(g[0].to_vec::<f32>().unwrap(), [5.0, 17.0, 37.0]);
    assert_eq!(g[1].to_vec::<f32>().unwrap(), [-1.0, -16.0, -81.0]);
}

#[test]
fn grad_errors() {
    let no_bwd = op("square.cc", "CustomSquare")
        .infer_shape(|x| x[0].clone())
        .infer_dtype(|x| x[0])
        .build()
        .unwrap();
    let x = Tensor::from(array![1.0f32]);
    let err = grad(
        |t, v| t.call(&no_bwd, &[v[0]]),
        std::slice::from_ref(&x),
        &[],
    )
    .unwrap_err();
    assert!(err.to_string().contains("declares no backward"), "{err}");
    let bad = op("square.cc", "CustomSquare")
        .infer_shape(|x| x[0].clone())
        .infer_dtype(|x| x[0])
        .backward(|_, _, _| Ok(vec![]))
        .build()
        .unwrap();
    let err = grad(|t, v| t.call(&bad, &[v[0]]), &[x], &[]).unwrap_err();
    assert!(
        err.to_string()
            .contains("returned 0 gradients for 1 inputs"),
        "{err}"
    );
}
