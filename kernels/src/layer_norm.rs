//! Triton tutorial 05: layer normalization, forward and backward.

use ndarray::{Array1, Array2, ArrayView1, ArrayView2, ArrayViewMut1, ArrayViewMut2};
use tritium::prelude::*;

/// `y = (x - mean) * rstd * w + b` per row; also writes each row's mean and rstd.
/// Loops over the row in `BLOCK`-wide chunks, accumulating in f32.
#[kernel]
pub fn layer_norm_fwd<T: Float>(
    x: Ptr<T>,
    y: Ptr<T>,
    w: Ptr<T>,
    b: Ptr<T>,
    mean: Ptr<f32>,
    rstd: Ptr<f32>,
    stride: i32,
    n: i32,
    eps: f32,
    #[constexpr] BLOCK: usize,
) {
    let row = program_id(0);
    let x_row = x + row.to(DType::I64) * stride;
    let y_row = y + row.to(DType::I64) * stride;
    let mut acc = zeros([BLOCK], DType::F32);
    for off in range(0, n, BLOCK as i32) {
        let cols = off + arange(0, BLOCK);
        acc += load(x_row + cols, mask = cols < n, other = 0.0).to(DType::F32);
    }
    let mu = sum(acc, 0) / n;
    let mut acc2 = zeros([BLOCK], DType::F32);
    for off in range(0, n, BLOCK as i32) {
        let cols = off + arange(0, BLOCK);
        let v = load(x_row + cols, mask = cols < n, other = 0.0).to(DType::F32);
        let d = where_(cols < n, v - mu, 0.0);
        acc2 += d * d;
    }
    let var = sum(acc2, 0) / n;
    let r = rsqrt(var + eps);
    store(mean + row, mu);
    store(rstd + row, r);
    for off in range(0, n, BLOCK as i32) {
        let cols = off + arange(0, BLOCK);
        let m = cols < n;
        let wv = load(w + cols, mask = m).to(DType::F32);
        let bv = load(b + cols, mask = m).to(DType::F32);
        let v = load(x_row + cols, mask = m, other = 0.0).to(DType::F32);
        store(y_row + cols, (v - mu) * r * wv + bv, mask = m);
    }
}

/// Backward, part 1: `dx` per row (one block holds the row: `BLOCK >= n`), and the
/// per-row contributions `dy * xhat` and `dy` to `dw` and `db` (f32, `rows × n`).
#[kernel]
pub fn layer_norm_bwd_dx<T: Float>(
    dx: Ptr<T>,
    dy: Ptr<T>,
    x: Ptr<T>,
    w: Ptr<T>,
    mean: Ptr<f32>,
    rstd: Ptr<f32>,
    dw_rows: Ptr<f32>,
    db_rows: Ptr<f32>,
    stride: i32,
    n: i32,
    #[constexpr] BLOCK: usize,
) {
    let row = program_id(0).to(DType::I64);
    let cols = arange(0, BLOCK);
    let m = cols < n;
    let off = row * stride + cols;
    let xv = load(x + off, mask = m, other = 0.0).to(DType::F32);
    let dyv = load(dy + off, mask = m, other = 0.0).to(DType::F32);
    let wv = load(w + cols, mask = m, other = 0.0).to(DType::F32);
    let mu = load(mean + row);
    let r = load(rstd + row);
    let xhat = where_(m, (xv - mu) * r, 0.0);
    let wdy = wv * dyv;
    let c1 = sum(xhat * wdy, 0) / n;
    let c2 = sum(wdy, 0) / n;
    let dxv = (wdy - (xhat * c1 + c2)) * r;
    store(dx + off, dxv, mask = m);
    store(dw_rows + row * n + cols, dyv * xhat, mask = m);
    store(db_rows + row * n + cols, dyv, mask = m);
}

/// Backward, part 2: column sums of the per-row contributions, `BLOCK_N` columns per
/// program, `BLOCK_M` rows at a time.
#[kernel]
pub fn layer_norm_bwd_dwdb<T: Float>(
    dw: Ptr<T>,
    db: Ptr<T>,
    dw_rows: Ptr<f32>,
    db_rows: Ptr<f32>,
    rows: i32,
    n: i32,
    #[constexpr] BLOCK_M: usize,
    #[constexpr] BLOCK_N: usize,
) {
    let cols = program_id(0) * BLOCK_N as i32 + arange(0, BLOCK_N);
    let mut acc_w = zeros([BLOCK_M, BLOCK_N], DType::F32);
    let mut acc_b = zeros([BLOCK_M, BLOCK_N], DType::F32);
    for r0 in range(0, rows, BLOCK_M as i32) {
        let rs = r0 + arange(0, BLOCK_M);
        let mask = (rs[(.., None)] < rows) & (cols[(None, ..)] < n);
        let offs = rs[(.., None)].to(DType::I64) * n + cols[(None, ..)];
        acc_w += load(dw_rows + offs, mask = mask, other = 0.0);
        acc_b += load(db_rows + offs, mask = mask, other = 0.0);
    }
    store(dw + cols, sum(acc_w, 0), mask = cols < n);
    store(db + cols, sum(acc_b, 0), mask = cols < n);
}

/// Outputs of [`layer_norm`].
pub struct LayerNormOut<T> {
    /// Normalized rows.
    pub y: Array2<T>,
    /// Row means.
    pub mean: Array1<f32>,
    /// Row reciprocal standard deviations.
    pub rstd: Array1<f32>,
}

/// Forward layer norm of every row of `x`.
pub fn layer_norm<T: Float + Default>(
    device: &Device,
    x: ArrayView2<T>,
    w: ArrayView1<T>,
    b: ArrayView1<T>,
    eps: f32,
) -> tritium::Result<LayerNormOut<T>> {
    let (rows, n) = x.dim();
    let mut y = Array2::from_elem((rows, n), T::default());
    let mut mean = Array1::zeros(rows);
    let mut rstd = Array1::zeros(rows);
    layer_norm_into(
        device,
        x,
        w,
        b,
        eps,
        LayerNormOutMut {
            y: y.view_mut(),
            mean: mean.view_mut(),
            rstd: rstd.view_mut(),
        },
    )?;
    Ok(LayerNormOut { y, mean, rstd })
}

/// Where [`layer_norm_into`] writes: `y` in standard (row-major) layout.
pub struct LayerNormOutMut<'a, T> {
    /// Normalized rows, same shape as `x`.
    pub y: ArrayViewMut2<'a, T>,
    /// Row means.
    pub mean: ArrayViewMut1<'a, f32>,
    /// Row reciprocal standard deviations.
    pub rstd: ArrayViewMut1<'a, f32>,
}

/// Forward layer norm of every row of `x` into preallocated outputs.
pub fn layer_norm_into<T: Float>(
    device: &Device,
    x: ArrayView2<T>,
    w: ArrayView1<T>,
    b: ArrayView1<T>,
    eps: f32,
    out: LayerNormOutMut<'_, T>,
) -> tritium::Result<()> {
    let (rows, n) = x.dim();
    let LayerNormOutMut { y, mean, rstd } = out;
    if y.dim() != (rows, n)
        || !y.is_standard_layout()
        || mean.len() != rows
        || rstd.len() != rows
        || w.len() != n
        || b.len() != n
    {
        return Err(tritium::Error::Launch {
            kernel: "layer_norm_fwd".into(),
            message: format!(
                "layer norm of a {rows}×{n} input needs a row-major {rows}×{n} output, {rows} means \
                 and rstds, and {n} weights and biases; got {:?}, {}, {}, {}, {}",
                y.dim(),
                mean.len(),
                rstd.len(),
                w.len(),
                b.len()
            ),
        });
    }
    let x = x.as_standard_layout();
    let block = next_power_of_2(n).min(1024);
    layer_norm_fwd::launch(
        device,
        rows.max(1),
        &x,
        y,
        w,
        b,
        mean,
        rstd,
        n as i32,
        n as i32,
        eps,
        block,
    )
}

/// Gradients of [`layer_norm`].
pub struct LayerNormGrads<T> {
    /// d loss / d x.
    pub dx: Array2<T>,
    /// d loss / d w.
    pub dw: Array1<T>,
    /// d loss / d b.
    pub db: Array1<T>,
}

/// Backward layer norm given the forward's `mean` and `rstd`.
pub fn layer_norm_backward<T: Float + Default>(
    device: &Device,
    dy: ArrayView2<T>,
    x: ArrayView2<T>,
    w: ArrayView1<T>,
    mean: ArrayView1<f32>,
    rstd: ArrayView1<f32>,
) -> tritium::Result<LayerNormGrads<T>> {
    let (rows, n) = x.dim();
    let (x, dy) = (x.as_standard_layout(), dy.as_standard_layout());
    let mut dx = Array2::from_elem((rows, n), T::default());
    let mut dw_rows = Array2::<f32>::zeros((rows, n));
    let mut db_rows = Array2::<f32>::zeros((rows, n));
    let block = next_power_of_2(n);
    layer_norm_bwd_dx::launch(
        device,
        rows.max(1),
        &mut dx,
        &dy,
        &x,
        w,
        mean,
        rstd,
        &mut dw_rows,
        &mut db_rows,
        n as i32,
        n as i32,
        block,
    )?;
    let mut dw = Array1::from_elem(n, T::default());
    let mut db = Array1::from_elem(n, T::default());
    let block_n = 32;
    layer_norm_bwd_dwdb::launch(
        device,
        cdiv(n.max(1), block_n),
        &mut dw,
        &mut db,
        &dw_rows,
        &db_rows,
        rows as i32,
        n as i32,
        16,
        block_n,
    )?;
    Ok(LayerNormGrads { dx, dw, db })
}
