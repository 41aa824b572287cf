//! Tutorial 05: layer norm forward and backward.

use crate::common::{assert_close, devices_for, random_f32};
use half::f16;
use ndarray::{Array1, Array2, Axis};
use rstest::rstest;
use tritium::Device;
use tritium_kernels::layer_norm::{layer_norm, layer_norm_backward};

const EPS: f32 = 1e-5;

struct Reference {
    y: Array2<f32>,
    mean: Array1<f32>,
    rstd: Array1<f32>,
    dx: Array2<f32>,
    dw: Array1<f32>,
    db: Array1<f32>,
}

fn reference(x: &Array2<f32>, w: &Array1<f32>, b: &Array1<f32>, dy: &Array2<f32>) -> Reference {
    let n = x.ncols() as f32;
    let mean = x.mean_axis(Axis(1)).unwrap();
    let centered = x - &mean.clone().insert_axis(Axis(1));
    let var = centered.mapv(|v| v * v).sum_axis(Axis(1)) / n;
    let rstd = var.mapv(|v| 1.0 / (v + EPS).sqrt());
    let xhat = &centered * &rstd.clone().insert_axis(Axis(1));
    let y = &xhat * w + b;
    let wdy = dy * w;
    let c1 = (&xhat * &wdy).sum_axis(Axis(1)) / n;
    let c2 = wdy.sum_axis(Axis(1)) / n;
    let dx = (&wdy - &(&xhat * &c1.insert_axis(Axis(1)) + &c2.insert_axis(Axis(1))))
        * &rstd.clone().insert_axis(Axis(1));
    let dw = (dy * &xhat).sum_axis(Axis(0));
    let db = dy.sum_axis(Axis(0));
    Reference {
        y,
        mean,
        rstd,
        dx,
        dw,
        db,
    }
}

#[rstest]
fn layer_norm_f32(#[values((1, 1), (17, 33), (4096, 781), (8, 2048))] shape: (usize, usize)) {
    let (rows, n) = shape;
    let x = Array2::from_shape_vec(shape, random_f32(rows * n, 13)).unwrap() * 3.0 + 0.5;
    let w = Array1::from(random_f32(n, 14));
    let b = Array1::from(random_f32(n, 15));
    let dy = Array2::from_shape_vec(shape, random_f32(rows * n, 16)).unwrap();
    let r = reference(&x, &w, &b, &dy);
    for d in devices_for(rows * n) {
        let f = layer_norm(&d, x.view(), w.view(), b.view(), EPS).unwrap();
        assert_close(&f.y, &r.y, 1e-4, 1e-4, "y");
        assert_close(&f.mean, &r.mean, 1e-4, 1e-5, "mean");
        assert_close(&f.rstd, &r.rstd, 1e-4, 1e-4, "rstd");
        let g = layer_norm_backward(
            &d,
            dy.view(),
            x.view(),
            w.view(),
            f.mean.view(),
            f.rstd.view(),
        )
        .unwrap();
        assert_close(&g.dx, &r.dx, 1e-3, 1e-4, "dx");
        assert_close(&g.dw, &r.dw, 1e-3, 1e-3, "dw");
        assert_close(&g.db, &r.db, 1e-3, 1e-3, "db");
    }
}

#[rstest]
fn layer_norm_f16(#[values((1, 1), (17, 33), (256, 781))] shape: (usize, usize)) {
    let (rows, n) = shape;
    let x = (Array2::from_shape_vec(shape, random_f32(rows * n, 17)).unwrap() * 3.0)
        .mapv(f16::from_f32);
    let w = Array1::from(random_f32(n, 18)).mapv(f16::from_f32);
    let b = Array1::from(random_f32(n, 19)).mapv(f16::from_f32);
    let dy = Array2::from_shape_vec(shape, random_f32(rows * n, 20))
        .unwrap()
        .mapv(f16::from_f32);
    let r = reference(
        &x.mapv(f16::to_f32),
        &w.mapv(f16::to_f32),
        &b.mapv(f16::to_f32),
        &dy.mapv(f16::to_f32),
    );
    let compiled = layer_norm(&Device::cpu(), x.view(), w.view(), b.view(), EPS).unwrap();
    let interpreted =
        layer_norm(&Device::interpreter(), x.view(), w.view(), b.view(), EPS).unwrap();
    assert_close(
        &compiled.y.mapv(f16::to_f32),
        &r.y,
        1e-2,
        1e-2,
        "y vs ndarray",
    );
    assert_close(
        &compiled.y.mapv(f16::to_f32),
        &interpreted.y.mapv(f16::to_f32),
        1e-2,
        2e-3,
        "y vs interpreter",
    );
    let g = layer_norm_backward(
        &Device::cpu(),
        dy.view(),
        x.view(),
        w.view(),
        compiled.mean.view(),
        compiled.rstd.view(),
    )
    .unwrap();
    assert_close(&g.dx.mapv(f16::to_f32), &r.dx, 2e-2, 2e-2, "dx vs ndarray");
    assert_close(&g.db.mapv(f16::to_f32), &r.db, 1e-2, 5e-2, "db vs ndarray");
}

/// Rows longer than the block walk it in a loop (`off + arange(0, BLOCK)`): in the copy
/// where the mask is all true the row's elements are read as runs of vectors, not gathered
/// lane by lane (a gather per 8 lanes made full rows slower than partial ones).
#[test]
fn layer_norm_reads_full_blocks_as_vectors() {
    use tritium_kernels::layer_norm::layer_norm_fwd;
    let (rows, n) = (4, 2048);
    let x = Array2::from_shape_vec((rows, n), random_f32(rows * n, 17)).unwrap();
    let w = Array1::from(random_f32(n, 18));
    let b = Array1::from(random_f32(n, 19));
    let (mut y, mut mean, mut rstd) = (
        Array2::<f32>::zeros((rows, n)),
        Array1::<f32>::zeros(rows),
        Array1::<f32>::zeros(rows),
    );
    let dumps = crate::common::dumps_of("layer-norm-runs", |options| {
        layer_norm_fwd::launch_with(
            &Device::cpu(),
            rows,
            options,
            x.view(),
            &mut y,
            w.view(),
            b.view(),
            &mut mean,
            &mut rstd,
            n as i32,
            n as i32,
            EPS,
            1024,
        )
        .unwrap()
    });
    let r = reference(&x, &w, &b, &Array2::zeros((rows, n)));
    assert_close(&y, &r.y, 1e-4, 1e-4, "y");
    assert!(
        !dumps.get("opt.ll").contains("masked.gather"),
        "a block of the row is gathered"
    );
}
