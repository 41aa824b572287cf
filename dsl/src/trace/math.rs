//! Triton's math functions that are compositions of IR ops: `clamp`, `sigmoid`,
//! `softmax`, `fdiv`, `div_rn`, `sqrt_rn`, `isnan`, `isinf`, `isfinite`. Like Triton's
//! (`triton/language/standard.py`, `math.py`), they trace to the ops they are made of, so
//! every backend and the fuzzer see those ops.

use super::lang::{
    abs, bitcast, cast, compare, exp, fail_with, max, maximum, minimum, sqrt, sum, where_, OptAxis,
    OptFlag,
};
use super::tile::{IntoOperand, Operand, Tile};
use crate::ir::{CmpPred, DType};

/// `min(max(x, lo), hi)` elementwise (Triton's `clamp`). Float max/min ignore NaN, so a
/// NaN `x` gives `lo`; with `propagate_nan = true` (Triton's `PropagateNan.ALL`) a NaN `x`
/// stays NaN. Behaviour for `lo > hi` is unspecified, as in Triton.
#[track_caller]
pub fn clamp(
    x: impl IntoOperand,
    lo: impl IntoOperand,
    hi: impl IntoOperand,
    propagate_nan: impl OptFlag,
) -> Tile {
    let x = x.into_operand();
    let r = minimum(maximum(x, lo), hi);
    if propagate_nan.flag() && r.dtype().is_float() {
        let x = super::lang::cast(x, r.dtype());
        where_(isnan(x), x, r)
    } else {
        r
    }
}

/// Triton's `maximum(a, b, propagate_nan)`: without `propagate_nan` (Triton's
/// `PropagateNan.NONE`, the default) a NaN operand gives the other one; with it
/// (`PropagateNan.ALL`) a NaN in either gives NaN.
#[track_caller]
pub fn maximum_with(a: impl IntoOperand, b: impl IntoOperand, propagate_nan: impl OptFlag) -> Tile {
    let (a, b) = (a.into_operand(), b.into_operand());
    with_nan(maximum(a, b), a, b, propagate_nan)
}

/// Triton's `minimum(a, b, propagate_nan)`, as [`maximum_with`].
#[track_caller]
pub fn minimum_with(a: impl IntoOperand, b: impl IntoOperand, propagate_nan: impl OptFlag) -> Tile {
    let (a, b) = (a.into_operand(), b.into_operand());
    with_nan(minimum(a, b), a, b, propagate_nan)
}

/// `r`, or NaN where `a` or `b` is one when `propagate_nan`.
#[track_caller]
fn with_nan(r: Tile, a: Operand, b: Operand, propagate_nan: impl OptFlag) -> Tile {
    if !propagate_nan.flag() || !r.dtype().is_float() {
        return r;
    }
    let (a, b) = (cast(a, r.dtype()), cast(b, r.dtype()));
    where_(isnan(a), a, where_(isnan(b), b, r))
}

/// Triton's `a // b` on integers: the quotient truncated toward zero (C's, and Rust's `/`);
/// floats are refused, as Triton refuses them.
#[track_caller]
pub fn floordiv(a: impl IntoOperand, b: impl IntoOperand) -> Tile {
    let loc = super::tile::caller_loc(std::panic::Location::caller());
    let (a, b) = (a.into_operand(), b.into_operand());
    let q = Tile(super::builder::with(|bl| {
        bl.binary(crate::ir::BinOp::Div, a, b, &loc)
    }));
    if !q.dtype().is_int() {
        return fail_with(
            q,
            format!(
                "`floordiv` (Triton's `//`) needs integers, got {}",
                q.dtype()
            ),
        );
    }
    q
}

/// `1 / (1 + exp(-x))` (Triton's `sigmoid`); integers compute in f32.
#[track_caller]
pub fn sigmoid(x: impl IntoOperand) -> Tile {
    let x = float(x);
    1.0 / (1.0 + exp(-x))
}

/// `exp(x - max) / sum(exp(x - max))` along `dim` (Triton's `softmax`; `dim` defaults to
/// 0, `keep_dims` keeps the reduced axis). `ieee_rounding` is accepted for Triton's
/// signature: division is always IEEE-rounded here.
#[track_caller]
pub fn softmax(
    x: Tile,
    dim: impl OptAxis,
    keep_dims: impl OptFlag,
    ieee_rounding: impl OptFlag,
) -> Tile {
    let _ = ieee_rounding.flag();
    let dim = dim.axis().unwrap_or(0);
    let keep = keep_dims.flag();
    let x = float(x);
    let z = x - max(x, dim, keep);
    let num = exp(z);
    num / sum(num, dim, keep)
}

/// `x / y` (Triton's `fdiv`; `ieee_rounding` is accepted and division is always IEEE-rounded).
#[track_caller]
pub fn fdiv(x: impl IntoOperand, y: impl IntoOperand, ieee_rounding: impl OptFlag) -> Tile {
    let _ = ieee_rounding.flag();
    div_rn(x, y)
}

/// `x / y` rounded to nearest even (Triton's `div_rn`): every target's float division is.
#[track_caller]
pub fn div_rn(x: impl IntoOperand, y: impl IntoOperand) -> Tile {
    let x = float(x);
    x / y
}

/// `sqrt(x)` rounded to nearest even (Triton's `sqrt_rn`): every target's `sqrt` is.
#[track_caller]
pub fn sqrt_rn(x: impl IntoOperand) -> Tile {
    sqrt(x)
}

/// Whether each element is NaN (a bool tile); floats only.
#[track_caller]
pub fn isnan(x: impl IntoOperand) -> Tile {
    let x = float_only("isnan", x);
    compare(x, CmpPred::Ne, x)
}

/// Whether each element is +inf or -inf; floats only.
#[track_caller]
pub fn isinf(x: impl IntoOperand) -> Tile {
    let x = float_only("isinf", x);
    compare(abs(x), CmpPred::Eq, f64::INFINITY)
}

/// Whether each element is neither infinite nor NaN; floats only.
#[track_caller]
pub fn isfinite(x: impl IntoOperand) -> Tile {
    let x = float_only("isfinite", x);
    compare(abs(x), CmpPred::Lt, f64::INFINITY)
}

/// Whether each element's sign bit is set (-0.0 and negative NaNs included); floats only.
#[track_caller]
pub fn signbit(x: impl IntoOperand) -> Tile {
    let x = float_only("signbit", x);
    let int = match x.dtype().bits() {
        16 => DType::I16,
        32 => DType::I32,
        _ => DType::I64,
    };
    compare(bitcast(x, int), CmpPred::Lt, 0)
}

/// `x` as a float tile: floats as they are, integers and literals converted to f32.
#[track_caller]
fn float(x: impl IntoOperand) -> Tile {
    let x = x.into_operand();
    match x {
        Operand::Tile(t) if t.dtype().is_float() => t,
        _ => super::lang::cast(x, DType::F32),
    }
}

/// `x` as a tile, which must hold floats; otherwise the trace fails naming `func`.
#[track_caller]
fn float_only(func: &str, x: impl IntoOperand) -> Tile {
    let x = x.into_operand();
    let t = match x {
        Operand::Tile(t) => t,
        _ => super::lang::cast(x, DType::F32),
    };
    let d = t.dtype();
    if d.is_float() {
        t
    } else {
        fail_with(t, format!("{func} needs floats, got {d}"))
    }
}

/// A histogram of the integer tile `x` into `num_bins` bins of width 1 starting at 0
/// (Triton's `histogram`): an i32 tile of `num_bins` counts. Values outside
/// `0..num_bins`, and lanes where `mask` is false, are not counted. Runs the shipped
/// `__builtin_histogram` over the flattened values.
#[track_caller]
pub fn histogram(
    x: Tile,
    num_bins: impl super::lang::ConstInt,
    mask: impl super::lang::OptOperand,
) -> Tile {
    let bins = num_bins.get();
    let d = x.dtype();
    if !d.is_int() || bins < 1 {
        let msg = format!(
            "histogram needs integers and at least one bin, got {} and {bins} bins",
            x.ty()
        );
        return fail_with(super::lang::zeros([bins.max(1) as usize], DType::I32), msg);
    }
    // i64 keeps every value of every integer dtype in or out of range as it was (u64
    // values past 2^63 become negative: out of range either way).
    let wide = super::lang::cast(super::lang::ravel(x), DType::I64);
    let values = match mask.opt() {
        Some(m) => {
            let m = super::lang::ravel(super::lang::broadcast_to(m, x.shape()));
            where_(m, wide, -1)
        }
        None => wide,
    };
    crate::custom::custom(
        "__builtin_histogram",
        (values,),
        super::lang::zeros([bins as usize], DType::I32),
    )
}

/// The error function (Triton's `erf`). f64 through `erf.rs`'s fits (within a few ulps);
/// f16, bf16 and f32 in f32 (`libm_f32.rs`): an odd polynomial below 0.5, else `1 − erfc`
/// with the f32 `erfc`'s fit `erfc(z) = t·e^(−z² + P(t))`, `t = 1/(1 + z/2)`. Measured
/// within 2 ulps of the exact value on every device (`tests/math_functions.rs`,
/// `tests/libm.rs`).
#[track_caller]
pub fn erf(x: impl IntoOperand) -> Tile {
    let x = float(x);
    let d = x.dtype();
    if d == DType::F64 {
        return super::erf::erf_f64(x);
    }
    cast(super::libm_f32::erf(cast(x, DType::F32)), d)
}
