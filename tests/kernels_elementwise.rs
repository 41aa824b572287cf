//! Tutorial 01 (vector add) and 02 (fused softmax).

use crate::common::{assert_close, devices_for, random_f32};
use half::f16;
use ndarray::{Array1, Array2, Axis};
use rstest::rstest;
use tritium_kernels::softmax::softmax_rows;
use tritium_kernels::vector_add::vector_add;

#[rstest]
fn vector_add_f32(#[values(1, 7, 1024, 1000003)] n: usize) {
    let x = Array1::from(random_f32(n, 1));
    let y = Array1::from(random_f32(n, 2));
    let want = &x + &y;
    for d in devices_for(n) {
        let got = vector_add(&d, x.view(), y.view()).unwrap();
        assert_eq!(got, want, "{d:?}");
    }
}

#[rstest]
fn vector_add_i32(#[values(1, 7, 1024, 1000003)] n: usize) {
    let x = Array1::from_iter((0..n as i32).map(|i| i.wrapping_mul(7919)));
    let y = Array1::from_iter((0..n as i32).map(|i| i32::MAX - i));
    let want = x
        .iter()
        .zip(&y)
        .map(|(a, b)| a.wrapping_add(*b))
        .collect::<Array1<i32>>();
    for d in devices_for(n) {
        let got = vector_add(&d, x.view(), y.view()).unwrap();
        assert_eq!(got, want, "{d:?}");
    }
}

#[rstest]
fn vector_add_f16(#[values(1, 7, 1024, 1000003)] n: usize) {
    let x = Array1::from_iter(random_f32(n, 3).into_iter().map(f16::from_f32));
    let y = Array1::from_iter(random_f32(n, 4).into_iter().map(f16::from_f32));
    let want = x
        .iter()
        .zip(&y)
        .map(|(a, b)| f16::from_f32(a.to_f32() + b.to_f32()))
        .collect::<Array1<f16>>();
    for d in devices_for(n) {
        let got = vector_add(&d, x.view(), y.view()).unwrap();
        assert_eq!(got, want, "{d:?}");
    }
}

fn softmax_reference(x: &Array2<f32>) -> Array2<f32> {
    let mut out = x.clone();
    for mut row in out.axis_iter_mut(Axis(0)) {
        let m = row.fold(f32::NEG_INFINITY, |a, b| a.max(*b));
        row.mapv_inplace(|v| (v - m).exp());
        let s = row.sum();
        row.mapv_inplace(|v| v / s);
    }
    out
}

#[rstest]
fn softmax_f32(#[values((1, 1), (17, 33), (4096, 781), (16, 1024))] shape: (usize, usize)) {
    let x = Array2::from_shape_vec(shape, random_f32(shape.0 * shape.1, 5)).unwrap() * 4.0;
    let want = softmax_reference(&x);
    let compiled = softmax_rows(&tritium::Device::cpu(), x.view()).unwrap();
    let interpreted = softmax_rows(&tritium::Device::interpreter(), x.view()).unwrap();
    assert_close(&compiled, &want, 1e-5, 1e-7, "compiled vs ndarray");
    assert_close(
        &compiled,
        &interpreted,
        1e-5,
        1e-7,
        "compiled vs interpreter",
    );
}

/// Full rows (every lane of the block in the row) take the copy of the code whose mask is
/// all true: there the max reads whole vectors of the row, and the sum's 32 partial sums
/// fold as one vector (in the order the scalar fold uses).
#[test]
fn softmax_of_full_rows_reads_whole_vectors() {
    let x = Array2::from_shape_vec((4, 1024), random_f32(4 * 1024, 6)).unwrap();
    let mut out = Array2::<f32>::zeros((4, 1024));
    let dumps = crate::common::dumps_of("softmax-full-rows", |options| {
        tritium_kernels::softmax::softmax_rows_into_with(
            &tritium::Device::cpu(),
            options,
            x.view(),
            out.view_mut(),
        )
        .unwrap()
    });
    assert_close(
        &out,
        &softmax_reference(&x),
        1e-5,
        1e-7,
        "compiled vs ndarray",
    );
    let ll = dumps.get("ll");
    assert!(
        ll.contains("load <32 x float>"),
        "the max reads lane by lane"
    );
    assert!(
        ll.contains("fadd reassoc <16 x float>"),
        "the partial sums fold lane by lane"
    );
}

#[rstest]
fn softmax_f16(#[values((1, 1), (17, 33), (4096, 781))] shape: (usize, usize)) {
    let x32 = Array2::from_shape_vec(shape, random_f32(shape.0 * shape.1, 6)).unwrap() * 4.0;
    let x = x32.mapv(f16::from_f32);
    let want = softmax_reference(&x.mapv(f16::to_f32));
    let compiled = softmax_rows(&tritium::Device::cpu(), x.view())
        .unwrap()
        .mapv(f16::to_f32);
    let interpreted = softmax_rows(&tritium::Device::interpreter(), x.view())
        .unwrap()
        .mapv(f16::to_f32);
    assert_close(&compiled, &want, 2e-3, 1e-5, "compiled vs ndarray");
    assert_close(
        &compiled,
        &interpreted,
        1e-3,
        1e-6,
        "compiled vs interpreter",
    );
}

#[rstest]
fn activations_match_rust(#[values(1, 1000, 4099)] n: usize) {
    use tritium_kernels::activation::{quick_gelu, silu};
    let x = Array1::from_vec(random_f32(n, 12)).mapv(|v| v * 8.0);
    let gate = |v: f32, a: f32| (v as f64) / (1.0 + (-(a as f64) * v as f64).exp());
    let want_silu = x.mapv(|v| gate(v, 1.0) as f32);
    let want_gelu = x.mapv(|v| gate(v, 1.702) as f32);
    for device in devices_for(n) {
        let got = silu(&device, x.view()).unwrap();
        assert_close(&got, &want_silu, 1e-6, 1e-7, &format!("{device:?} silu"));
        let got = quick_gelu(&device, x.view()).unwrap();
        assert_close(
            &got,
            &want_gelu,
            1e-6,
            1e-7,
            &format!("{device:?} quick_gelu"),
        );
        // The exact GELU through erf (within a few ulps of f32).
        let got = tritium_kernels::activation::gelu(&device, x.view()).unwrap();
        let want = x.mapv(|v| {
            (0.5 * v as f64 * (1.0 + crate::common::erf_f64(v as f64 / 2f64.sqrt()))) as f32
        });
        assert_close(&got, &want, 1e-6, 1e-6, &format!("{device:?} gelu"));
        // f16 in, f32 inside, rounded once on the way out.
        let h = x.mapv(half::f16::from_f32);
        let got = silu(&device, h.view()).unwrap().mapv(f32::from);
        let want = h.mapv(|v| half::f16::from_f32(gate(v.to_f32(), 1.0) as f32).to_f32());
        assert_close(&got, &want, 1e-3, 1e-3, &format!("{device:?} silu f16"));
    }
}
