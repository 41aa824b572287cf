//! Tutorial 03: matmul with f32 accumulation, f32 and f16 inputs.

use crate::common::{assert_close, random_f32};
use half::f16;
use ndarray::Array2;
use rstest::rstest;
use tritium::Device;
use tritium_kernels::matmul::{matmul_2d, MatmulBlocks};

#[rstest]
fn matmul_f32(
    #[values((1, 1), (17, 33), (4096, 781))] mn: (usize, usize),
    #[values(1, 45)] k: usize,
) {
    let (m, n) = mn;
    let a = Array2::from_shape_vec((m, k), random_f32(m * k, 7)).unwrap();
    let b = Array2::from_shape_vec((k, n), random_f32(k * n, 8)).unwrap();
    let want = a.dot(&b);
    let blocks = MatmulBlocks::default();
    let compiled: Array2<f32> = matmul_2d(&Device::cpu(), a.view(), b.view(), blocks).unwrap();
    assert_close(&compiled, &want, 1e-5, 1e-5, "compiled vs ndarray");
    if m * n <= 17 * 33 {
        let interpreted: Array2<f32> =
            matmul_2d(&Device::interpreter(), a.view(), b.view(), blocks).unwrap();
        assert_close(
            &compiled,
            &interpreted,
            1e-5,
            1e-6,
            "compiled vs interpreter",
        );
    }
}

#[rstest]
fn matmul_f16_inputs_accumulate_in_f32(#[values((1, 1), (17, 33), (128, 96))] mn: (usize, usize)) {
    let (m, n, k) = (mn.0, mn.1, 70);
    let a = Array2::from_shape_vec((m, k), random_f32(m * k, 9))
        .unwrap()
        .mapv(f16::from_f32);
    let b = Array2::from_shape_vec((k, n), random_f32(k * n, 10))
        .unwrap()
        .mapv(f16::from_f32);
    let want = a.mapv(f16::to_f32).dot(&b.mapv(f16::to_f32));
    let blocks = MatmulBlocks {
        m: 32,
        n: 32,
        k: 16,
    };
    let compiled: Array2<f32> = matmul_2d(&Device::cpu(), a.view(), b.view(), blocks).unwrap();
    let interpreted: Array2<f32> =
        matmul_2d(&Device::interpreter(), a.view(), b.view(), blocks).unwrap();
    assert_close(&compiled, &want, 1e-5, 1e-5, "compiled vs ndarray");
    assert_close(
        &compiled,
        &interpreted,
        1e-5,
        1e-6,
        "compiled vs interpreter",
    );
}

#[test]
fn matmul_of_transposed_views_uses_strides() {
    let a = Array2::from_shape_vec((40, 30), random_f32(1200, 11)).unwrap();
    let b = Array2::from_shape_vec((20, 30), random_f32(600, 12)).unwrap();
    let want = a.dot(&b.t());
    let got: Array2<f32> =
        matmul_2d(&Device::cpu(), a.view(), b.t(), MatmulBlocks::default()).unwrap();
    assert_close(&got, &want, 1e-5, 1e-5, "a @ b.T");
}
