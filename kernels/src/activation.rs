//! Elementwise activations from the math library: SiLU (`x · sigmoid(x)`), the sigmoid
//! form of GELU (`x · sigmoid(1.702 x)`, "quick GELU") and the exact GELU
//! (`x/2 · (1 + erf(x/√2))`), over any float dtype but f64 for GELU (f16/bf16 compute in
//! f32 and round once per op, as every Tritium op does).

use ndarray::{Array1, ArrayView1};
use tritium::prelude::*;

/// `out[i] = x[i] · sigmoid(ALPHA · x[i])` for `i < n`: SiLU for `ALPHA = 1`, quick GELU
/// for `ALPHA = 1.702`.
#[kernel]
pub fn sigmoid_gated<T: Float>(
    out: Ptr<T>,
    x: Ptr<T>,
    n: i32,
    alpha: f32,
    #[constexpr] BLOCK: usize,
) {
    let offs = program_id(0) * BLOCK as i32 + arange(0, BLOCK);
    let mask = offs < n;
    let v = load(x + offs, mask = mask).to(DType::F32);
    let y = v * sigmoid(alpha * v);
    store(out + offs, y.to(T::DTYPE), mask = mask);
}

/// Elements per program used by [`silu`] and [`quick_gelu`].
pub const ACTIVATION_BLOCK: usize = 1024;

fn gated<T: Float + Default>(
    device: &Device,
    x: ArrayView1<T>,
    alpha: f32,
) -> tritium::Result<Array1<T>> {
    let n = x.len();
    let mut out = Array1::from_elem(n, T::default());
    sigmoid_gated::launch(
        device,
        n.max(1).div_ceil(ACTIVATION_BLOCK),
        &mut out,
        x,
        n as i32,
        alpha,
        ACTIVATION_BLOCK,
    )?;
    Ok(out)
}

/// SiLU (swish): `x · sigmoid(x)`.
pub fn silu<T: Float + Default>(device: &Device, x: ArrayView1<T>) -> tritium::Result<Array1<T>> {
    gated(device, x, 1.0)
}

/// GELU in its sigmoid form: `x · sigmoid(1.702 x)`.
pub fn quick_gelu<T: Float + Default>(
    device: &Device,
    x: ArrayView1<T>,
) -> tritium::Result<Array1<T>> {
    gated(device, x, 1.702)
}

/// `out[i] = x[i]/2 · (1 + erf(x[i]/√2))` for `i < n`: the exact GELU.
#[kernel]
pub fn gelu_erf<T: Float>(out: Ptr<T>, x: Ptr<T>, n: i32, #[constexpr] BLOCK: usize) {
    let offs = program_id(0) * BLOCK as i32 + arange(0, BLOCK);
    let mask = offs < n;
    let v = load(x + offs, mask = mask).to(DType::F32);
    let y = v * 0.5 * (erf(v * std::f32::consts::FRAC_1_SQRT_2) + 1.0);
    store(out + offs, y.to(T::DTYPE), mask = mask);
}

/// The exact GELU, `x/2 · (1 + erf(x/√2))` (f16, bf16, f32).
pub fn gelu<T: Float + Default>(device: &Device, x: ArrayView1<T>) -> tritium::Result<Array1<T>> {
    let n = x.len();
    let mut out = Array1::from_elem(n, T::default());
    let grid = n.max(1).div_ceil(ACTIVATION_BLOCK);
    gelu_erf::launch(device, grid, &mut out, x, n as i32, ACTIVATION_BLOCK)?;
    Ok(out)
}
