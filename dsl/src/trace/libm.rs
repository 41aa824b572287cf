//! Triton's `tl.math` / `tl.extra.libdevice` functions beyond the IR's own unary ops, as
//! compositions of IR ops (like `math.rs`): one implementation for the interpreter, the
//! CPU, the emulator and CUDA, which the fuzzer covers through the ops it traces to.
//!
//! f32, f16 and bf16 arguments are computed with f32 algorithms (`libm_f32.rs`: f32
//! arithmetic only, so GPUs run them at f32 speed and the CPU vectorizes them), within 2
//! ulps of the exact value (`lgamma` near its zeros on the negative axis: within 2^-22
//! absolute, as a difference of two values near 1 kept in two f32 parts); f16 and bf16
//! are converted to f32 and the result rounded once more. f64 arguments use f64
//! algorithms (a few ulps; `pow` loses more near overflow).
//! Exact functions (`copysign`, `nextafter`, `ldexp`, `frexp`, `fmod`, `remainder`) work
//! on the bits or with exact operations in the argument's own dtype. `tests/libm.rs`
//! measures every function in ulps on every device; the README's table lists the bounds.
//!
//! Special values follow C99 Annex F (`atan2(±0, -0) = ±π`, `pow(x, ±0) = 1` even for a
//! NaN `x`, `hypot(±inf, NaN) = +inf`, …).

use super::lang::{
    abs, bitcast, cast, compare, exp, floor, fma, log, maximum, minimum, sqrt, where_,
};
use super::libm_f32 as f32m;
use super::math::{isinf, isnan, signbit};
use super::shape::full_like;
use super::tile::{IntoOperand, Operand, Tile};
use crate::ir::{CmpPred, DType};

use std::f64::consts::{FRAC_PI_2, LN_2, PI};

/// `x` as a float tile: floats as they are, integers and literals as f32 (Triton's math
/// functions convert integers).
#[track_caller]
fn float(x: impl IntoOperand) -> Tile {
    match x.into_operand() {
        Operand::Tile(t) if t.dtype().is_float() => t,
        x => cast(x, DType::F32),
    }
}

/// `wide(x)` for f64 `x`; `narrow` of `x` converted to f32 (`libm_f32.rs`) for f32, f16
/// and bf16, rounded back to `x`'s dtype.
#[track_caller]
fn by_width(
    x: impl IntoOperand,
    wide: impl FnOnce(Tile) -> Tile,
    narrow: impl FnOnce(Tile) -> Tile,
) -> Tile {
    let x = float(x);
    let d = x.dtype();
    if d == DType::F64 {
        return wide(x);
    }
    cast(narrow(cast(x, DType::F32)), d)
}

/// [`by_width`] for two arguments (`y` converted to `x`'s dtype first).
#[track_caller]
fn by_width_2(
    x: impl IntoOperand,
    y: impl IntoOperand,
    wide: impl FnOnce(Tile, Tile) -> Tile,
    narrow: impl FnOnce(Tile, Tile) -> Tile,
) -> Tile {
    let x = float(x);
    let d = x.dtype();
    let y = cast(y, d);
    if d == DType::F64 {
        return wide(x, y);
    }
    cast(narrow(cast(x, DType::F32), cast(y, DType::F32)), d)
}

/// `c[0]·xⁿ + … + c[n]` by Horner's rule with fused multiply-adds (`c` highest degree
/// first), a tile of `x`'s shape.
pub(super) fn horner(x: Tile, c: &[f64]) -> Tile {
    let mut p = x * 0.0 + c[0];
    for k in &c[1..] {
        p = fma(p, x, *k);
    }
    p
}

pub(super) fn lt(a: Tile, b: impl IntoOperand) -> Tile {
    compare(a, CmpPred::Lt, b)
}
pub(super) fn gt(a: Tile, b: impl IntoOperand) -> Tile {
    compare(a, CmpPred::Gt, b)
}
pub(super) fn eq(a: Tile, b: impl IntoOperand) -> Tile {
    compare(a, CmpPred::Eq, b)
}

/// The unsigned integer dtype of `d`'s bits, and the position of its sign bit.
fn bits_of(d: DType) -> (DType, u32) {
    match d.bits() {
        16 => (DType::U16, 15),
        32 => (DType::U32, 31),
        _ => (DType::U64, 63),
    }
}

// ---- exact functions ---------------------------------------------------------------------

/// `|x|` with the sign of `y` (libdevice's `copysign`), bit-exact in `x`'s dtype.
#[track_caller]
pub fn copysign(x: impl IntoOperand, y: impl IntoOperand) -> Tile {
    let x = float(x);
    let d = x.dtype();
    let (u, s) = bits_of(d);
    let sign = 1u64 << s;
    let xb = bitcast(x, u);
    let yb = bitcast(cast(y, d), u);
    bitcast((xb & (sign - 1)) | (yb & sign), d)
}

/// The next representable value after `x` toward `y` (C's `nextafter`), in `x`'s dtype:
/// `y` when they are equal, NaN when either is, the smallest subnormal with `y`'s sign
/// after ±0.
#[track_caller]
pub fn nextafter(x: impl IntoOperand, y: impl IntoOperand) -> Tile {
    let x = float(x);
    let d = x.dtype();
    let y = cast(y, d);
    let (u, _) = bits_of(d);
    let xb = bitcast(x, u);
    let up = compare(lt(x, y), CmpPred::Eq, gt(x, 0.0));
    let step = where_(up, xb + 1u64, xb - 1u64);
    let tiny = copysign(bitcast(super::shape::full_like(xb, 1u64), d), y);
    let r = where_(eq(x, 0.0), tiny, bitcast(step, d));
    let r = where_(eq(x, y), y, r);
    where_(isnan(x) | isnan(y), x + y, r)
}

/// `x · 2^n` (libdevice's `ldexp`; `n` an integer), rounded once: exact unless the result
/// is subnormal or overflows.
#[track_caller]
pub fn ldexp(x: impl IntoOperand, n: impl IntoOperand) -> Tile {
    let x = float(x);
    let d = x.dtype();
    let n = cast(n, DType::I32);
    if d != DType::F64 {
        // Exact in f32 for f16 and bf16 values down to far below their own subnormals;
        // one rounding back.
        return cast(f32m::ldexp(cast(x, DType::F32), n), d);
    }
    // As C libraries do: scale in steps that keep every intermediate normal, so that only
    // the last multiplication rounds.
    let n = minimum(maximum(n, -2200), 2200);
    let mut y = x;
    let mut n = n;
    for _ in 0..2 {
        let big = gt(n, 1023);
        y = where_(big, y * 2f64.powi(1023), y);
        n = where_(big, n - 1023, n);
        let small = lt(n, -1022);
        y = where_(small, y * 2f64.powi(-969), y);
        n = where_(small, n + 969, n);
    }
    y * pow2(minimum(maximum(n, -1022), 1023))
}

/// `2^n` as f64 for i32 `n` in `[-1022, 1023]`, from its bits.
fn pow2(n: Tile) -> Tile {
    let e = cast(n + 1023, DType::U64) << 52u64;
    bitcast(e, DType::F64)
}

/// `(m, e)` with `x = m · 2^e` and `0.5 ≤ |m| < 1` (C's `frexp`; libdevice's
/// `frexp`): `m` in `x`'s dtype, `e` i32. Zero, infinities and NaN give `(x, 0)`.
#[track_caller]
pub fn frexp(x: impl IntoOperand) -> (Tile, Tile) {
    let x = float(x);
    let d = x.dtype();
    // f16/bf16 values are f32 values, and their mantissa is exact in their own dtype.
    let w = if d == DType::F64 {
        x
    } else {
        cast(x, DType::F32)
    };
    let (u, mant, bias, scale) = if d == DType::F64 {
        (DType::U64, 52u64, 1022i64, 64)
    } else {
        (DType::U32, 23u64, 126i64, 32)
    };
    let emask: u64 = if d == DType::F64 { 0x7ff } else { 0xff };
    let sub = lt(
        abs(w),
        2f64.powi(if d == DType::F64 { -1022 } else { -126 }),
    );
    let scaled = where_(sub, w * 2f64.powi(scale), w);
    let b = bitcast(scaled, u);
    let raw = cast((b >> mant) & emask, DType::I32);
    let e = raw - bias as i32 - where_(sub, scale, 0);
    let width = if d == DType::F64 {
        u64::MAX
    } else {
        u64::from(u32::MAX)
    };
    let mb = (b & (!(emask << mant) & width)) | ((bias as u64) << mant);
    let m = bitcast(mb, w.dtype());
    let special = eq(x, 0.0) | isinf(x) | isnan(x);
    (cast(where_(special, w, m), d), where_(special, 0, e))
}

/// `x - trunc(x / y) · y`, exactly (C's `fmod`; libdevice's `fmod`): the IR's float `%`.
#[track_caller]
pub fn fmod(x: impl IntoOperand, y: impl IntoOperand) -> Tile {
    let x = float(x);
    let y = cast(y, x.dtype());
    x % y
}

/// `x - n · y` with `n` the integer nearest `x / y`, ties to even, exactly (C's
/// `remainder`): from `fmod(x, 2|y|)` with exact subtractions.
#[track_caller]
pub fn remainder(x: impl IntoOperand, y: impl IntoOperand) -> Tile {
    let x = float(x);
    let d = x.dtype();
    let a = abs(cast(y, d));
    // |r| < 2a (2a overflowing to inf leaves r = x, which then is below 2a anyway).
    let r = x % (a + a);
    let s = abs(r);
    // s in (a/2, 3a/2): s - a; s in [3a/2, 2a): s - 2a (ties go to the even quotient); both
    // subtractions are exact (Sterbenz), and `s - a - a` never overflows.
    let half = a * 0.5;
    let mid = gt(s, half) & lt(s, a + half);
    let high = compare(s, CmpPred::Ge, a + half);
    let t = where_(mid, s - a, where_(high, s - a - a, s));
    // t may be negative: r's sign multiplies it (a zero result keeps x's sign).
    where_(signbit(r), -t, t)
}

// ---- exponentials and logarithms (f64 cores) ---------------------------------------------

/// e^x − 1 in f64, accurate near 0 (Kahan: `(u − 1) · x / log u` with `u = e^x`).
fn expm1_f64(x: Tile) -> Tile {
    let u = exp(x);
    let um1 = u - 1.0;
    // x / log u first: (u − 1) · x overflows near the top of the range.
    let r = um1 * (x / log(u));
    let r = where_(eq(um1, -1.0), um1, r);
    let r = where_(isinf(u), u, r);
    where_(eq(u, 1.0), x, r)
}

/// log(1 + x) in f64, accurate near 0 (Kahan: `log u · x / (u − 1)` with `u = 1 + x`).
fn log1p_f64(x: Tile) -> Tile {
    let u = x + 1.0;
    let r = log(u) * (x / (u - 1.0));
    let r = where_(isinf(u) | eq(u, 0.0), log(u), r);
    where_(eq(u, 1.0), x, r)
}

/// `(hi, lo)` of a constant: `hi` is it rounded to f64, `lo` the next 53 bits.
const LN10: (f64, f64) = (std::f64::consts::LN_10, -2.170_756_223_382_249_4e-16);
const LOG10_E: (f64, f64) = (std::f64::consts::LOG10_E, 1.098_319_650_216_765e-17);
const PI_2: (f64, f64) = (FRAC_PI_2, 6.123_233_995_736_766e-17);
const PI_1: (f64, f64) = (PI, 1.224_646_799_147_353_2e-16);
const PI_6: (f64, f64) = (std::f64::consts::FRAC_PI_6, -5.360_408_832_255_455e-17);

/// `x · c` for a two-part constant `c`, with the product's rounding error folded in.
fn mul_hi_lo(x: Tile, c: (f64, f64)) -> (Tile, Tile) {
    let p = x * c.0;
    let e = fma(x, c.0, -p) + x * c.1;
    (p, e)
}

/// `10^x` (libdevice's `exp10`): `e^(x·ln 10)` with the product's error corrected.
#[track_caller]
pub fn exp10(x: impl IntoOperand) -> Tile {
    by_width(
        x,
        |x| {
            let (p, e) = mul_hi_lo(x, LN10);
            let r = exp(p);
            where_(isinf(r) | eq(r, 0.0), r, fma(r, e, r))
        },
        f32m::exp10,
    )
}

/// `e^x − 1`, accurate near 0 (libdevice's `expm1`).
#[track_caller]
pub fn expm1(x: impl IntoOperand) -> Tile {
    by_width(x, expm1_f64, f32m::expm1)
}

/// `log(1 + x)`, accurate near 0 (libdevice's `log1p`).
#[track_caller]
pub fn log1p(x: impl IntoOperand) -> Tile {
    by_width(x, log1p_f64, f32m::log1p)
}

/// Base-10 logarithm (libdevice's `log10`).
#[track_caller]
pub fn log10(x: impl IntoOperand) -> Tile {
    by_width(
        x,
        |x| {
            let l = log(x);
            let (p, e) = mul_hi_lo(l, LOG10_E);
            where_(isinf(l) | isnan(l), l, p + e)
        },
        f32m::log10,
    )
}

/// Cube root (libdevice's `cbrt`): `e^(log|x| / 3)` refined by a Newton step.
#[track_caller]
pub fn cbrt(x: impl IntoOperand) -> Tile {
    by_width(
        x,
        |x| {
            let a = abs(x);
            // Tiny arguments are scaled by 2^300 (the root by 2^100), so that the Newton
            // step's residual is not computed among subnormals.
            let tiny = lt(a, 2f64.powi(-900));
            let s = where_(tiny, a * 2f64.powi(300), a);
            let y = exp(log(s) * (1.0 / 3.0));
            let y2 = y * y;
            let y = y - fma(y2, y, -s) / (y2 * 3.0);
            let y = where_(tiny, y * 2f64.powi(-100), y);
            let y = where_(eq(a, 0.0) | isinf(a) | isnan(a), a, y);
            copysign(y, x)
        },
        f32m::cbrt,
    )
}

/// `sqrt(x² + y²)` without undue overflow (libdevice's `hypot`); an infinite argument
/// gives +inf even when the other is NaN.
#[track_caller]
pub fn hypot(x: impl IntoOperand, y: impl IntoOperand) -> Tile {
    by_width_2(
        x,
        y,
        |x, y| {
            let (ax, ay) = (abs(x), abs(y));
            let m = maximum(ax, ay);
            let n = minimum(ax, ay);
            let r = n / m;
            let h = m * sqrt(fma(r, r, 1.0));
            let h = where_(eq(m, 0.0), m, h);
            let h = where_(isnan(x) | isnan(y), x + y, h);
            where_(isinf(x) | isinf(y), f64::INFINITY, h)
        },
        f32m::hypot,
    )
}

/// `log a` of f64 `a ≥ 0` as `hi + lo`, to about 2^-58 relative: `a = m · 2^k` with `m`
/// in `[√½, √2)`, `k · ln 2` from a split constant (`k · LN2_HI` is exact) and `log m`,
/// whose error is small since `|log m| < 0.35`. `pow` needs it: an error `ε` in `log x`
/// is an error `y·ε` in `x^y`.
fn log_hi_lo(a: Tile) -> (Tile, Tile) {
    const LN2_HI: f64 = 6.931_471_803_691_238e-1;
    const LN2_LO: f64 = 1.908_214_929_270_587_7e-10;
    let (m, k) = frexp(a);
    let low = lt(m, std::f64::consts::FRAC_1_SQRT_2);
    let m = where_(low, m * 2.0, m);
    let k = cast(where_(low, k - 1, k), DType::F64);
    let lm = log(m);
    let kh = k * LN2_HI;
    // Fast2Sum (|kh| ≥ |lm| whenever k ≠ 0; for k = 0 the sum is exact anyway).
    let hi = kh + lm;
    let lo = (lm - (hi - kh)) + k * LN2_LO;
    // Renormalized (Fast2Sum): `k · LN2_LO` is up to 1e-7, far above an ulp of `hi`, and
    // callers use `lo` to first order only.
    let (hi, lo) = {
        let s = hi + lo;
        (s, lo - (s - hi))
    };
    let special = eq(a, 0.0) | isinf(a) | isnan(a);
    (where_(special, log(a), hi), where_(special, 0.0, lo))
}

/// Whether a float is an integer.
fn is_integer(y: Tile) -> Tile {
    eq(floor(y), y)
}

/// `x^y` for float `y` (libdevice's `pow`; an integer `y` is converted, as `powi`), with
/// C99's special cases: `pow(x, ±0) = 1`, `pow(1, y) = 1`, `pow(-1, ±inf) = 1`, NaN for a
/// negative finite `x` and a finite non-integer `y`, odd integer powers keep `x`'s sign.
#[track_caller]
pub fn pow(x: impl IntoOperand, y: impl IntoOperand) -> Tile {
    by_width_2(
        x,
        y,
        |x, y| {
            let ax = abs(x);
            let (l, l_lo) = log_hi_lo(ax);
            let t = y * l;
            let e = fma(y, l, -t) + y * l_lo;
            let r = exp(t);
            let r = where_(isinf(r) | eq(r, 0.0) | isnan(e), r, fma(r, e, r));
            pow_special_cases(x, y, r, 2f64.powi(53))
        },
        f32m::pow,
    )
}

/// `|x|^y` given as `r` with `pow`'s sign and special cases applied; every float from
/// `even_from` on (2^53 for f64, 2^24 for f32) is an even integer.
pub(super) fn pow_special_cases(x: Tile, y: Tile, r: Tile, even_from: f64) -> Tile {
    // Odd integers: y is an integer whose half is not.
    let odd = is_integer(y) & !is_integer(y * 0.5) & lt(abs(y), even_from);
    let neg = signbit(x);
    let r = where_(neg & odd, -r, r);
    let bad = neg & !isinf(x) & !is_integer(y) & !isinf(y) & !eq(x, 0.0);
    let r = where_(bad, f64::NAN, r);
    let one = eq(abs(x), 1.0) & isinf(y);
    where_(eq(y, 0.0) | eq(x, 1.0) | one, 1.0, r)
}

// ---- hyperbolic functions ----------------------------------------------------------------

/// Hyperbolic tangent (libdevice's `tanh`): `t / (t + 2)` with `t = expm1(2|x|)`.
#[track_caller]
pub fn tanh(x: impl IntoOperand) -> Tile {
    by_width(
        x,
        |x| {
            let t = expm1_f64(abs(x) * 2.0);
            let r = t / (t + 2.0);
            let r = where_(gt(abs(x), 22.0), 1.0, r);
            copysign(r, x)
        },
        f32m::tanh,
    )
}

/// Hyperbolic sine (libdevice's `sinh`).
#[track_caller]
pub fn sinh(x: impl IntoOperand) -> Tile {
    by_width(
        x,
        |x| {
            let a = abs(x);
            let t = expm1_f64(a);
            let r = (t + t / (t + 1.0)) * 0.5;
            // e^a overflows before sinh does: e^(a − ln 2) is sinh there.
            let r = where_(gt(a, 709.0), exp(a - LN_2), r);
            copysign(r, x)
        },
        f32m::sinh,
    )
}

/// Hyperbolic cosine (libdevice's `cosh`).
#[track_caller]
pub fn cosh(x: impl IntoOperand) -> Tile {
    by_width(
        x,
        |x| {
            let a = abs(x);
            let e = exp(a);
            let r = (e + 1.0 / e) * 0.5;
            where_(gt(a, 709.0), exp(a - LN_2), r)
        },
        f32m::cosh,
    )
}

/// Inverse hyperbolic sine (libdevice's `asinh`).
#[track_caller]
pub fn asinh(x: impl IntoOperand) -> Tile {
    by_width(
        x,
        |x| {
            let a = abs(x);
            let a2 = a * a;
            let r = log1p_f64(a + a2 / (sqrt(a2 + 1.0) + 1.0));
            let r = where_(gt(a, 2f64.powi(28)), log(a) + LN_2, r);
            copysign(r, x)
        },
        f32m::asinh,
    )
}

/// Inverse hyperbolic cosine (libdevice's `acosh`); NaN below 1.
#[track_caller]
pub fn acosh(x: impl IntoOperand) -> Tile {
    by_width(
        x,
        |x| {
            let t = x - 1.0;
            let near = log1p_f64(t + sqrt(fma(t, t, t * 2.0)));
            let far = log(x * 2.0 - 1.0 / (x + sqrt(fma(x, x, -1.0))));
            let r = where_(lt(x, 2.0), near, far);
            where_(gt(x, 2f64.powi(28)), log(x) + LN_2, r)
        },
        f32m::acosh,
    )
}

/// Inverse hyperbolic tangent (libdevice's `atanh`); ±inf at ±1, NaN beyond.
#[track_caller]
pub fn atanh(x: impl IntoOperand) -> Tile {
    by_width(
        x,
        |x| {
            let a = abs(x);
            let r = log1p_f64(a * 2.0 / (1.0 - a)) * 0.5;
            copysign(r, x)
        },
        f32m::atanh,
    )
}

// ---- inverse trigonometric functions -----------------------------------------------------

/// `c − t` for a two-part constant `c`.
fn minus_from(c: (f64, f64), t: Tile) -> Tile {
    (t * -1.0 + c.0) + c.1
}

/// atan of f64 `a` in `[0, ∞]`: `1/a` above 1, then `π/6 + atan((a√3 − 1)/(a + √3))`
/// above tan(π/12), then the odd Taylor series (15 terms, below 2^-60 relative).
fn atan_nonneg(a: Tile) -> Tile {
    let inv = gt(a, 1.0);
    let a = where_(inv, 1.0 / a, a);
    let sqrt3 = 3f64.sqrt();
    let big = gt(a, 0.267_949_192_431_122_7);
    let t = where_(big, fma(a, sqrt3, -1.0) / (a + sqrt3), a);
    let z = t * t;
    // Σ (−1)^k z^k / (2k + 1), k ≤ 14, by Horner's rule.
    let coef = |k: i32| if k % 2 == 0 { 1.0 } else { -1.0 } / f64::from(2 * k + 1);
    let p = horner(z, &(0..15).rev().map(coef).collect::<Vec<_>>());
    let s = t * p;
    let s = where_(big, (s + PI_6.1) + PI_6.0, s);
    where_(inv, minus_from(PI_2, s), s)
}

/// Arc tangent (libdevice's `atan`).
#[track_caller]
pub fn atan(x: impl IntoOperand) -> Tile {
    by_width(x, |x| copysign(atan_nonneg(abs(x)), x), f32m::atan)
}

/// atan2 of f64 tiles (C99's special cases; see [`atan2`]).
fn atan2_f64(y: Tile, x: Tile) -> Tile {
    let (ax, ay) = (abs(x), abs(y));
    let mx = maximum(ax, ay);
    let mn = minimum(ax, ay);
    let r = mn / mx;
    let r = where_(isinf(ax) & isinf(ay), 1.0, r);
    let r = where_(eq(mx, 0.0), mx, r);
    let a = atan_nonneg(r);
    let a = where_(gt(ay, ax), minus_from(PI_2, a), a);
    let a = where_(signbit(x), minus_from(PI_1, a), a);
    let a = copysign(a, y);
    where_(isnan(x) | isnan(y), x + y, a)
}

/// The angle of `(x, y)` in `[−π, π]` (libdevice's `atan2(y, x)`), with C99's special
/// cases (`atan2(±0, −0) = ±π`, `atan2(±inf, ±inf) = ±π/4` or `±3π/4`).
#[track_caller]
pub fn atan2(y: impl IntoOperand, x: impl IntoOperand) -> Tile {
    by_width_2(y, x, atan2_f64, f32m::atan2)
}

/// Arc sine (libdevice's `asin`): `atan2(x, sqrt((1 − x)(1 + x)))`; NaN beyond ±1.
#[track_caller]
pub fn asin(x: impl IntoOperand) -> Tile {
    by_width(x, |x| atan2_f64(x, sqrt((1.0 - x) * (x + 1.0))), f32m::asin)
}

/// Arc cosine (libdevice's `acos`): `atan2(sqrt((1 − x)(1 + x)), x)`; NaN beyond ±1.
#[track_caller]
pub fn acos(x: impl IntoOperand) -> Tile {
    by_width(x, |x| atan2_f64(sqrt((1.0 - x) * (x + 1.0)), x), f32m::acos)
}

/// The complementary error function `1 − erf(x)` (libdevice's `erfc`), accurate in the
/// tail where `1 − erf` would cancel: f64 from `erf.rs`'s fits, narrower floats from
/// `libm_f32.rs`'s.
#[track_caller]
pub fn erfc(x: impl IntoOperand) -> Tile {
    by_width(x, super::erf::erfc_f64, f32m::erfc)
}

// ---- gamma functions and erfinv ------------------------------------------------------------

/// Γ(y) for f64 `y ≥ ½` as `(e^hi · (1 + lo), S, P)` with `Γ(y) = e^hi (1 + lo) · e^S ·
/// √(2π) / P`: `y` is first raised past 10 by the recurrence `Γ(y) = Γ(y + n) / (y (y+1) …)`
/// (`P` the product, at most 10 factors), then Stirling's series for `s = y + n`: `hi + lo`
/// is `(s − ½) log s − s` with the roundings of the product and the difference kept in
/// `lo`, and `S = Σ B₂ₖ / (2k (2k−1) s^(2k−1))` to the s^-13 term (the next is below 2^-56
/// for s ≥ 10).
fn stirling(y: Tile) -> (Tile, Tile, Tile, Tile) {
    let mut prod = y * 0.0 + 1.0;
    let mut s = y;
    for _ in 0..10 {
        let need = lt(s, 10.0);
        prod = where_(need, prod * s, prod);
        s = where_(need, s + 1.0, s);
    }
    let (l, l_lo) = log_hi_lo(s);
    let w = s - 0.5;
    let p = w * l;
    // TwoSum(p, −s).
    let hi = p - s;
    let b = hi - p;
    let err = (p - (hi - b)) + (-s - b);
    let lo = err + (fma(w, l, -p) + w * l_lo);
    let r = 1.0 / s;
    let r2 = r * r;
    // Highest degree first: 1/156 r¹² … 1/12.
    let series = horner(
        r2,
        &[
            1.0 / 156.0,
            -691.0 / 360_360.0,
            1.0 / 1188.0,
            -1.0 / 1680.0,
            1.0 / 1260.0,
            -1.0 / 360.0,
            1.0 / 12.0,
        ],
    );
    (hi, lo, series * r, prod)
}

/// `sin(π x)` for f64 `x`, exact at integers: `x = k + r`, `|r| ≤ ½`, `(−1)^k sin(π r)`.
fn sin_pi(x: Tile) -> Tile {
    let k = super::lang::rint(x);
    let r = x - k;
    let s = super::lang::sin(r * PI);
    let odd = eq(fmod(k, 2.0), 1.0) | eq(fmod(k, 2.0), -1.0);
    where_(odd, -s, s)
}

/// `1 − x` where `refl`, else `x`, as `y + dy` (TwoSum): for a large negative `x`, `1 − x`
/// rounds, and Γ changes by `ψ(y)` times that rounding (150 ulps at x = −115).
fn reflected(x: Tile, refl: Tile) -> (Tile, Tile) {
    let y = 1.0 - x;
    let b = y - 1.0;
    let err = (1.0 - (y - b)) + (-x - b);
    (where_(refl, y, x), where_(refl, err, 0.0))
}

/// ζ(k) − 1 for k = 2..=26 (computed to 60 digits), for `lgamma`'s series at 1 and 2.
const ZETA_M1: [f64; 25] = [
    0.644_934_066_848_226_4,
    0.202_056_903_159_594_3,
    0.082_323_233_711_138_19,
    0.036_927_755_143_369_93,
    0.017_343_061_984_449_14,
    0.008_349_277_381_922_827,
    0.004_077_356_197_944_34,
    0.002_008_392_826_082_214_3,
    0.000_994_575_127_818_085_3,
    0.000_494_188_604_119_464_5,
    0.000_246_086_553_308_048_3,
    0.000_122_713_347_578_489_15,
    6.124_813_505_870_483e-5,
    3.058_823_630_702_049e-5,
    1.528_225_940_865_187e-5,
    7.637_197_637_899_763e-6,
    3.817_293_264_999_84e-6,
    1.908_212_716_553_939e-6,
    9.539_620_338_727_962e-7,
    4.769_329_867_878_064e-7,
    2.384_505_027_277_33e-7,
    1.192_199_259_653_110_6e-7,
    5.960_818_905_125_948e-8,
    2.980_350_351_465_228e-8,
    1.490_155_482_836_504_3e-8,
];

/// Euler's constant γ.
const EULER_GAMMA: f64 = 0.577_215_664_901_532_9;

/// `lgamma(1 + e)` (`at_two` false) or `lgamma(2 + e)` (true) for `|e| ≤ 0.2`, from their
/// Taylor series `∓γe… + Σ (−1)^k c_k e^k / k` with `c_k = ζ(k)` at 1 and `ζ(k) − 1` at
/// 2: accurate to the last bits where Stirling's form, near these zeros, only is in absolute
/// terms.
fn lgamma_near_zero(e: Tile, at_two: bool) -> Tile {
    let mut p = e * 0.0;
    for (i, z) in ZETA_M1.iter().enumerate().rev() {
        let k = (i + 2) as f64;
        let c = if at_two { *z } else { 1.0 + z };
        let sign = if i % 2 == 0 { 1.0 } else { -1.0 };
        p = fma(p, e, sign * c / k);
    }
    let first = if at_two {
        1.0 - EULER_GAMMA
    } else {
        -EULER_GAMMA
    };
    // first·e + e²·p
    fma(e * e, p, e * first)
}

/// `ln √(2π)`.
const LN_SQRT_2PI: f64 = 0.918_938_533_204_672_8;

/// The gamma function Γ(x) (libdevice's `tgamma`): Stirling's series above ½, the reflection
/// `π / (sin(πx) Γ(1 − x))` below; ±inf at ±0, NaN at negative integers and −inf.
#[track_caller]
pub fn tgamma(x: impl IntoOperand) -> Tile {
    by_width(
        x,
        |x| {
            let refl = lt(x, 0.5);
            let (y, dy) = reflected(x, refl);
            let (hi, lo, series, prod) = stirling(y);
            // Γ(y + dy) = Γ(y) · e^(ψ(y) dy), and ψ(y) ≈ log y − 1/(2y) is close enough here.
            let lo = lo + (log(y) - 0.5 / y) * dy;
            let e = exp(hi);
            let e = where_(isinf(e), e, fma(e, lo, e));
            let g = e * exp(series) * ((2.0 * PI).sqrt() / prod);
            let r = where_(refl, PI / (sin_pi(x) * g), g);
            let inf = where_(signbit(x), full_like(x, f64::NEG_INFINITY), f64::INFINITY);
            let r = where_(eq(x, 0.0), inf, r);
            let r = where_(lt(x, 0.0) & eq(floor(x), x), f64::NAN, r);
            let r = where_(gt(x, 171.7), f64::INFINITY, r);
            where_(isnan(x), x, r)
        },
        f32m::tgamma,
    )
}

/// `log |Γ(x)|` (libdevice's `lgamma`): f64 by Stirling's series in log form above ½, the
/// reflection below; f32, f16 and bf16 in f32 (`libm_f32.rs`); exactly 0 at 1 and 2, +inf
/// at 0, at negative integers and at ±inf.
#[track_caller]
pub fn lgamma(x: impl IntoOperand) -> Tile {
    by_width(x, lgamma_f64, f32m::lgamma)
}

/// `lgamma` of an f64 tile.
fn lgamma_f64(x: Tile) -> Tile {
    let refl = lt(x, 0.5);
    let (y, dy) = reflected(x, refl);
    let (hi, lo, series, prod) = stirling(y);
    let lo = lo + (log(y) - 0.5 / y) * dy;
    let lg = hi + (lo + (series + LN_SQRT_2PI - log(prod)));
    // Past about 2^1014 the product overflows (and its error terms are NaN).
    let lg = where_(isinf(hi), hi, lg);
    let (e1, e2) = (y - 1.0, y - 2.0);
    let lg = where_(lt(abs(e1), 0.2), lgamma_near_zero(e1, false), lg);
    let lg = where_(lt(abs(e2), 0.2), lgamma_near_zero(e2, true), lg);
    let r = where_(refl, log(abs(sin_pi(x) * (1.0 / PI))) * -1.0 - lg, lg);
    let r = where_(eq(x, 1.0) | eq(x, 2.0), 0.0, r);
    let pole = compare(x, CmpPred::Le, 0.0) & eq(floor(x), x);
    let r = where_(pole | isinf(x), f64::INFINITY, r);
    where_(isnan(x), x, r)
}

/// The inverse error function (libdevice's `erfinv`): M. Giles' single-precision
/// approximation evaluated in f64, then two Newton steps on the f64 `erf` and `erfc`; f32,
/// f16 and bf16 in f32 (refitted Giles' polynomials, `libm_f32.rs`); ±inf at ±1, NaN
/// beyond.
#[track_caller]
pub fn erfinv(x: impl IntoOperand) -> Tile {
    by_width(x, erfinv_f64, f32m::erfinv)
}

/// `erfinv` of an f64 tile.
fn erfinv_f64(x: Tile) -> Tile {
    let w = -log((1.0 - x) * (x + 1.0));
    let central = {
        let w = w - 2.5;
        let c = [
            2.810_226_36e-8,
            3.432_739_39e-7,
            -3.523_387_7e-6,
            -4.391_506_54e-6,
            2.185_808_7e-4,
            -1.253_725_03e-3,
            -4.177_681_64e-3,
            2.466_407_27e-1,
            1.501_409_41,
        ];
        horner(w, &c)
    };
    let tail = {
        let w = sqrt(w) - 3.0;
        let c = [
            -2.002_142_57e-4,
            1.009_505_58e-4,
            1.349_343_22e-3,
            -3.673_428_44e-3,
            5.739_507_73e-3,
            -7.622_461_3e-3,
            9.438_870_47e-3,
            1.001_674_06,
            2.832_976_82,
        ];
        horner(w, &c)
    };
    let y = where_(lt(w, 5.0), central, tail) * x;
    let y = super::erf::erfinv_f64(x, w, y);
    let inf = where_(lt(x, 0.0), full_like(x, f64::NEG_INFINITY), f64::INFINITY);
    let y = where_(eq(abs(x), 1.0), inf, y);
    where_(gt(abs(x), 1.0) | isnan(x), f64::NAN, y)
}
