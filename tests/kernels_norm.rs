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

/// RMSNorm's kernels as tritium-candle's op launches them, against plain Rust on every
/// device: `y` and `rstd`, then `dx` and each row's share of `dw`, then `dw` as their
/// column sums (rows not a multiple of `BLOCK_M`, columns not of `BLOCK_N`).
#[test]
fn rms_norm_kernels_match_plain_rust() {
    use tritium_kernels::rms_norm::{rms_norm_bwd, rms_norm_bwd_dw, rms_norm_fwd};
    let (rows, n, eps) = (37usize, 150usize, 1e-6f32);
    let x = Array2::from_shape_vec((rows, n), random_f32(rows * n, 41)).unwrap();
    let dy = Array2::from_shape_vec((rows, n), random_f32(rows * n, 42)).unwrap();
    let w = Array1::from(random_f32(n, 43));
    let rstd = x.map_axis(Axis(1), |r| 1.0 / (r.dot(&r) / n as f32 + eps).sqrt());
    let r2 = rstd.view().insert_axis(Axis(1));
    let y = &x * &r2 * &w;
    let dyw = &dy * &w;
    let c = (&dyw * &x).sum_axis(Axis(1)) / n as f32;
    let dx = &dyw * &r2 - &x * &(&r2 * &r2 * r2 * &c.insert_axis(Axis(1)));
    let dw_rows = &dy * &x * r2;
    let dw = dw_rows.sum_axis(Axis(0));
    let (ni, mi) = (n as i32, rows as i32);
    for device in crate::common::all_devices() {
        let what = format!("{device:?}");
        let (mut y_got, mut rstd_got) = (Array2::<f32>::zeros((rows, n)), Array1::zeros(rows));
        rms_norm_fwd::launch(
            &device,
            rows,
            &mut y_got,
            &mut rstd_got,
            &x,
            &w,
            ni,
            eps,
            256,
        )
        .unwrap();
        assert_close(&y_got, &y, 1e-5, 1e-5, &format!("y on {what}"));
        assert_close(&rstd_got, &rstd, 1e-5, 1e-5, &format!("rstd on {what}"));
        let (mut dx_got, mut dw_rows_got) = (Array2::zeros((rows, n)), Array2::zeros((rows, n)));
        rms_norm_bwd::launch(
            &device,
            rows,
            &mut dx_got,
            &mut dw_rows_got,
            &dy,
            &x,
            &w,
            &rstd_got,
            ni,
            256,
        )
        .unwrap();
        assert_close(&dx_got, &dx, 1e-4, 1e-5, &format!("dx on {what}"));
        assert_close(
            &dw_rows_got,
            &dw_rows,
            1e-5,
            1e-5,
            &format!("dw rows on {what}"),
        );
        let mut dw_got = Array1::<f32>::zeros(n);
        let grid = n.div_ceil(64);
        rms_norm_bwd_dw::launch(&device, grid, &mut dw_got, &dw_rows, mi, ni, 16, 64).unwrap();
        assert_close(&dw_got, &dw, 1e-5, 1e-4, &format!("dw on {what}"));
    }
}

/// Cross-entropy's kernels as tritium-candle's op launches them, against plain Rust on
/// every device: each row's `lse` and loss (rows `x_stride` apart, wider than a block,
/// ignored rows 0), their mean over the rows not ignored, and the logits' gradient for an
/// upstream gradient read from memory.
#[test]
fn cross_entropy_kernels_match_plain_rust() {
    use tritium_kernels::cross_entropy::{
        cross_entropy_bwd, cross_entropy_fwd, cross_entropy_mean,
    };
    let (n, v, stride, ignore) = (9usize, 70usize, 80usize, -100i64);
    let x = Array2::from_shape_vec((n, stride), random_f32(n * stride, 44)).unwrap();
    let targets: Vec<i64> = vec![3, ignore, 69, 0, 12, ignore, 40, 7, 1];
    let valid = targets.iter().filter(|&&t| t != ignore).count();
    let lse: Vec<f32> = (0..n)
        .map(|r| {
            let row = x.row(r);
            let m = row.iter().take(v).fold(f32::NEG_INFINITY, |a, &b| a.max(b));
            m + row.iter().take(v).map(|&e| (e - m).exp()).sum::<f32>().ln()
        })
        .collect();
    let ignored = |r: usize| targets[r] == ignore;
    let loss: Vec<f32> = (0..n)
        .map(|r| match ignored(r) {
            true => 0.0,
            false => lse[r] - x[[r, targets[r] as usize]],
        })
        .collect();
    let mean = loss.iter().sum::<f32>() / valid as f32;
    let g = 0.75f32;
    let dx = Array2::from_shape_fn((n, v), |(r, c)| match ignored(r) {
        true => 0.0,
        false => {
            let p = (x[[r, c]] - lse[r]).exp();
            (p - f32::from(c as i64 == targets[r])) * g / valid as f32
        }
    });
    for device in crate::common::all_devices() {
        let what = format!("{device:?}");
        let (mut loss_got, mut lse_got) = (vec![0f32; n], vec![0f32; n]);
        cross_entropy_fwd::launch(
            &device,
            n,
            &mut loss_got,
            &mut lse_got,
            &x,
            stride as i64,
            &targets,
            v as i32,
            ignore,
            32,
        )
        .unwrap();
        let close = |a: &[f32], b: &[f32], what: &str| {
            let (a, b) = (Array1::from(a.to_vec()), Array1::from(b.to_vec()));
            assert_close(&a, &b, 1e-5, 1e-5, what);
        };
        close(&loss_got, &loss, &format!("loss on {what}"));
        let mut mean_got = vec![0f32];
        let valid_f = valid as f32;
        cross_entropy_mean::launch(&device, 1, &mut mean_got, &loss_got, n as i32, valid_f, 4)
            .unwrap();
        close(&mean_got, &[mean], &format!("mean on {what}"));
        let mut dx_got = Array2::<f32>::zeros((n, v));
        cross_entropy_bwd::launch(
            &device,
            n,
            &mut dx_got,
            &x,
            stride as i64,
            &targets,
            &lse_got,
            &[g][..],
            1.0 / valid as f32,
            v as i32,
            ignore,
            32,
        )
        .unwrap();
        assert_close(&dx_got, &dx, 1e-5, 1e-6, &format!("dx on {what}"));
    }
}
