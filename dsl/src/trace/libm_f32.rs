//! The f32 algorithms of `libm.rs`'s functions (and of `math.rs`'s `erf`), for f32 tiles
//! (f16 and bf16 arguments are converted to f32, computed here and rounded once more).
//! Every one is f32 arithmetic only: no f64, so GPUs run them at f32 speed, and the CPU
//! vectorizes them. They are branch-free, so that every lane computes every case: each
//! keeps to one reduction and one polynomial per case where it can, and special values
//! are selected at the end. Where the rare cases cost much (`lgamma` and `tgamma` below
//! 1, `pow` of a base not positive, normal and finite), their masks are `likely` hints,
//! so that the CPU's loops over tiles without them fold those cases away.
//!
//! The building blocks are exact transformations with `fma` (a sum or a product as a
//! rounded value plus its exact error) and two cores that keep such an error:
//! [`exp_parts`] gives `e^(hi + lo)` as `2^k · (e_hi + e_lo)`, [`log_core`] gives `ln x`
//! as `hi + lo`, both from reductions that are exact and near-minimax polynomials
//! (`scripts/fit_libm_f32.py` prints every coefficient table here). With them each
//! function rounds once at the end after a few errors well below half an ulp, so that it
//! stays within 2 ulps (`tests/libm.rs` measures every one on every device). The IR's
//! own `exp`, `log`, `exp2` and `log2` are left alone: the `exp` takes any argument (so
//! more operations than a core for a known range), the CPU calls libm once per lane for
//! `log`, and CUDA's `exp2` is `ex2.approx`.

use super::lang::{abs, bitcast, cast, fma, likely, maximum, minimum, sqrt, where_};
use super::libm::{copysign, eq, gt, lt};
use super::math::{isfinite, isinf, isnan, signbit};
use super::shape::full_like;
use super::tile::Tile;
use crate::ir::{CmpPred, DType};
use std::f32::consts;

// ---- constants: the nearest f32 and the f32 nearest the rest -----------------------------

const LN2: (f32, f32) = (consts::LN_2, -1.904_654_2e-9);
/// ln 2 with its low 8 bits cleared, so that `k · LN2_16.0` is exact for every exponent `k`
/// of an f32.
const LN2_16: (f32, f32) = (0.693_145_75, 1.428_606_8e-6);
const LOG2_E: f32 = consts::LOG2_E;
const LN10: (f32, f32) = (consts::LN_10, -3.197_543_6e-8);
const LOG10_E: (f32, f32) = (consts::LOG10_E, -1.010_305e-8);
const PI_2: (f32, f32) = (consts::FRAC_PI_2, -4.371_139e-8);
const PI: (f32, f32) = (consts::PI, -8.742_278e-8);
const PI_4: (f32, f32) = (consts::FRAC_PI_4, -2.185_569_4e-8);
const PI3_4: (f32, f32) = (2.356_194_5, -5.962_440_3e-9);
/// tan(π/8) and tan(3π/8): where `atan`'s reductions change.
const TAN_PI_8: f32 = 0.414_213_57;
const TAN_3PI_8: f32 = 2.414_213_7;
/// 1.5 · 2^23: adding it rounds an f32 below 2^22 to an integer, held in the low bits.
const ROUNDER: f32 = 12_582_912.0;
const ROUNDER_BITS: i32 = 0x4b40_0000;

// ---- polynomials (highest degree first; `scripts/fit_libm_f32.py NAME:DEGREE`) -------------

/// `(tanh x − x) / x³` in `x²` on [0, 0.75²]: relative error 1.5e-9.
const TANH: [f32; 6] = [
    0.0017455011,
    -0.0076715946,
    0.021460991,
    -0.053895276,
    0.13332726,
    -0.33333316,
];
/// `(sinh x − x) / x³` in `x²` on [0, 1]: relative error 3.2e-10.
const SINH: [f32; 4] = [2.7839255e-06, 0.00019842635, 0.008333311, 0.16666667];
/// `(e^r − 1 − r) / r²` on [−0.35, 0.35]: error 3.4e-9 relative to `e^r`.
const EXP: [f32; 5] = [0.0013939296, 0.008369525, 0.04166642, 0.16666514, 0.5];
/// `(2 atanh f − 2f) / f³` in `f²` on [0, 0.1716²]: error 8.1e-10 relative to `ln m`.
const LOG: [f32; 3] = [0.29870808, 0.39977583, 0.66666776];
/// The same a degree higher (`LOG:3`): 2.5e-11 relative to `ln m`.
const LOG3: [f32; 4] = [0.24279246, 0.28498787, 0.40000972, 0.6666666];
/// `(atan t − t) / t³` in `t²` on [0, tan²(π/8)]: relative error 6.7e-10.
const ATAN: [f32; 5] = [
    -0.06092794,
    0.106001884,
    -0.14244512,
    0.19998533,
    -0.33333316,
];
/// `(asin x − x) / x³` in `x²` on [0, 0.25]: relative error 2.9e-10.
const ASIN: [f32; 6] = [
    0.03760011,
    0.014373986,
    0.031826463,
    0.04451446,
    0.07500519,
    0.1666666,
];

// ---- exact sums and products ---------------------------------------------------------------

/// `a + b` as the rounded sum and its exact error (Knuth's TwoSum).
fn two_sum(a: Tile, b: Tile) -> (Tile, Tile) {
    let s = a + b;
    let bb = s - a;
    let e = (a - (s - bb)) + (b - bb);
    (s, e)
}

/// `a + b` as the rounded sum and its exact error, for `|a| ≥ |b|` or `a = 0` (Fast2Sum).
fn fast_two_sum(a: Tile, b: Tile) -> (Tile, Tile) {
    let s = a + b;
    (s, b - (s - a))
}

/// `a · b` as the rounded product and its exact error.
fn two_prod(a: Tile, b: Tile) -> (Tile, Tile) {
    let p = a * b;
    (p, fma(a, b, -p))
}

/// `c[0]·xⁿ + … + c[n]` by Horner's rule with fused multiply-adds.
fn poly(x: Tile, c: &[f32]) -> Tile {
    let mut p = fma(x, c[0], c[1]);
    for k in &c[2..] {
        p = fma(p, x, *k);
    }
    p
}

/// [`poly`] as its even and odd halves, each by Horner's rule in `x²`, then `E + x·O`:
/// two chains of half the length, for a long polynomial on a loop's critical path (the
/// CPU runs such loops at about their chain's latency, not their operations' throughput).
fn poly_split(x: Tile, c: &[f32]) -> Tile {
    let x2 = x * x;
    let half = |from: usize| -> Vec<f32> {
        c.iter()
            .rev()
            .skip(from)
            .step_by(2)
            .rev()
            .copied()
            .collect()
    };
    let horner = |c: &[f32]| {
        if c.len() > 1 {
            poly(x2, c)
        } else {
            splat(x2, c[0])
        }
    };
    fma(x, horner(&half(1)), horner(&half(0)))
}

/// `x + x³·P(x²)` for an odd function's series `P` (for `x ≥ 0`: `−0` would give `+0`).
fn odd(x: Tile, c: &[f32]) -> Tile {
    let s = x * x;
    fma(x * s, poly(s, c), x)
}

/// `t ≥ v` (false for NaN).
fn ge(t: Tile, v: f32) -> Tile {
    super::lang::compare(t, CmpPred::Ge, v)
}

/// A constant tile of `x`'s shape and dtype.
fn splat(x: Tile, v: f32) -> Tile {
    full_like(x, v)
}

// ---- powers of two -------------------------------------------------------------------------

/// `2^k` for i32 `k` in [−126, 127], from its bits.
fn pow2(k: Tile) -> Tile {
    bitcast((k + 127) << 23, DType::F32)
}

/// `y · 2^k` for i32 `k` in [−252, 254], rounded once: `y · 2^(k/2)` is exact for `y` in
/// [0.5, 2] and the second factor rounds (to a subnormal, 0 or inf where the result is one).
fn scale(y: Tile, k: Tile) -> Tile {
    let k1 = k >> 1;
    y * pow2(k1) * pow2(k - k1)
}

/// `x · 2^n` for i32 `n`, rounded once (exact unless the result is subnormal or overflows):
/// `x = m · 2^e` with `|m|` in [1, 2) from its bits (subnormals scaled first), then
/// `m · 2^(e + n)` by [`scale`] with the exponent clamped to [−252, 254] (0 or inf
/// beyond); ±0, ±inf and NaN stay as they are.
pub(super) fn ldexp(x: Tile, n: Tile) -> Tile {
    let sub = lt(abs(x), f32::MIN_POSITIVE);
    let xs = where_(sub, x * 16_777_216.0f32, x);
    let bits = bitcast(xs, DType::I32);
    let e = ((bits >> 23) & 0xff) - where_(sub, 151, 127);
    let m = bitcast((bits & !0x7f80_0000) | 0x3f80_0000, DType::F32);
    let k = minimum(maximum(e + minimum(maximum(n, -400), 400), -252), 254);
    let r = scale(m, k);
    where_(eq(x, 0.0) | !isfinite(x), x, r)
}

// ---- the exponential core ------------------------------------------------------------------

/// `e^(hi + lo)` (`lo` a small correction, or none) as `2^k · (e_hi + e_lo)`, `k` an i32
/// tile and `e_hi + e_lo` in [0.7, 1.42] to about 2^-28: `k = round(hi / ln 2)`, `r = hi −
/// k·ln 2 + lo` with `hi − k·LN2.0` exact (a multiple of 2^-24 below ½: 23 bits) and the
/// rounding of the rest kept, then `1 + r + r²·P(r)` with `1 + r` split exactly (so
/// `e_lo` holds `r²·P(r)` too: up to 0.06).
/// Arguments beyond [−170, 89.5] are clamped (the results are 0 or inf there); NaN
/// gives NaN.
fn exp_parts(hi: Tile, lo: Option<Tile>) -> (Tile, Tile, Tile) {
    // `where_` rather than min/max, which would turn NaN into the bound. Below −170 the
    // result is 0 even times 2^70, as `tgamma`'s reflection may multiply it.
    let hi = where_(gt(hi, 89.5), 89.5f32, hi);
    let hi = where_(lt(hi, -170.0), -170.0f32, hi);
    exp_core(hi, lo)
}

/// [`exp_parts`] for `hi` in [−170, 170] (no clamps).
fn exp_core(hi: Tile, lo: Option<Tile>) -> (Tile, Tile, Tile) {
    let shifted = fma(hi, LOG2_E, ROUNDER);
    let kf = shifted - ROUNDER;
    let k = bitcast(shifted, DType::I32) - ROUNDER_BITS;
    let r_hi = fma(kf, -LN2.0, hi);
    let c = match lo {
        Some(lo) => fma(kf, -LN2.1, lo),
        None => kf * -LN2.1,
    };
    let (r, r_lo) = fast_two_sum(r_hi, c);
    let q = r * r * poly(r, &EXP);
    let e_hi = r + 1.0;
    let e_lo = (r - (e_hi - 1.0)) + fma(r_lo, e_hi, q);
    (k, e_hi, e_lo)
}

/// `e^(hi + lo)` rounded once, for any `hi` and a small `lo` (the rounding error of a
/// product, say: below 2^-12 wherever `hi` is in range; `lo` is clamped to that, so that
/// beyond the range, where it may be huge or NaN, it no longer counts). [`exp_core`]'s
/// reduction without its exact sum: `e^(r + c) = e^r + c·e^r` to first order, `r = hi −
/// k·LN2.0` exact and `c` the rest (below 2^-11), `c·e^r` as `c·e_hi + q·(1 + c)` (the
/// rounding of `1 + c` costs below 2^-24 times `q`, below 0.07), the sums ordered so that
/// `q`, the last term ready, is added last. The power of
/// two as [`scale`]'s, from `k·2^23`, which `shifted`'s low bits give shifted up (its high
/// bits shift out): `e · 2^(k >> 1)` exactly in `e`'s exponent field (normal, as `k ≥ −246`
/// and `e` is in [0.7, 1.42]), then the other half rounds once.
fn exp_hi_lo(hi: Tile, lo: Tile) -> Tile {
    // `where_` the way round that turns NaN into the bound.
    let bound = 2f32.powi(-12);
    let lo = where_(lt(lo, bound), lo, bound);
    let lo = where_(gt(lo, -bound), lo, -bound);
    let hi = where_(gt(hi, 89.5), 89.5f32, hi);
    let hi = where_(lt(hi, -170.0), -170.0f32, hi);
    let shifted = fma(hi, LOG2_E, ROUNDER);
    let kf = shifted - ROUNDER;
    let r = fma(kf, -LN2.0, hi);
    let c = fma(kf, -LN2.1, lo);
    // r²·P(r) with P by Estrin's scheme (shorter than Horner's chain, as accurate here).
    let r2 = r * r;
    let q = r2
        * fma(
            fma(fma(r, EXP[0], EXP[1]), r2, fma(r, EXP[2], EXP[3])),
            r,
            EXP[4],
        );
    let e_hi = r + 1.0;
    let e_lo = fma(q, c + 1.0, fma(c, e_hi, r - (e_hi - 1.0)));
    let kk = bitcast(shifted, DType::I32) << 23;
    let k1 = (kk >> 1) & !0x7f_ffff;
    let e = bitcast(bitcast(e_hi + e_lo, DType::I32) + k1, DType::F32);
    e * bitcast(kk - k1 + 0x3f80_0000, DType::F32)
}

// ---- the logarithm core --------------------------------------------------------------------

/// `ln(x + x_lo)` for positive normal f32 `x` only (no special values, no subnormals;
/// `x_lo` a small correction of `x`, or none) as `hi + lo`, to about 2^-30 absolute (for a
/// result rounded to f32), with `j` (an f32 tile of small integers) added to `x`'s exponent:
/// `x = 2^k · m` with `m` in [√½, √2), `ln m = 2 atanh f` with `f = (m − 1)/(m + 1)` in two
/// parts (`m − 1` is exact, the quotient's error is recovered with `fma`, and `x_lo` enters
/// it as `x_lo · 2^−k · (1 − f)`, without a second division), `2f + f³·P(f²)`, and `k · ln
/// 2` with `k · LN2_16.0` exact.
fn log_core(x: Tile, x_lo: Option<Tile>, j: Option<Tile>) -> (Tile, Tile) {
    let bits = bitcast(x, DType::I32);
    // The exponent of `x / √½`: m = x / 2^k lands in [√½, √2).
    let k = (bits - 0x3f35_04f3) >> 23;
    let k_bits = k << 23;
    let m = bitcast(bits - k_bits, DType::F32);
    let mut k = cast(k, DType::F32);
    if let Some(j) = j {
        k += j;
    }
    let u = m - 1.0;
    let v = m + 1.0;
    let v_lo = m - (v - 1.0);
    let inv = 1.0 / v;
    let f = u * inv;
    // The residual of the quotient: u + δ − f·(v + v_lo + δ) for m's correction δ.
    let mut res = fma(-f, v, u) - f * v_lo;
    if let Some(x_lo) = x_lo {
        // 2^−k from its bits (0 from k = 127 on, where the correction no longer counts).
        let inv_2k = bitcast(maximum(0x3f80_0000 - k_bits, 0), DType::F32);
        let delta = x_lo * inv_2k;
        res = fma(delta, 1.0 - f, res);
    }
    let f_lo = res * inv;
    let s = f * f;
    // f_lo counts 2/(1 − f²) ≈ 2 + 2f² times.
    let f_lo2 = f_lo * 2.0;
    let ln_m_lo = fma(f * s, poly(s, &LOG), fma(f_lo2, s, f_lo2));
    let (hi, e) = fast_two_sum(k * LN2_16.0, f * 2.0);
    let lo = e + fma(k, LN2_16.1, ln_m_lo);
    fast_two_sum(hi, lo)
}

/// `(2 atanh(F/2) − F)/F³` in `F²` (`F = 2f`): [`LOG`] rescaled (exactly), for [`log_lean`].
const LOG_LEAN: [f32; 3] = [LOG[0] / 128.0, LOG[1] / 32.0, LOG[2] / 8.0];

/// `c` halved (exactly), for sums computed halved.
const fn halved<const N: usize>(c: [f32; N]) -> [f32; N] {
    let mut h = c;
    let mut i = 0;
    while i < N {
        h[i] = c[i] * 0.5;
        i += 1;
    }
    h
}

/// `σ·ln((x + x_lo) · 2^j) + c` (`σ` 1, or ½ with `half`) for positive normal f32 `x` below
/// 2^126 as `hi + lo`, not renormalized (`lo` holds `ln m`'s series, up to 0.004σ), for the
/// gamma functions and `erfinv`: [`log_core`]'s reduction with `σ·2f = (m − 1)/h` and `h =
/// (m + 1)/(2σ)` (so that no scaling is needed), and `2f_lo·f²` left out (below 2^-24·f³ ≤
/// 3e-10 without `x_lo`; `fine` keeps it, as it must with an `x_lo` of more than an ulp of
/// `x`). `x_lo` (a correction of `x`, or none) enters as `δ = x_lo · 2^−k`, which adds `δ`
/// to `m − 1` and `δ/(2σ)` to `h`, so to the quotient's residual. `j` is an f32 tile of
/// integers, `c` a tile of constants: `σ(k + j)·LN2_16.0 + c` must be exact (`c` a multiple
/// of 2^-16σ, or `k + j` 0) and no smaller in exponent than `σ ln m` (`c` 0, −σ with `k + j`
/// ≥ 0, or any `c` where `x · 2^j` = 1), so that one Fast2Sum adds it.
fn log_lean(
    x: Tile,
    x_lo: Option<Tile>,
    j: Option<Tile>,
    c: Tile,
    fine: bool,
    half: bool,
) -> (Tile, Tile) {
    let (hi, e, k, series, ln2_lo) = log_lean_parts(x, x_lo, j, c, fine, half);
    (hi, e + fma(k, ln2_lo, series))
}

/// [`log_lean`] before its last sum: `hi`, Fast2Sum's error `e`, the f32 tile `k + j`, the
/// series and the low part of `σ ln 2`, the value being `hi + e + (k + j)·ln2_lo + series`
/// (for [`stirling`], which adds the series last).
fn log_lean_parts(
    x: Tile,
    x_lo: Option<Tile>,
    j: Option<Tile>,
    c: Tile,
    fine: bool,
    half: bool,
) -> (Tile, Tile, Tile, Tile, f32) {
    let bits = bitcast(x, DType::I32);
    let k = (bits - 0x3f35_04f3) >> 23;
    let k_bits = k << 23;
    let m = bitcast(bits - k_bits, DType::F32);
    let mut k = cast(k, DType::F32);
    if let Some(j) = j {
        k += j;
    }
    let u = m - 1.0;
    // h in two parts (w − h is exact, and so is the fma).
    let w = if half { 1.0 } else { 0.5 };
    let h = fma(m, w, w);
    let h_lo = fma(m, w, w - h);
    let inv: Tile = 1.0 / h;
    let f = u * inv;
    let mut res = fma(-f, h, u) - f * h_lo;
    if let Some(x_lo) = x_lo {
        // 2^−k from its bits (k above −127 and below 127).
        let delta = x_lo * bitcast(0x3f80_0000 - k_bits, DType::F32);
        res = fma(delta, fma(f, -w, 1.0f32), res);
    }
    let f_lo = res * inv;
    let s = f * f;
    let (p, ln2) = if half {
        (halved(LOG), (LN2_16.0 * 0.5, LN2_16.1 * 0.5))
    } else {
        (LOG_LEAN, LN2_16)
    };
    let series = if fine {
        // f_lo (1 + f²) + f³·P with f² = s·w².
        fma(s, fma(f, poly(s, &p), f_lo * (w * w)), f_lo)
    } else {
        fma(f * s, poly(s, &p), f_lo)
    };
    let (hi, e) = fast_two_sum(fma(k, ln2.0, c), f);
    (hi, e, k, series, ln2.1)
}

/// `ln(x + x_lo)` (`x_lo` a small correction of `x`, or none; 0 where `x` is subnormal)
/// as `hi + lo`, for any f32 `x`: [`log_core`] with subnormals scaled first. `x = 0` gives
/// −inf, +inf gives +inf, negative and NaN give NaN (with `lo = 0`).
fn log_parts(x: Tile, x_lo: Option<Tile>) -> (Tile, Tile) {
    let sub = lt(x, f32::MIN_POSITIVE);
    let xs = where_(sub, x * 8_388_608.0f32, x);
    let k = where_(sub, splat(x, -23.0), splat(x, 0.0));
    let (hi, lo) = log_core(xs, x_lo, Some(k));
    // ln 0 = −inf, ln inf = inf, NaN below 0 and for NaN.
    let special = !(gt(x, 0.0) & lt(x, f32::INFINITY));
    let nan_or_inf = where_(eq(x, f32::INFINITY), x, splat(x, f32::NAN));
    let value = where_(eq(x, 0.0), splat(x, f32::NEG_INFINITY), nan_or_inf);
    (where_(special, value, hi), where_(special, 0.0f32, lo))
}

/// `√(hi + lo)` as `s + s_lo` (`s_lo` from the exact residual `hi − s²`); 0 gives (0, 0).
fn sqrt_parts(hi: Tile, lo: Option<Tile>) -> (Tile, Tile) {
    let s = sqrt(hi);
    let mut res = fma(-s, s, hi);
    if let Some(lo) = lo {
        res += lo;
    }
    let s_lo = res / (s * 2.0);
    (s, where_(eq(s, 0.0), 0.0f32, s_lo))
}

// ---- exponentials and logarithms -----------------------------------------------------------

/// `e^x − 1`: `2^k (e_hi + e_lo) − 1` with the subtraction split exactly, so that the
/// result rounds once; ±0 stays as it is.
pub(super) fn expm1(x: Tile) -> Tile {
    let (k, e_hi, e_lo) = exp_parts(x, None);
    // Beyond k = 126 the result is 2^k · e and 1 no longer counts; below k = −30, only −1
    // is left, which a power 2^-30 gives too.
    let s = pow2(maximum(minimum(k, 126), -30));
    let (h, e) = two_sum(s * e_hi, splat(x, -1.0));
    let mid = h + fma(s, e_lo, e);
    let r = where_(gt(k, 126), scale(e_hi + e_lo, k), mid);
    where_(eq(x, 0.0), x, r)
}

/// `10^x = e^(x · ln 10)` with the product in two parts.
pub(super) fn exp10(x: Tile) -> Tile {
    let (t, t_err) = two_prod(x, splat(x, LN10.0));
    let t_lo = fma(x, LN10.1, t_err);
    exp_hi_lo(t, t_lo)
}

/// `ln(1 + x)`: `1 + x` split exactly into `u + u_lo`, then `ln u + u_lo / u`.
pub(super) fn log1p(x: Tile) -> Tile {
    let (u, u_lo) = two_sum(x, splat(x, 1.0));
    // u is normal above −1 (at least 2^-24) and below inf; 0 at −1, negative below.
    let r = ln_normal(u, u_lo, None);
    let r = where_(eq(u, f32::INFINITY), u, r);
    let r = where_(eq(u, 0.0), splat(r, f32::NEG_INFINITY), r);
    let r = where_(lt(u, 0.0) | isnan(u), splat(r, f32::NAN), r);
    where_(eq(x, 0.0), x, r)
}

/// `log10 x = ln x · log10 e`, both in two parts.
pub(super) fn log10(x: Tile) -> Tile {
    let (hi, lo) = log_parts(x, None);
    let (p, p_err) = two_prod(hi, splat(hi, LOG10_E.0));
    let r = p + (p_err + fma(hi, LOG10_E.1, lo * LOG10_E.0));
    where_(isfinite(hi), r, hi)
}

/// `(2 atanh(F/2) − F)/F³` in `F²` (`F = 2f`): [`LOG3`] rescaled (exactly), for [`pow`].
const LOG3_F: [f32; 4] = [
    LOG3[0] / 512.0,
    LOG3[1] / 128.0,
    LOG3[2] / 32.0,
    LOG3[3] / 8.0,
];

/// `x^y = e^(y · ln x)`, C99's special cases as the f64 version. `ln |x| = k ln 2 + F +
/// F³·P(F²)` by [`log_lean`]'s reduction (`F = 2(m − 1)/v`, `v = m + 1`, in two parts by
/// sums; subnormals scaled first) with `F³` from its exact parts (`F_lo`'s share `3F²·F_lo`
/// included), so that `F³·P(F²)` rounds twice (`P`, then the sum) and the logarithm's error
/// stays below 2^-32 (2^-30.5 relative to `ln |x|`), the exponent's within about 2^-24 up
/// to the overflow; the product in two parts; [`exp_hi_lo`]. The special cases cost little
/// on the way: `ln 0 = −inf` and `ln inf = inf` are the logarithm's only selects, `x^±0 =
/// 1^y = 1` one select of the result, and the NaN of a negative `x` to a non-integer power
/// reuses the comparisons that found `x` zero and finite (every f32 from 2^24 on, and inf,
/// is an even integer).
pub(super) fn pow(x: Tile, y: Tile) -> Tile {
    let ax = abs(x);
    // A positive normal base is the usual one (see `likely`): a subnormal, zero, infinite,
    // NaN or negative one is a rare case, each folded away where every lane is usual (one
    // test).
    let finite = lt(ax, f32::INFINITY);
    let usual = likely(ge(x, f32::MIN_POSITIVE) & finite, true);
    let sub = !usual & lt(ax, f32::MIN_POSITIVE);
    let xs = where_(sub, ax * 8_388_608.0f32, ax);
    let bits = bitcast(xs, DType::I32);
    let k = (bits - 0x3f35_04f3) >> 23;
    let m = bitcast(bits - (k << 23), DType::F32);
    let k = cast(k, DType::F32);
    let k = where_(sub, k - 23.0, k);
    let u = m - 1.0;
    // v in two parts (v − 1 is exact, and then so is m − (v − 1)); F = 2u/v (2/v is 1/h of
    // log_lean's h = v/2, the same F and F_lo, with sums where h took fused multiply-adds).
    let v = m + 1.0;
    let v_lo = m - (v - 1.0);
    let inv: Tile = 1.0 / v;
    let u2 = u + u;
    let f = u2 * inv;
    let f_lo = (fma(-f, v, u2) - f * v_lo) * inv;
    // F³ = c + c_lo to first order; the series' F_lo counts 1 + F²/4 times, its F²/4 part
    // being c_lo's share over 12.
    let s = f * f;
    let s_err = fma(f, f, -s);
    let (c, c_err) = two_prod(f, s);
    // k·LN2_16.0 is exact and at least 2F unless k is 0.
    let (hi, e) = fast_two_sum(k * LN2_16.0, f);
    // The low parts in the order they are ready (a shorter chain than summing the series'
    // first): k·LN2_16.1 and the sum's error, F_lo·(1 + F²/4), F³'s errors over 12, the
    // series.
    let lo = fma(f_lo, fma(s, 0.25f32, 1.0f32), fma(k, LN2_16.1, e));
    let lo = fma(fma(f, s_err, c_err), 1.0 / 12.0, lo);
    let (l, l_lo) = fast_two_sum(hi, fma(c, poly(s, &LOG3_F), lo));
    // ln 0 = −inf, ln inf = inf, NaN stays NaN (their low parts are dropped in exp_hi_lo).
    let zero = !usual & eq(ax, 0.0);
    let l = where_(zero, splat(ax, f32::NEG_INFINITY), where_(finite, l, ax));
    let (t, t_err) = two_prod(y, l);
    let t_lo = fma(y, l_lo, t_err);
    let r = exp_hi_lo(t, t_lo);
    // x^±0 = 1 for every x, and (±1)^y = 1 for every y (where y·ln x may be NaN); the sign
    // and NaN for x = −1 come from what follows.
    let r = where_(eq(y, 0.0) | eq(ax, 1.0), splat(r, 1.0), r);
    // The sign for a negative x to an odd power, NaN for a negative finite nonzero x to a
    // non-integer one.
    let y_int = eq(super::lang::floor(y), y);
    let half = y * 0.5;
    let odd = y_int & !eq(super::lang::floor(half), half);
    let neg = !usual & signbit(x);
    let r = where_(neg & odd, -r, r);
    let bad = neg & !zero & finite & !y_int;
    where_(bad, splat(r, f32::NAN), r)
}

// ---- hyperbolic functions ------------------------------------------------------------------

/// `tanh x`: `x + x³·P(x²)` below 0.75, `1 − 2/(E + 1)` above, `E = e^(2|x|)` within an
/// ulp sufficing: its error shrinks by `2E/(E + 1)²` < 0.3, and the result is above 0.63,
/// so that the quotient's errors count half. `E` is [`exp_core`]'s reduction of `2|x|`
/// clamped to 20 (`tanh` rounds to 1 from 9.01), so that one power of two, added to the
/// exponent field, scales it: the IR's `exp`, for any argument, scales in two halves and
/// clamps both ways (a third more operations on the pipes that multiply).
pub(super) fn tanh(x: Tile) -> Tile {
    let a = abs(x);
    // `where_` the way round that keeps NaN (which then takes the polynomial's side).
    let c = where_(gt(a, 10.0), 10f32, a);
    let shifted = fma(c, 2.0 * LOG2_E, ROUNDER);
    let kf = shifted - ROUNDER;
    let r = fma(kf, -LN2.1, fma(kf, -LN2.0, c + c));
    let e: Tile = fma(r * r, poly(r, &EXP), r) + 1.0;
    // `k · 2^23` from `shifted`'s low bits shifted up (its high bits shift out).
    let big = bitcast(
        bitcast(e, DType::I32) + (bitcast(shifted, DType::I32) << 23),
        DType::F32,
    );
    let large: Tile = 1.0 - 2.0 / (big + 1.0);
    copysign(where_(ge(a, 0.75), large, odd(a, &TANH)), x)
}

/// `e^|x| = 2^k · e` and `2^(−2k) / e`, for `sinh` and `cosh` (the second term is
/// below 2^-80 of the first past k = 40, where it stops).
fn exp_and_inverse(a: Tile) -> (Tile, Tile, Tile, Tile) {
    let (k, e_hi, e_lo) = exp_parts(a, None);
    let inv = pow2(minimum(k, 40) * -2) / (e_hi + e_lo);
    (k, e_hi, e_lo, inv)
}

/// `sinh x`: `x + x³·P(x²)` below 1, else `2^(k−1) · (e − 2^(−2k)/e)`, where the
/// subtraction cancels at most a factor 1.2.
pub(super) fn sinh(x: Tile) -> Tile {
    let a = abs(x);
    let (k, e_hi, e_lo, inv) = exp_and_inverse(a);
    let large = scale(e_hi - (inv - e_lo), k - 1);
    copysign(where_(lt(a, 1.0), odd(a, &SINH), large), x)
}

/// `cosh x = 2^(k−1) · (e + 2^(−2k)/e)`.
pub(super) fn cosh(x: Tile) -> Tile {
    let (k, e_hi, e_lo, inv) = exp_and_inverse(abs(x));
    scale(e_hi + (inv + e_lo), k - 1)
}

/// `ln(w + w_lo)` rounded, `ln 2w` where `twice`, for the inverse hyperbolic functions
/// and `log1p`: for positive normal finite `w` only ([`log_core`] straight, not
/// [`log_parts`]' subnormal scaling and special values); the caller replaces the lanes
/// where `w` is 0, inf, negative or NaN, at the end. Those selects sat on the chain of
/// the loops, which their time follows (`acosh` took 28% longer, `asinh` 20%).
fn ln_normal(w: Tile, w_lo: Tile, twice: Option<Tile>) -> Tile {
    let j = twice.map(|t| where_(t, splat(w, 1.0), splat(w, 0.0)));
    let (hi, lo) = log_core(w, Some(w_lo), j);
    hi + lo
}

/// `asinh x = ln(|x| + √(x² + 1))` with every step in two parts, so that it stays exact
/// near 0 (`x` itself below 2^-12); `ln 2|x|` above 2^12.
pub(super) fn asinh(x: Tile) -> Tile {
    let a = abs(x);
    let (q, q_err) = two_prod(a, a);
    let (q1, q1_err) = two_sum(splat(q, 1.0), q);
    let (s, s_lo) = sqrt_parts(q1, Some(q1_err + q_err));
    let (w, w_err) = fast_two_sum(s, a);
    let far = gt(a, 4096.0);
    // w ≥ 1 (a itself from 4096 on).
    let r = ln_normal(
        where_(far, a, w),
        where_(far, splat(a, 0.0), w_err + s_lo),
        Some(far),
    );
    // Tiny arguments are their own asinh, and so are ±inf and NaN.
    let r = where_(lt(a, 2f32.powi(-12)) | !isfinite(a), a, r);
    copysign(r, x)
}

/// `acosh x = ln(x + √(x² − 1))` with `x² − 1` in two parts; `ln 2x` above 2^12.
pub(super) fn acosh(x: Tile) -> Tile {
    let (q, q_err) = two_prod(x, x);
    // q ≥ 1 where x ≥ 1, so that this is Fast2Sum with the larger operand first.
    let (d, d_err) = fast_two_sum(q, splat(q, -1.0));
    let (s, s_lo) = sqrt_parts(d, Some(d_err + q_err));
    let (w, w_err) = fast_two_sum(x, s);
    let far = gt(x, 4096.0);
    // w ≥ 1 where x ≥ 1 (x itself from 4096 on).
    let r = ln_normal(
        where_(far, x, w),
        where_(far, splat(x, 0.0), w_err + s_lo),
        Some(far),
    );
    // Below 1 (where the square root is NaN anyway) and NaN; inf is its own acosh.
    let r = where_(eq(x, f32::INFINITY), x, r);
    where_(lt(x, 1.0) | isnan(x), splat(x, f32::NAN), r)
}

/// `atanh x = ½ ln((1 + |x|)/(1 − |x|))` with the sums and the quotient in two parts; `x`
/// itself below 2^-12.
pub(super) fn atanh(x: Tile) -> Tile {
    let a = abs(x);
    let (n, n_lo) = fast_two_sum(splat(a, 1.0), a);
    let (d, d_lo) = fast_two_sum(splat(a, 1.0), -a);
    let q = n / d;
    let q_lo = (fma(-q, d, n) + (n_lo - q * d_lo)) / d;
    let q_lo = where_(isfinite(q), q_lo, 0.0f32);
    // q ≥ 1 below 1; inf at 1, negative above, NaN for NaN: replaced after.
    let r = ln_normal(q, q_lo, None) * 0.5;
    let r = where_(eq(a, 1.0), splat(r, f32::INFINITY), r);
    let r = where_(gt(a, 1.0) | isnan(a), splat(r, f32::NAN), r);
    let r = where_(lt(a, 2f32.powi(-12)), a, r);
    copysign(r, x)
}

// ---- inverse trigonometric functions -------------------------------------------------------

/// `num/den` in two parts, for `num` and `den` given in two parts each, from one
/// division: `q = num · (1/den)` (within 2 ulps) and `q_lo` from the exact residual.
fn quotient(num: (Tile, Tile), den: (Tile, Tile)) -> (Tile, Tile) {
    let r: Tile = 1.0 / den.0;
    let q = num.0 * r;
    let q_lo = (fma(-q, den.0, num.0) + (num.1 - q * den.1)) * r;
    (q, q_lo)
}

/// `atan(q + q_lo) − q` for `|q| ≤ tan(π/8)` (the low part's derivative is `1/(1 + q²)`).
fn atan_tail(q: Tile, q_lo: Tile) -> Tile {
    let s = q * q;
    fma(q * s, poly(s, &ATAN), fma(-q_lo, s, q_lo))
}

/// `c + v + w` rounded once, for a two-part constant `c` (0 or a multiple of π/4), a
/// value `v` no larger than `c` unless `c` is 0, and a small `w`.
fn plus_constant(c_hi: Tile, c_lo: Tile, v: Tile, w: Tile) -> Tile {
    let (h, e) = fast_two_sum(c_hi, v);
    h + (e + (w + c_lo))
}

/// A two-part constant chosen per lane: `cases` are (condition, constant) tried in order,
/// `otherwise` where none holds.
fn pick(x: Tile, cases: &[(Tile, (f32, f32))], otherwise: (f32, f32)) -> (Tile, Tile) {
    let (mut hi, mut lo) = (splat(x, otherwise.0), splat(x, otherwise.1));
    for (cond, c) in cases.iter().rev() {
        hi = where_(*cond, splat(x, c.0), hi);
        lo = where_(*cond, splat(x, c.1), lo);
    }
    (hi, lo)
}

/// `atan x` by Cephes' reductions, with one division: `|x|` itself to tan(π/8), then
/// `π/4 + atan((|x| − 1)/(|x| + 1))` to tan(3π/8), then `π/2 + atan(−1/|x|)`; the quotient
/// and its sums in two parts, and `q + q³·P(q²)` on |q| ≤ tan(π/8).
pub(super) fn atan(x: Tile) -> Tile {
    let a = abs(x);
    let mid = gt(a, TAN_PI_8);
    let big = gt(a, TAN_3PI_8);
    let one = splat(a, 1.0);
    let zero = splat(a, 0.0);
    // a − 1 is exact from ½ to 2 (and Fast2Sum's error is its rounding below).
    let (m, m_lo) = fast_two_sum(splat(a, -1.0), a);
    let (p, p_lo) = two_sum(a, one);
    let num = (
        where_(big, splat(a, -1.0), where_(mid, m, a)),
        where_(big, zero, where_(mid, m_lo, zero)),
    );
    let den = (
        where_(big, a, where_(mid, p, one)),
        where_(big, zero, where_(mid, p_lo, zero)),
    );
    let (q, q_lo) = quotient(num, den);
    let (c_hi, c_lo) = pick(a, &[(big, PI_2), (mid, PI_4)], (0.0, 0.0));
    let r = plus_constant(c_hi, c_lo, q, atan_tail(q, q_lo));
    // +inf gives π/2 (its quotient −1/inf is −0, and the residual NaN).
    let r = where_(isinf(a), splat(a, PI_2.0), r);
    copysign(r, x)
}

/// `atan2(y, x)`: with `m ≤ n` the smaller and larger magnitude, `atan(m/n)` as in
/// [`atan`] (to tan(π/8), else `π/4 + atan((m − n)/(m + n))`), then placed in its octant
/// (`π/2 − ·`, `π − ·`, `π/2 + ·`) with the constant added exactly; C99's special cases.
pub(super) fn atan2(y: Tile, x: Tile) -> Tile {
    let (ax, ay) = (abs(x), abs(y));
    let n = maximum(ax, ay);
    let m = minimum(ax, ay);
    let zero = splat(m, 0.0);
    // m − n is exact from m ≥ n/2 on (Fast2Sum's error is its rounding below); m + n is
    // Fast2Sum with the larger first.
    let big = gt(m, n * TAN_PI_8);
    let (d, d_lo) = fast_two_sum(-n, m);
    let (s, s_lo) = fast_two_sum(n, m);
    let num = (where_(big, d, m), where_(big, d_lo, zero));
    let den = (where_(big, s, n), where_(big, s_lo, zero));
    let (q, q_lo) = quotient(num, den);
    // Both infinite: π/4 (and 3π/4…); both zero: 0 (and π…).
    let both_inf = isinf(ax) & isinf(ay);
    // (One infinite: 0 with a NaN residual; a subnormal quotient is rounded once
    // already, and its residual would round again.)
    let (q, q_lo) = (
        where_(both_inf | eq(n, 0.0), zero, q),
        where_(
            isinf(n) | eq(n, 0.0) | lt(abs(q), 2f32.powi(-100)),
            zero,
            q_lo,
        ),
    );
    let big = big | both_inf;
    let swap = gt(ay, ax);
    let neg = signbit(x);
    let minus = super::lang::compare(swap, CmpPred::Ne, neg);
    let (c_hi, c_lo) = pick(
        m,
        &[(big & neg, PI3_4), (big, PI_4), (swap, PI_2), (neg, PI)],
        (0.0, 0.0),
    );
    let tail = atan_tail(q, q_lo);
    let r = plus_constant(c_hi, c_lo, where_(minus, -q, q), where_(minus, -tail, tail));
    let r = copysign(r, y);
    where_(isnan(x) | isnan(y), x + y, r)
}

/// `asin` and `acos` of `x` from one series: `z = x²` where `|x| ≤ ½`, else
/// `z = (1 − |x|)/2` (exact) and `s = √z` in two parts, `asin |x| = π/2 − 2 asin s`.
/// Gives `(|x| ≤ ½, s + s_lo, the series' tail at s or at |x|)`.
fn asin_parts(x: Tile) -> (Tile, Tile, Tile, Tile) {
    let a = abs(x);
    let mid = compare_le(a, 0.5);
    let z = where_(mid, a * a, (1.0 - a) * 0.5);
    let (s, s_lo) = sqrt_parts(z, None);
    let v = where_(mid, a, s);
    let tail = fma(v * z, poly(z, &ASIN), where_(mid, 0.0f32, s_lo));
    (mid, v, tail, a)
}

fn compare_le(a: Tile, b: f32) -> Tile {
    super::lang::compare(a, CmpPred::Le, b)
}

/// `asin x`: the series to ½, `π/2 − 2 asin √((1 − |x|)/2)` beyond; NaN past ±1.
pub(super) fn asin(x: Tile) -> Tile {
    let (mid, v, tail, a) = asin_parts(x);
    let zero = splat(a, 0.0);
    let c_hi = where_(mid, zero, splat(a, PI_2.0));
    let c_lo = where_(mid, zero, splat(a, PI_2.1));
    let r = plus_constant(
        c_hi,
        c_lo,
        where_(mid, v, v * -2.0),
        where_(mid, tail, tail * -2.0),
    );
    copysign(r, x)
}

/// `acos x`: `π/2 − asin x` to ½, `2 asin √((1 − x)/2)` above, `π − 2 asin √((1 + x)/2)`
/// below −½; NaN past ±1.
pub(super) fn acos(x: Tile) -> Tile {
    let (mid, v, tail, a) = asin_parts(x);
    let neg = lt(x, 0.0);
    let zero = splat(a, 0.0);
    let c_hi = where_(mid, splat(a, PI_2.0), where_(neg, splat(a, PI.0), zero));
    let c_lo = where_(mid, splat(a, PI_2.1), where_(neg, splat(a, PI.1), zero));
    // −x·(1 + series) in the middle, ∓2s·(1 + series) outside.
    let sign = where_(
        mid,
        copysign(splat(a, 1.0), -x),
        where_(neg, splat(a, -2.0), splat(a, 2.0)),
    );
    let r = plus_constant(c_hi, c_lo, v * sign, tail * sign);
    where_(gt(a, 1.0) | isnan(x), splat(x, f32::NAN), r)
}

// ---- roots ---------------------------------------------------------------------------------

/// `∛x`: a guess from the exponent bits divided by 3 (5 bits), Halley's step (16 bits),
/// then Newton's step with the residual `y³ − x` computed exactly; arguments far from 1
/// are scaled by 2^±48 first (their root by 2^±16), so that nothing overflows or turns
/// subnormal.
pub(super) fn cbrt(x: Tile) -> Tile {
    let a = abs(x);
    let tiny = lt(a, 2f32.powi(-64));
    let huge = gt(a, 2f32.powi(64));
    let one = splat(a, 1.0);
    let s = a * where_(
        tiny,
        splat(a, 2f32.powi(48)),
        where_(huge, splat(a, 2f32.powi(-48)), one),
    );
    let back = where_(
        tiny,
        splat(a, 2f32.powi(-16)),
        where_(huge, splat(a, 2f32.powi(16)), one),
    );
    let bits = bitcast(s, DType::U32);
    let y = bitcast(bits / 3u32 + 709_958_130u32, DType::F32);
    let r = y * y * y;
    let y = y * fma(s, 2.0f32, r) / fma(r, 2.0f32, s);
    let (y2, y2_err) = two_prod(y, y);
    let res = fma(y2, y, -s) + y2_err * y;
    let y = y - res / (y2 * 3.0);
    let y = where_(eq(a, 0.0) | isinf(a) | isnan(a), a, y * back);
    copysign(y, x)
}

/// `√(x² + y²)`: the larger magnitude scaled by a power of two near 1 (exact, so that
/// nothing overflows or underflows), `fma` for the sum of squares; an infinite argument
/// gives +inf even when the other is NaN.
pub(super) fn hypot(x: Tile, y: Tile) -> Tile {
    let (ax, ay) = (abs(x), abs(y));
    let m = maximum(ax, ay);
    let n = minimum(ax, ay);
    let big = gt(m, 2f32.powi(60));
    let small = lt(m, 2f32.powi(-60));
    let one = splat(m, 1.0);
    let sc = where_(
        big,
        splat(m, 2f32.powi(-80)),
        where_(small, splat(m, 2f32.powi(100)), one),
    );
    let back = where_(
        big,
        splat(m, 2f32.powi(80)),
        where_(small, splat(m, 2f32.powi(-100)), one),
    );
    let (ms, ns) = (m * sc, n * sc);
    let h = sqrt(fma(ms, ms, ns * ns)) * back;
    let h = where_(isnan(x) | isnan(y), x + y, h);
    where_(isinf(x) | isinf(y), splat(h, f32::INFINITY), h)
}

// ---- the error functions -------------------------------------------------------------------

/// 2/√π in two parts.
const FRAC_2_SQRT_PI: (f32, f32) = (consts::FRAC_2_SQRT_PI, -5.863_538_3e-8);
/// `(erf(x)/x − 2/√π) / x²` in `x²` on [0, ¼]: relative error 7.2e-11.
const ERF: [f32; 5] = [
    -0.00073913863,
    0.005182445,
    -0.026859509,
    0.112837456,
    -0.37612638,
];
/// `ln(erfc(z)/t) + z² + 43/64` in `t − ½`, `t = 1/(1 + z/2)` on [1/6, 0.8] (z from ½ to
/// 10): absolute error 2.6e-9 (the offset keeps the value, and so its last rounding,
/// below 0.45).
const ERFC: [f32; 10] = [
    0.24862775,
    -0.05059313,
    -0.28943035,
    0.11338558,
    0.28183118,
    -0.15798588,
    -0.37515235,
    0.18937348,
    1.3452864,
    8.091544e-05,
];
const ERFC_OFFSET: f32 = 43.0 / 64.0;
/// `erfc z` scaled (Shepherd and Laframboise's form): `(1 + 2z)·e^(z²)·erfc z − 1 =
/// (1 + q)·H(q)` with `q = (z − 2)/(z + 2)`; `H` in `q − ¼` for `q` in [−1, 9/13] (`z`
/// from 0 to 11), the error of `(1 + q)·H` relative to `1 + (1 + q)·H` 1.2e-8. The value
/// runs from 0 to 2/√π − 1, so that its roundings are small beside the 1 it is added to;
/// the factor `1 + q` keeps it exactly 0 at `z = 0`, where Horner's partial sums would
/// not be, and the centre ¼ keeps those sums small where `z` is large.
const ERFC_SCALED: [f32; 10] = [
    3.465398e-05,
    -0.0003024345,
    -0.0015515498,
    -1.45460845e-05,
    0.0082375,
    -0.004995621,
    -0.049611766,
    0.1696335,
    -0.27609402,
    0.19660509,
];

/// `erfc z` for `z ≥ 0` (any `z` gives a value; NaN gives NaN): `(1 + P)/(1 + 2z)` by
/// [`ERFC_SCALED`] times `e^(−z²)`. `1 + q = 2z/(z + 2)` from the reciprocal (to a few
/// ulps relative, which `P`, below 0.13, scales down). The quotient is rounded once and
/// its residual `(1 + P) − Q·(1 + 2z)` taken exactly enough to keep as a second part (`1
/// − Q` exact by Fast2Sum, the product inside one `fma`); `z²` is split exactly into
/// [`exp_core`]'s argument, whose two parts the quotient's two multiply before the one
/// rounding. `z` is clamped to 11 (the exponent stays above −121: no clamps in
/// [`exp_core`]), past which the result is 0 anyway.
fn erfc_tail(z: Tile) -> Tile {
    let z = where_(gt(z, 11.0), 11.0f32, z);
    let v = (z + z) * (1.0 / (z + 2.0));
    let p = v * poly_split(v - 1.25, &ERFC_SCALED);
    let r = 0.5 / (z + 0.5);
    let quotient = fma(p, r, r);
    let (w, w_err) = fast_two_sum(splat(quotient, 1.0), -quotient);
    let residual = fma(-(quotient + quotient), z, w) + (p + w_err);
    let (s, s_err) = two_prod(z, z);
    let (k, e_hi, e_lo) = exp_core(-s, Some(-s_err));
    let lo = fma(quotient, e_lo, (residual * r) * e_hi);
    scale(fma(quotient, e_hi, lo), k)
}

/// `erf x − x · 2/√π_hi` for `|x| ≤ ½` (the series' part below its leading term's).
fn erf_small_rest(x: Tile) -> Tile {
    let s = x * x;
    x * fma(s, poly(s, &ERF), FRAC_2_SQRT_PI.1)
}

/// `erfc x`: [`erfc_tail`] of `|x|`, and `2 − erfc |x|` below 0 (from 1 on, where the
/// subtraction's rounding costs at most half an ulp more: one form for every lane, no
/// series below ½ to select from).
pub(super) fn erfc(x: Tile) -> Tile {
    let tail = erfc_tail(abs(x));
    where_(lt(x, 0.0), 2.0 - tail, tail)
}

/// `erf x`: `x · 2/√π + x³·P(x²)` below ½ (the leading product rounded with the rest),
/// `1 − erfc |x|` above, with `erfc z = t · e^(−z² + P(t))` as in [`erfc_tail`] but its
/// exponent in one f32 (`erf` needs `erfc` to an absolute 2^-26 only, which the exponent's
/// roundings keep: `|exponent| < 1` where `erfc` is largest) and `z` clamped to 4, past
/// which `1 − erfc` rounds to 1.
pub(super) fn erf(x: Tile) -> Tile {
    let a = abs(x);
    let near = fma(a, FRAC_2_SQRT_PI.0, erf_small_rest(a));
    let z = where_(gt(a, 4.0), 4.0f32, a);
    // t's rounding η (and 1 + z/2's, exact to z = 2) counts 1 + t·P'(t) times.
    let (d, d_err) = fast_two_sum(splat(z, 1.0), z * 0.5);
    let t: Tile = 1.0 / d;
    let eta = fma(-t, d, 1.0) - t * d_err;
    let p = poly(t - 0.5, &ERFC) - ERFC_OFFSET;
    let (k, e_hi, e_lo) = exp_core(fma(-z, z, p), Some(fma(t * eta, 1.3, eta)));
    // t · 2^k is exact (k from −24 to 0).
    let c = t * pow2(k);
    let far = 1.0 - fma(c, e_hi, c * e_lo);
    copysign(where_(lt(a, 0.5), near, far), x)
}

/// `erfinv(x)/x` in `w − 2.5`, `w = −ln(1 − x²)` on [0, 5] (Giles' central fit, refitted
/// a degree higher): relative error 9.1e-9. The constant term is in two parts (the last
/// two), so that its rounding does not cost half an ulp of the result.
const ERFINV_CENTRAL: [f32; 11] = [
    -8.600335e-09,
    2.3176602e-08,
    4.635362e-07,
    -3.4620139e-06,
    -4.951313e-06,
    0.0002183418,
    -0.0012527619,
    -0.0041773836,
    0.2466403,
    1.5014094,
    -5.2623143e-08, // the constant's low part
];
/// `erfinv(x)/x` in `w − 9` on [5 − 9, 15.94 − 9] (to 1 − 2^-24; Giles' tail fit in `w`
/// itself rather than `√w`, refitted a degree higher): relative error 2.0e-9; the constant
/// in two parts.
const ERFINV_TAIL: [f32; 12] = [
    2.1509034e-12,
    -7.151842e-11,
    1.082398e-09,
    -1.0018175e-08,
    5.4863513e-08,
    1.2424098e-07,
    -9.546057e-06,
    0.00020765969,
    -0.0043750023,
    0.16694589,
    2.8329768,
    -2.2353998e-08, // the constant's low part
];

/// A fit whose constant term is in two parts (the last two of `c`), at `u + u_lo`: the
/// constant's high part, and the rest (`u_lo` to first order).
fn split_constant(u: Tile, u_lo: Tile, c: &[f32]) -> (Tile, Tile) {
    let n = c.len();
    let p = poly(u, &c[..n - 2]);
    let rest = fma(u, p, fma(u_lo, p, c[n - 1]));
    (splat(u, c[n - 2]), rest)
}

/// `erfinv x = x · P(w)`, Giles' form with `w = −ln(1 − x²)` (`1 − x²` and the logarithm
/// in two parts, the logarithm [`log_lean`]'s): `P` in `w − 2.5` below 5, in `w − 9` above
/// (no square root: a polynomial in `w` fits the tail as closely, a degree higher than in
/// `√w`); the product with `x` rounds once. ±inf at ±1, NaN beyond.
pub(super) fn erfinv(x: Tile) -> Tile {
    let a = abs(x);
    // 1 − x² in two parts (1 − a² rounded is exact from a² ≥ ½ on); from 2^-23 to 1 for
    // |x| < 1 (the other lanes are replaced at the end).
    let (sq, sq_err) = two_prod(a, a);
    let (d, d_err) = fast_two_sum(splat(a, 1.0), -sq);
    // The correction is up to a quarter of d (where d is near 2^-23), so `fine`; w
    // renormalized, so that its low part is below an ulp of it.
    let (l, l_lo) = log_lean(d, Some(d_err - sq_err), None, splat(d, 0.0), true, false);
    let (w, w_lo) = fast_two_sum(-l, -l_lo);
    // w − 2.5 is exact from 1.25 on (below, Fast2Sum keeps what w's low bits lose), w − 9
    // from 4.5 on, so wherever the tail counts.
    let (u, u_lo) = fast_two_sum(splat(w, -2.5), w);
    let (c_hi, c_rest) = split_constant(u, u_lo + w_lo, &ERFINV_CENTRAL);
    let (t_hi, t_rest) = split_constant(w - 9.0, w_lo, &ERFINV_TAIL);
    // w < 5, as |x| below √(1 − e^-5) rounded (all but 0.34% of uniform arguments; a
    // test of `a`, cheap where `w` would take the logarithm): the tail's polynomial is
    // folded away in chunks of lanes without a tail lane (see `likely`).
    let central = likely(lt(a, 0.996_625_3), true);
    // P = p + p_lo exactly, so that only the product with a rounds.
    let (p, p_lo) = fast_two_sum(where_(central, c_hi, t_hi), where_(central, c_rest, t_rest));
    let y = fma(a, p, a * p_lo);
    let y = where_(eq(a, 1.0), splat(x, f32::INFINITY), y);
    let y = where_(
        super::lang::compare(a, CmpPred::Le, 1.0),
        y,
        splat(x, f32::NAN),
    );
    copysign(y, x)
}

// ---- the gamma function --------------------------------------------------------------------

/// Binet's function `μ(x) = lgamma(x) − (x − ½) ln x + x − ln √(2π)`, as `μ(x)·x` in `1/x`
/// on [0, 1] (x ≥ 1): absolute error of `μ` 1.3e-9.
const BINET: [f32; 7] = [
    0.00012737564,
    -0.0005963546,
    0.0009999672,
    -2.1006585e-05,
    -0.0027831923,
    1.4249244e-06,
    0.083333254,
];
/// `(sin πr / π − r)/r³` in `r²` on [0, ¼]: error 4.9e-9 relative to `r`.
const SINPI: [f32; 4] = [0.024756864, -0.19046289, 0.8117187, -1.6449335];
/// `(e^r − 1 − r) / r²` on [−0.6, 0.6] ([`EXP`]'s interval widened, a degree higher): error
/// 4.4e-9 relative to `e^r`.
const EXP_WIDE: [f32; 6] = [
    0.00019987195,
    0.0014067607,
    0.008333133,
    0.041662794,
    0.16666667,
    0.50000024,
];
/// `ln √(2π)` rounded to a multiple of 2^-16 (so that `y` minus it is exact for `y` from 1
/// to 45), and the rest.
const LN_SQRT_2PI_16: (f32, f32) = (0.918_945_3, -6.779_295_3e-6);

/// `lgamma(y) = (y − ½) ln y − y + ln √(2π) + μ(y)` for `y + y_lo` from 1 to 45 as `hi + lo
/// + tiny`, `lo` within ±0.25 and `tiny` (TwoSum's error in `hi`) below 2^-17, not
/// renormalized: `hi` leaves out `ln y`'s series times `y − ½` and `μ`, so that it is ready
/// before them. `½ ln y` by [`log_lean_parts`] (σ = ½, with `2f_lo·f²`), its high part times
/// `2y − 1` in two parts, `y − ln √(2π)` (exact with [`LN_SQRT_2PI_16`]) subtracted by
/// TwoSum, the rest summed in an order that keeps the chain short (the series last); `y_lo`
/// counts the derivative `ψ(y) ≈ ln y − 1/(2y)` times (the `1/(12y²)` left out of `ψ` is
/// below 1/12, and `|y_lo|` below 2^-24·y).
fn stirling(y: Tile, y_lo: Tile) -> (Tile, Tile, Tile) {
    let t: Tile = 1.0 / y;
    // ½ ln y (σ = ½: h = m + 1 and its low part are sums), times 2y − 1 (exact below 2^23).
    let (l, e, k, series, ln2_lo) = log_lean_parts(y, None, None, splat(y, 0.0), true, true);
    let w = y + (y - 1.0);
    let (p, p_err) = two_prod(w, l);
    let (hi, hi_err) = two_sum(p, LN_SQRT_2PI_16.0 - y);
    // ψ(y)/2.
    let dy = fma(t, -0.25, l);
    let early = fma(
        t,
        poly(t, &BINET),
        fma(dy, y_lo + y_lo, splat(y, LN_SQRT_2PI_16.1)),
    );
    let late = fma(w, fma(k, ln2_lo, e), p_err);
    (hi, fma(w, series, early) + late, hi_err)
}

/// `e^(hi + lo + tiny)` as `2^k · (e_hi + e_lo)` (`k` an i32 tile) for `hi` in [−170, 170],
/// `lo` within ±0.25 and `|tiny|` below 2^-17: [`exp_core`]'s reduction with `lo` added
/// after the exact `hi − k·LN2.0` by Fast2Sum (`r` to 0.6, so [`EXP_WIDE`]; where `lo` is the
/// larger, TwoSum's error would be at most an ulp of `r` times 2^-24) and `tiny` to its
/// error `r_lo`, `r²·P(r)` by Estrin's scheme, and `e^(r + r_lo) = e^r + r_lo·e^r` with
/// `e^r` as `1 + r + r²·P(r)` there (`1 + r` alone would cost `r_lo·r²/2`, up to 2^-19.5).
fn exp_wide(hi: Tile, lo: Tile, tiny: Tile) -> (Tile, Tile, Tile) {
    let shifted = fma(hi, LOG2_E, ROUNDER);
    let kf = shifted - ROUNDER;
    let k = bitcast(shifted, DType::I32) - ROUNDER_BITS;
    let (r, r_lo) = fast_two_sum(fma(kf, -LN2.0, hi), lo);
    let r_lo = fma(kf, -LN2.1, r_lo) + tiny;
    let r2 = r * r;
    let c = &EXP_WIDE;
    let p = fma(
        r2 * r2,
        fma(r, c[0], c[1]),
        fma(r2, fma(r, c[2], c[3]), fma(r, c[4], c[5])),
    );
    let (e_hi, q) = (r + 1.0, r2 * p);
    (k, e_hi, fma(r_lo, e_hi + q, q) + (r - (e_hi - 1.0)))
}

/// [`tgamma`]'s divisor in two parts: `|x|` (clamped, as `a`) from 0 on, 1 where `usual`
/// (from 1 to 44), `sin(πx)/π` below 0 for `|x| < 2^23`: `x = n + r` exactly (`|r| ≤
/// ½`), `r` with its sign flipped at odd `n` (`sin πx = (−1)^n sin πr`; `n + 2^24 − 1` is
/// exact from −2^23 on and its low bit is `n`'s parity flipped, so it flips `n − x`) and
/// `r + r³·P(r²)`, renormalized.
fn gamma_divisor(x: Tile, a: Tile, neg: Tile, usual: Tile) -> (Tile, Tile) {
    let n = super::lang::rint(x);
    let parity = bitcast(n + 16_777_215.0f32, DType::I32) << 31;
    let r = bitcast(bitcast(n - x, DType::I32) ^ parity, DType::F32);
    let r = where_(neg, r, where_(usual, splat(a, 1.0), a));
    let z = r * r;
    // 0 from 0 on, as `r·0·P(0)` would be, but folded away where `neg` is known false.
    fast_two_sum(r, where_(neg, r * z * poly(z, &SINPI), splat(r, 0.0)))
}

/// `Γ(x) = g / d` with `g = e^(±lgamma(y))` ([`stirling`]'s exponent with the sign of `x`,
/// through [`exp_wide`]) for `y = 1 + a` (in two parts), `a = min(|x|, 44)`: `d = a` from 0
/// to 1 (`Γ(x) = Γ(1 + x)/x`) and, by the reflection, `d = sin(πx)/π` below 0 (which
/// carries the sign); from 1 to 44 `y = a` and `d = 1` (no quotient where the lanes are
/// all there: see `likely`); the quotient in two parts, rounded once with the power of two.
/// Past 44 the result is inf above 0 and 0 below (NaN at the negative integers); below
/// 2^-30 it is `1/x` (`1/x − γ` rounds to it or next to it: ±inf at ±0 and where it
/// overflows), which the quotient's `1/d` is there, with the sign of `x`. NaN at the
/// negative integers (a divisor 0), −inf and NaN.
pub(super) fn tgamma(x: Tile) -> Tile {
    // From 1 to 44, the usual arguments (see `likely`), no case but Stirling's: the sign
    // bit (below −0 and 0 alike: ±0 are replaced at the end), the clamp and the tiny
    // arguments are rare cases, each folded away where every lane is usual (one test).
    let a = abs(x);
    let past = gt(a, 44.0);
    let usual = likely(super::lang::compare(x, CmpPred::Ge, 1.0) & !past, true);
    let neg = !usual & signbit(x);
    let a = where_(past, 44.0f32, a);
    // y = 1 + a in two parts (a itself where usual): y − 1 is exact (y below 2^24) and
    // then so is a − (y − 1) (Sterbenz from 1 on, Fast2Sum below).
    let y = where_(usual, a, a + 1.0);
    let y_lo = where_(usual, splat(a, 0.0), a - (y - 1.0));
    let (e, e_lo, e_tiny) = stirling(y, y_lo);
    // Both parts with the sign of x (−lgamma(y) below 0; at −0 the result is replaced).
    let signed = |v: Tile| where_(neg, -v, v);
    let (k, g, g_lo) = exp_wide(signed(e), signed(e_lo), signed(e_tiny));
    let (d, d_lo) = gamma_divisor(x, a, neg, usual);
    let inv: Tile = 1.0 / d;
    let q = g * inv;
    // (g_lo itself where usual: `d = 1`; the result is the same, q + q_lo being the
    // nonzero q there.)
    let q_lo = where_(usual, g_lo, (fma(-q, d, g) + (g_lo - q * d_lo)) * inv);
    let r = scale(q + q_lo, k);
    // The result first in the code (as `dy` first in stirling's product and q's terms
    // first in exp_wide's sum: the same values, a faster CPU loop).
    where_(usual | !lt(a, 2f32.powi(-30)), r, copysign(inv, x))
}

/// `ln C = ln √(2π) − ½` in two parts (Stirling's constant in `lgamma`'s sum).
const LN_STIRLING_C: (f32, f32) = (0.418_938_55, -1.416_814_5e-8);
/// `1 + ln C − 2 ln 2`: the rest of the constant `1 + ln C` of `lgamma` below −1 once `2 ln 2`
/// is in its logarithm (error 8.2e-10).
const LGAMMA_NEG_REST: f32 = 0.032_644_17;
/// The first f32 whose `lgamma` rounds to inf (the one below gives 3.4028234e38).
const LGAMMA_OVERFLOW: f32 = 4.085_003_4e36;
/// Where `lgamma` switches from [`LGAMMA_Q`] to Stirling's series above 0.
const LGAMMA_STIRLING: f32 = 2.25;
/// `Q(u) = lgamma(1 + u)/(u(u − 1))` on [0, 1.25] as `Q(c) + (u − c)·P(u − c)` with
/// `c = 0.625`: `P` here, `Q(c)` in two parts below; relative error of `Q` 2.0e-8
/// (`fit_libm_f32.py`'s `fit` of `(Q(v + c) − Q(c))/v` in `v` on [−c, 1.25 − c], degree 8,
/// weight `v/Q(v + c)`).
const LGAMMA_Q: [f32; 9] = [
    -0.00080092996,
    0.0013742683,
    -0.0017072068,
    0.0031853425,
    -0.0062326356,
    0.01200957,
    -0.024193272,
    0.052578703,
    -0.13157901,
];
const LGAMMA_Q_AT_C: (f32, f32) = (0.46580964, -5.906258e-09);
/// `ln(sin πr / πr)/r²` in `r²` on [0, ¼]: absolute error of `ln(sin πr / πr)` 3.1e-9
/// (`fit_libm_f32.py`'s `fit`, degree 5, weight `r²`).
const LN_SINC: [f32; 6] = [
    -0.38035902,
    -0.11530761,
    -0.26636273,
    -0.33775392,
    -0.54121625,
    -1.6449333,
];

/// `ln |Γ(x)|` for `a = |x|` as `A·L − M + V` (`M` a logarithm and constants, `V` the
/// rest, below 0.5), every term in two parts:
///
/// - Stirling's series from 2.25 on above 0: `(a − ½)(ln a − 1) + ln C + μ(a)` ([`BINET`]);
/// - below it `G = lgamma(1 + u) = u(u − 1)·Q(u)` ([`LGAMMA_Q`], exact at 1 and 2), `u = a
///   − 1` from 1 on, else `u = a` and `− ln a`;
/// - below 0 the reflection `−lgamma(a) − ln a − ln |sin πr/π|` (`r = x − rint(x)`, exact),
///   `ln |sin πr/π| = ln |r| + h(r)` ([`LN_SINC`]): from 1 on with Stirling's series, `−(a
///   + ½)(ln a − 1) − 1 − ln C − μ(a)`, else `−G(a)`.
///
/// So two logarithms ([`log_lean`]): `L = ln a − 1` (used where `A = x − ½` is not 0, in
/// two parts, so that `A·L` is exact), and `M = ln |r|` below 0, `ln a` from 0 to 1, else
/// `ln 1`, with `−ln C` or `2 ln 2` inside it where adding them is exact; the two large
/// terms `A·L` and `M` by TwoSum, the rest as a correction, rounded once. The sum is
/// computed halved (every constant and coefficient halved, exactly), so that `A·L` stays
/// finite wherever the result does. Near the zeros of the negative axis the error is
/// absolute, below 2^-25 or so. +inf at 0, at the negative integers, at ±inf and from
/// [`LGAMMA_OVERFLOW`] on.
pub(super) fn lgamma(x: Tile) -> Tile {
    let a = abs(x);
    // The cases below 0 and 1 are rare: the CPU's loops over tiles without them compute
    // one logarithm and no sine (see `likely`).
    let neg = likely(lt(x, 0.0), false);
    let ge1 = likely(ge(a, 1.0), true);
    let neg_large = neg & ge1;
    let pos_large = ge(x, LGAMMA_STIRLING);
    let large = pos_large | neg_large;
    // L/2 = (ln a − 1)/2 (−½ is exact and first in exponent).
    let (l, l_lo) = log_lean(a, None, None, splat(a, -0.5), false, true);
    // A = x − ½ (a − ½ above 0, −(a + ½) below) in two parts, or 0.
    let xs = where_(large, x, splat(x, 0.5));
    let aa = xs - 0.5;
    let aa_lo = (xs - aa) - 0.5;
    let (p, p_err) = two_prod(aa, l);
    // M/2 for x2 = |r| below 0, a from 0 to 1, else 1, scaled by 2^24 (never subnormal)
    // with 2^−24 (and 4 from −1 on) in j, and −ln C in the constant at Stirling's lanes
    // above 0 (at 1, where the sum is exact).
    let r = x - super::lang::rint(x);
    let x2 = where_(neg, abs(r), where_(ge1, splat(a, 1.0), a));
    let (m, m_lo) = log_lean(
        x2 * 16_777_216.0f32,
        None,
        Some(where_(neg_large, splat(x, -22.0), splat(x, -24.0))),
        where_(pos_large, splat(x, -0.5 * LN_STIRLING_C.0), splat(x, 0.0)),
        false,
        true,
    );
    // μ(a)/2 and the rest of the constants on Stirling's lanes.
    let t: Tile = 1.0 / a;
    let mu = fma(
        t,
        poly(t, &halved(BINET)),
        where_(
            neg,
            splat(t, 0.5 * LGAMMA_NEG_REST),
            splat(t, 0.5 * LN_STIRLING_C.1),
        ),
    );
    // G/2 = u(u − 1)·Q(u)/2 with u(u − 1) exact.
    let u = where_(ge1, a - 1.0, a);
    let (q, q_lo) = two_prod(u, u - 1.0);
    let uc = u - 0.625;
    let rest = q * fma(uc, poly(uc, &halved(LGAMMA_Q)), 0.5 * LGAMMA_Q_AT_C.1);
    let q_c = 0.5 * LGAMMA_Q_AT_C.0;
    let g = fma(q, q_c, fma(q_lo, q_c, rest));
    let v = where_(large, mu, g);
    // h(r)/2 = ln(sin πr / πr)/2.
    let z = r * r;
    let h = z * poly(z, &halved(LN_SINC));
    let v = where_(neg, -(v + h), v);
    let lo = fma(aa, l_lo, fma(aa_lo, l, p_err)) - m_lo + v;
    let (s, e) = two_sum(p, -m);
    // The operands of these sums, and of the select below, in the order that emits the CPU
    // loop fastest (the same values; 5% in cache against `s + (e + lo)`).
    let r = ((lo + e) + s) * 2.0;
    // +inf at the poles (x2 = 0: 0 and the negative integers), at ±inf and from the first
    // f32 whose lgamma rounds to inf on.
    let special = eq(x2, 0.0) | ge(a, LGAMMA_OVERFLOW);
    where_(!special, r, splat(x, f32::INFINITY))
}
