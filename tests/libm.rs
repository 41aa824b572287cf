//! Triton's `libdevice` math functions (`tanh` … `nextafter`, `trace/libm.rs`) on every
//! device, in f32 and f64, measured in ulps against the host's libm: f32 against the f64
//! function rounded once (so, nearly the exact value), f64 against the f64 function. Special
//! values (NaN, infinities, signed zeros) must match exactly. The measured maxima are
//! printed (`cargo test libm -- --nocapture`); the README's table lists them.
//!
//! One exception: f32 `lgamma` below 0. Its zeros there (−2.457…, −2.747…, and a pair
//! next to every negative integer from −3 on) make `ln |Γ(x)|` a difference of nearly
//! equal terms, which its f32 algorithm keeps to an absolute error, not a relative one.
//! So below 0 its error is measured in ulps of `max(|want|, 1)`: where `|want| < 1` as
//! an absolute error in units of 2^-23 (the f32 bound of 2 allows 2^-22), elsewhere in
//! ulps of the result, as for every other function and argument.

use crate::common::all_devices;
use half::f16;
use tritium::dsl::trace::lang;
use tritium::dsl::trace::Tile;
use tritium::prelude::*;

/// The C library's functions the references need.
mod c {
    extern "C" {
        pub fn remainder(x: f64, y: f64) -> f64;
        pub fn remainderf(x: f32, y: f32) -> f32;
        pub fn nextafter(x: f64, y: f64) -> f64;
        pub fn nextafterf(x: f32, y: f32) -> f32;
        pub fn erfc(x: f64) -> f64;
        // Rust's own `asinh` and `acosh` overflow for large arguments.
        pub fn asinh(x: f64) -> f64;
        pub fn acosh(x: f64) -> f64;
        pub fn atanh(x: f64) -> f64;
        pub fn lgamma(x: f64) -> f64;
        pub fn tgamma(x: f64) -> f64;
        pub fn erf(x: f64) -> f64;
    }
}

// SAFETY (all three): plain libm calls.
fn asinh(x: f64) -> f64 {
    unsafe { c::asinh(x) }
}
fn acosh(x: f64) -> f64 {
    unsafe { c::acosh(x) }
}
fn atanh(x: f64) -> f64 {
    unsafe { c::atanh(x) }
}
// SAFETY (all four): plain libm calls.
fn erf(x: f64) -> f64 {
    unsafe { c::erf(x) }
}
fn erfc(x: f64) -> f64 {
    unsafe { c::erfc(x) }
}
fn lgamma(x: f64) -> f64 {
    unsafe { c::lgamma(x) }
}
fn tgamma(x: f64) -> f64 {
    unsafe { c::tgamma(x) }
}

const LEN: usize = 128;

/// A one-argument function: its name, the DSL function, the reference, and the f32 and
/// f64 bounds in ulps.
type Unary = (&'static str, fn(Tile) -> Tile, fn(f64) -> f64, u64, u64);

fn unaries() -> Vec<Unary> {
    vec![
        ("tanh", |a| lang::tanh(a), f64::tanh, 2, 2),
        ("sinh", |a| lang::sinh(a), f64::sinh, 2, 3),
        ("cosh", |a| lang::cosh(a), f64::cosh, 2, 2),
        ("asinh", |a| lang::asinh(a), asinh, 2, 3),
        ("acosh", |a| lang::acosh(a), acosh, 2, 3),
        ("atanh", |a| lang::atanh(a), atanh, 2, 3),
        ("atan", |a| lang::atan(a), f64::atan, 2, 2),
        ("asin", |a| lang::asin(a), f64::asin, 2, 3),
        ("acos", |a| lang::acos(a), f64::acos, 2, 3),
        ("exp10", |a| lang::exp10(a), |x| 10f64.powf(x), 2, 3),
        ("expm1", |a| lang::expm1(a), f64::exp_m1, 2, 3),
        ("log1p", |a| lang::log1p(a), f64::ln_1p, 2, 3),
        ("log10", |a| lang::log10(a), f64::log10, 2, 3),
        ("cbrt", |a| lang::cbrt(a), f64::cbrt, 2, 2),
        ("tgamma", |a| lang::tgamma(a), tgamma, 2, 32),
        ("lgamma", |a| lang::lgamma(a), lgamma, 2, 32),
        ("erf", |a| lang::erf(a), erf, 2, 2),
        ("erfc", |a| lang::erfc(a), erfc, 2, 4),
    ]
}

/// A two-argument function, as [`Unary`].
type Binary = (
    &'static str,
    fn(Tile, Tile) -> Tile,
    fn(f64, f64) -> f64,
    u64,
    u64,
);

fn binaries() -> Vec<Binary> {
    vec![
        ("atan2", |a, b| lang::atan2(a, b), f64::atan2, 2, 3),
        ("pow", |a, b| lang::pow(a, b), f64::powf, 2, 128),
        ("hypot", |a, b| lang::hypot(a, b), f64::hypot, 2, 2),
        ("fmod", |a, b| lang::fmod(a, b), |x, y| x % y, 0, 0),
        ("copysign", |a, b| lang::copysign(a, b), f64::copysign, 0, 0),
    ]
}

/// Every function of `x` (and `y`, and the integer `n`) into consecutive rows of `out`.
#[kernel]
fn everything<T: Float>(out: Ptr<T>, x: Ptr<T>, y: Ptr<T>, n: Ptr<i32>, #[constexpr] N: usize) {
    let r = arange(0, N);
    let a = load(x + r);
    let b = load(y + r);
    let k = load(n + r);
    fill_rows(out, r, a, b, k, N as i32);
}

/// The kernel's rows, in the order [`check`] reads them.
fn fill_rows(out: Tile, r: Tile, a: Tile, b: Tile, k: Tile, n: i32) {
    let mut row = 0;
    let mut put = |v: Tile| {
        lang::store(out + (row * n) + r, v, lang::NoArg);
        row += 1;
    };
    for (_, f, ..) in unaries() {
        put(f(a));
    }
    for (_, f, ..) in binaries() {
        put(f(a, b));
    }
    put(lang::remainder(a, b));
    put(lang::nextafter(a, b));
    put(lang::ldexp(a, k));
    let (m, e) = lang::frexp(a);
    put(m);
    put(lang::cast(e, a.dtype()));
}

/// Edge values, then log-uniform magnitudes of both signs, as f64.
fn inputs(seed: u64) -> Vec<f64> {
    let edges = [
        0.0,
        -0.0,
        1.0,
        -1.0,
        0.5,
        -0.5,
        2.0,
        -3.0,
        10.0,
        1e-5,
        -1e-7,
        0.999,
        1.001,
        88.0,
        -90.0,
        700.0,
        -745.0,
        1e10,
        1e-30,
        5e-324,
        f64::MAX,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
    ];
    let mut s = seed;
    let mut next = || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        (s >> 11) as f64 / (1u64 << 53) as f64
    };
    let mut v: Vec<f64> = edges.to_vec();
    while v.len() < LEN {
        let mag = 10f64.powf(next() * 9.0 - 6.0);
        let sign = if next() < 0.5 { -1.0 } else { 1.0 };
        // Some small integers, for `pow`'s odd and even powers of negative numbers.
        let x = if next() < 0.15 {
            (next() * 12.0).floor() - 6.0
        } else {
            sign * mag
        };
        v.push(x);
    }
    v
}

/// Distance in ulps of `dtype`'s values `got` and `want` (given as f64 holding them): 0
/// for equal bits or two NaNs; `u64::MAX` for NaN against a number or a zero whose sign
/// differs.
fn ulps(got: f64, want: f64, f32s: bool) -> u64 {
    if got.is_nan() || want.is_nan() {
        return if got.is_nan() && want.is_nan() {
            0
        } else {
            u64::MAX
        };
    }
    if want == 0.0 || got == 0.0 || got.is_infinite() || want.is_infinite() {
        return if got.to_bits() == want.to_bits() {
            0
        } else {
            u64::MAX
        };
    }
    let ordered = |v: f64| -> i64 {
        let b = if f32s {
            i64::from((v as f32).to_bits() as i32)
        } else {
            v.to_bits() as i64
        };
        if b < 0 {
            i64::MIN - b
        } else {
            b
        }
    };
    ordered(got).abs_diff(ordered(want))
}

/// [`ulps`] for f32 values, in ulps of `max(|want|, 1)` (f32 `lgamma` below 0, see the
/// module's doc).
fn ulps_of_at_least_one(got: f64, want: f64) -> u64 {
    if !got.is_finite() || !want.is_finite() || want.abs() >= 1.0 {
        return ulps(got, want, true);
    }
    // 2^-23: an ulp of 1 (and of every f32 in [1, 2)).
    ((got - want).abs() / f64::from(f32::EPSILON)).round() as u64
}

/// The references of every row, for inputs `x`, `y`, `n` (already rounded to the dtype).
fn references(x: &[f64], y: &[f64], n: &[i32], f32s: bool) -> Vec<(String, Vec<f64>, u64)> {
    let round = |v: f64| if f32s { v as f32 as f64 } else { v };
    let mut rows = Vec::new();
    for (name, _, r, b32, b64) in unaries() {
        let want = x.iter().map(|&v| round(r(v))).collect();
        rows.push((name.to_string(), want, if f32s { b32 } else { b64 }));
    }
    for (name, _, r, b32, b64) in binaries() {
        let want = x.iter().zip(y).map(|(&a, &b)| round(r(a, b))).collect();
        rows.push((name.to_string(), want, if f32s { b32 } else { b64 }));
    }
    // The exact functions, against the C library's functions of the dtype.
    let exact = |f: &dyn Fn(f64, f64, i32) -> f64| {
        x.iter()
            .zip(y)
            .zip(n)
            .map(|((a, b), k)| f(*a, *b, *k))
            .collect()
    };
    // SAFETY: plain libm calls.
    let rem: Vec<f64> = exact(&|a, b, _| unsafe {
        if f32s {
            f64::from(c::remainderf(a as f32, b as f32))
        } else {
            c::remainder(a, b)
        }
    });
    rows.push(("remainder".into(), rem, 0));
    // SAFETY: plain libm calls.
    let next: Vec<f64> = exact(&|a, b, _| unsafe {
        if f32s {
            f64::from(c::nextafterf(a as f32, b as f32))
        } else {
            c::nextafter(a, b)
        }
    });
    rows.push(("nextafter".into(), next, 0));
    let ldexp: Vec<f64> = exact(&|a, _, k| round(a * 2f64.powi(k.clamp(-1100, 1100))));
    rows.push(("ldexp".into(), ldexp, 0));
    let (mant, expo): (Vec<f64>, Vec<f64>) = x
        .iter()
        .map(|&a| {
            if a == 0.0 || !a.is_finite() {
                return (a, 0.0);
            }
            let e = a.abs().log2().floor() as i32 + 1;
            // In two exact steps: 2^e alone is not representable for subnormal `a`.
            let m = a / 2f64.powi(e / 2) / 2f64.powi(e - e / 2);
            // log2 may be off by one next to powers of two.
            let (m, e) = if m.abs() >= 1.0 {
                (m / 2.0, e + 1)
            } else if m.abs() < 0.5 {
                (m * 2.0, e - 1)
            } else {
                (m, e)
            };
            (m, f64::from(e))
        })
        .unzip();
    rows.push(("frexp mantissa".into(), mant, 0));
    rows.push(("frexp exponent".into(), expo, 0));
    rows
}

/// Runs `everything` on `device` for dtype `T` and checks every row.
fn check<T: Float + Copy + Default>(
    device: &Device,
    to: fn(f64) -> T,
    from: fn(T) -> f64,
    f32s: bool,
) -> Vec<(String, u64)> {
    check_at(device, to, from, f32s, inputs(7))
}

/// [`check`] at the inputs `xs` (their count a power of two).
fn check_at<T: Float + Copy + Default>(
    device: &Device,
    to: fn(f64) -> T,
    from: fn(T) -> f64,
    f32s: bool,
    xs: Vec<f64>,
) -> Vec<(String, u64)> {
    let len = xs.len();
    let x: Vec<T> = xs.iter().map(|&v| to(v)).collect();
    let y: Vec<T> = xs.iter().rev().map(|&v| to(v)).collect();
    let n: Vec<i32> = (0..len as i32).map(|i| (i * 37) % 300 - 150).collect();
    let (xr, yr): (Vec<f64>, Vec<f64>) = (
        x.iter().map(|v| from(*v)).collect(),
        y.iter().map(|v| from(*v)).collect(),
    );
    let want = references(&xr, &yr, &n, f32s);
    let mut out = vec![T::default(); len * want.len()];
    everything::launch(device, 1, &mut out[..], &x[..], &y[..], &n[..], len)
        .unwrap_or_else(|e| panic!("{device:?}: {e}"));
    let mut measured = Vec::new();
    for (k, (name, row, bound)) in want.iter().enumerate() {
        let mut worst = 0;
        for i in 0..len {
            let got = from(out[k * len + i]);
            let d = if f32s && name == "lgamma" && xr[i] < 0.0 {
                ulps_of_at_least_one(got, row[i])
            } else {
                ulps(got, row[i], f32s)
            };
            assert!(
                d <= *bound,
                "{device:?} {name}({}, {}): got {got:e}, want {:e} ({d} ulps, bound {bound})",
                xr[i],
                yr[i],
                row[i]
            );
            worst = worst.max(d);
        }
        measured.push((name.clone(), worst));
    }
    measured
}

#[test]
fn libdevice_functions_within_their_ulp_bounds_on_every_device() {
    for device in all_devices() {
        let f32s = check::<f32>(&device, |v| v as f32, f64::from, true);
        let f64s = check::<f64>(&device, |v| v, |v| v, false);
        for ((name, a), (_, b)) in f32s.iter().zip(&f64s) {
            eprintln!("{device:?} {name}: f32 {a} ulps, f64 {b} ulps");
        }
    }
}

/// f32 values around every point where an f32 algorithm (`trace/libm_f32.rs`) switches
/// formulas or its result leaves the normal range (16 consecutive values about each, of
/// both signs), then log-uniform magnitudes from 1e-30 to 1e3 and uniform values in
/// [−12, 12]: 2048 in all.
fn edge_inputs() -> Vec<f64> {
    let switches = [
        0.5f32,
        0.75,
        1.0,
        2.0,
        0.414_213_57,
        2.414_213_7,
        4096.0,
        2f32.powi(-12),
        88.72,
        89.41,
        35.04,
        38.53,
        -45.0,
        9.2,
        10.05,
        2.5,
        0.999_99,
        f32::MIN_POSITIVE,
        1e-7,
        60.0,
        // tgamma and lgamma: the clamp of 1 + |x| (45), lgamma's switch to Stirling's
        // series (2.25), points about its zeros at 1 and 2, tiny x.
        45.0,
        0.8,
        1.2,
        1.75,
        2.25,
        2f32.powi(-100),
        // erf's clamp, erfinv's w = 5 (a switch of |x|).
        4.0,
        0.996_625_3,
        // tanh's clamp of |x|.
        10.0,
    ];
    let mut v = Vec::new();
    for c in switches {
        for c in [c, -c] {
            let b = c.to_bits() as i64;
            for k in -8..8i64 {
                v.push(f64::from(f32::from_bits((b + k) as u32)));
            }
        }
    }
    let mut s = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        (s >> 11) as f64 / (1u64 << 53) as f64
    };
    while v.len() < 2048 {
        let sign = if next() < 0.5 { -1.0 } else { 1.0 };
        let x = if v.len() % 2 == 0 {
            sign * 10f64.powf(next() * 33.0 - 30.0)
        } else {
            next() * 24.0 - 12.0
        };
        v.push(f64::from(x as f32));
    }
    v
}

#[test]
fn f32_functions_within_their_bounds_near_every_switch() {
    for device in all_devices() {
        let measured = check_at::<f32>(&device, |v| v as f32, f64::from, true, edge_inputs());
        for (name, ulps) in measured {
            eprintln!("{device:?} {name} near the switches: f32 {ulps} ulps");
        }
    }
}

/// `erfc` of f32 (and f16) in the tail where `1 - erf` would have cancelled.
#[kernel]
fn erfcs<T: Float>(out: Ptr<T>, x: Ptr<T>, #[constexpr] N: usize) {
    let r = arange(0, N);
    store(out + r, erfc(load(x + r)));
}

#[test]
fn erfc_keeps_the_tail() {
    let xs: Vec<f32> = (0..64).map(|i| -3.0 + i as f32 * 0.15).collect();
    for device in all_devices() {
        let mut out = vec![0f32; 64];
        erfcs::launch(&device, 1, &mut out[..], &xs[..], 64).unwrap();
        for (x, got) in xs.iter().zip(&out) {
            // SAFETY: a plain libm call.
            let want = unsafe { c::erfc(f64::from(*x)) };
            let rel = (f64::from(*got) - want).abs() / want;
            assert!(rel < 2.5e-7, "{device:?} erfc({x}) = {got}, want {want}");
        }
        let h: Vec<f16> = xs.iter().map(|v| f16::from_f32(*v)).collect();
        let mut out = [f16::ZERO; 64];
        erfcs::launch(&device, 1, &mut out[..], &h[..], 64).unwrap();
        // SAFETY: a plain libm call.
        let want = unsafe { c::erfc(f64::from(h[63].to_f32())) };
        assert_eq!(out[63], f16::from_f64(want), "{device:?}");
    }
}

/// `erfinv` of f32 (and f16).
#[kernel]
fn erfinvs<T: Float>(out: Ptr<T>, x: Ptr<T>, #[constexpr] N: usize) {
    let r = arange(0, N);
    store(out + r, erfinv(load(x + r)));
}

/// The x with erf(x) = y, by bisection on libm's erf.
fn erfinv_ref(y: f64) -> f64 {
    if y == 0.0 {
        return y;
    }
    if y.abs() >= 1.0 || y.is_nan() {
        return if y.abs() == 1.0 {
            f64::INFINITY.copysign(y)
        } else {
            f64::NAN
        };
    }
    let (mut lo, mut hi) = (-6.0f64, 6.0f64);
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        // SAFETY: a plain libm call.
        if unsafe { c::erf(mid) } < y {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    0.5 * (lo + hi)
}

#[test]
fn erfinv_within_its_bound_on_every_device() {
    let mut xs: Vec<f32> = (0..60)
        .map(|i| -0.999 + i as f32 * (1.998 / 59.0))
        .collect();
    xs.extend([0.0, -0.0, 1.0, -1.0, 1.5, 1e-6, 0.99999, f32::NAN]);
    let n = 128;
    xs.resize(n, 0.25);
    for device in all_devices() {
        let mut out = vec![0f32; n];
        erfinvs::launch(&device, 1, &mut out[..], &xs[..], n).unwrap();
        let mut worst = 0;
        for (x, got) in xs.iter().zip(&out) {
            let want = erfinv_ref(f64::from(*x)) as f32;
            let d = ulps(f64::from(*got), f64::from(want), true);
            assert!(
                d <= 2,
                "{device:?} erfinv({x}) = {got}, want {want} ({d} ulps)"
            );
            worst = worst.max(d);
        }
        eprintln!("{device:?} erfinv: f32 {worst} ulps");
    }
}

/// `erf`, `erfc` and `erfinv` of f64, densely over each fit's interval and towards ±1.
#[kernel]
fn erf_family(
    erfs: Ptr<f64>,
    erfcs: Ptr<f64>,
    erfinvs: Ptr<f64>,
    x: Ptr<f64>,
    y: Ptr<f64>,
    #[constexpr] N: usize,
) {
    let r = arange(0, N);
    let a = load(x + r);
    store(erfs + r, erf(a));
    store(erfcs + r, erfc(a));
    store(erfinvs + r, erfinv(load(y + r)));
}

/// The y with erf(y) = x: bisection on libm's erf, or on erfc towards ±1 (where `1 - |x|`
/// is exact and erf would have cancelled).
fn erfinv_ref64(x: f64) -> f64 {
    if x.abs() < 0.5 {
        return erfinv_ref(x);
    }
    if x.abs() >= 1.0 || x.is_nan() {
        return erfinv_ref(x);
    }
    let target = 1.0 - x.abs();
    let (mut lo, mut hi) = (0.0f64, 30.0f64);
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if erfc(mid) > target {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    (0.5 * (lo + hi)).copysign(x)
}

#[test]
fn erf_erfc_and_erfinv_of_f64_within_a_few_ulps() {
    let n = 512;
    let x: Vec<f64> = (0..n)
        .map(|i| -6.0 + 34.0 * i as f64 / (n - 1) as f64)
        .collect();
    let mut y: Vec<f64> = (1..=52)
        .flat_map(|k| [1.0 - 0.5f64.powi(k), -1.0 + 0.5f64.powi(k)])
        .collect();
    let mut s = 0x2545_f491_4f6c_dd1du64;
    while y.len() < n {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        y.push((s >> 11) as f64 / (1u64 << 52) as f64 - 1.0);
    }
    for device in all_devices() {
        let (mut e, mut ec, mut ei) = (vec![0f64; n], vec![0f64; n], vec![0f64; n]);
        erf_family::launch(
            &device,
            1,
            &mut e[..],
            &mut ec[..],
            &mut ei[..],
            &x[..],
            &y[..],
            n,
        )
        .unwrap();
        let mut worst = [0u64; 3];
        let rows = [
            ("erf", &e, &x, erf as fn(f64) -> f64, 2),
            ("erfc", &ec, &x, erfc, 4),
            ("erfinv", &ei, &y, erfinv_ref64, 4),
        ];
        for (k, (name, got, args, reference, bound)) in rows.into_iter().enumerate() {
            for (got, arg) in got.iter().zip(args.iter()) {
                let want = reference(*arg);
                let d = ulps(*got, want, false);
                assert!(
                    d <= bound,
                    "{device:?} {name}({arg:e}) = {got:e}, want {want:e} ({d} ulps)"
                );
                worst[k] = worst[k].max(d);
            }
        }
        eprintln!(
            "{device:?} f64 erf {} ulps, erfc {}, erfinv {}",
            worst[0], worst[1], worst[2]
        );
    }
}

/// f32 `tgamma` and `lgamma` of a tile.
#[kernel]
fn gammas(tg: Ptr<f32>, lg: Ptr<f32>, x: Ptr<f32>, #[constexpr] N: usize) {
    let r = arange(0, N);
    let a = load(x + r);
    store(tg + r, tgamma(a));
    store(lg + r, lgamma(a));
}

/// f32 `tgamma` past its overflow (35.04; 44, where it clamps |x|), at tiny arguments
/// (1/x − γ below 2^-30: ±inf at subnormals of either sign) and f32 `lgamma` next to its
/// overflow (4.0850034e36, where (x − ½)(ln x − 1) in one part would overflow first).
#[test]
fn f32_gamma_functions_where_they_overflow_and_at_tiny_arguments() {
    let mut xs: Vec<f32> = vec![
        35.0,
        35.04,
        35.05,
        44.0,
        44.5,
        1e6,
        1e20,
        1e30,
        3.4e38,
        -44.5,
        -45.5,
        -1e20,
        2f32.powi(-30),
        -2f32.powi(-30),
        1e-30,
        -1e-30,
        3e-39,
        -3e-39,
        2.9e-39,
        1e-40,
        -1e-40,
        1e-45,
        -1e-45,
        4.084_948e36,
        4.085_003e36,
        4.085_003_4e36,
        1e37,
    ];
    xs.resize(32, 2.5);
    for device in all_devices() {
        let (mut tg, mut lg) = (vec![0f32; 32], vec![0f32; 32]);
        gammas::launch(&device, 1, &mut tg[..], &mut lg[..], &xs[..], 32).unwrap();
        for (i, x) in xs.iter().enumerate() {
            for (name, got, want) in [
                ("tgamma", tg[i], tgamma(f64::from(*x))),
                ("lgamma", lg[i], lgamma(f64::from(*x))),
            ] {
                let d = ulps(f64::from(got), f64::from(want as f32), true);
                assert!(d <= 2, "{device:?} {name}({x:e}) = {got:e}, want {want:e}");
            }
        }
    }
}

/// `pow`, `tgamma` and `lgamma` of two blocks of usual arguments (a positive normal base,
/// and from 1 to 44), alone and with one rare argument among them (negative, below 1,
/// zero, subnormal, past the clamp, infinite, NaN): the other lanes' bits are the same
/// either way, and the same on every device. The CPU computes a block of usual lanes in a
/// copy of the loop where their rare cases fold away (`likely` hints), a block with a rare
/// lane in the copy that computes every case: both must give the same bits.
#[test]
fn a_rare_argument_changes_no_other_lane() {
    let n = 2048;
    let usual: Vec<f32> = (0..n)
        .map(|i| 1.0 + (i * 37 % 4301) as f32 / 100.0)
        .collect();
    let ys: Vec<f32> = (0..n)
        .map(|i| (i * 53 % 1999) as f32 / 100.0 - 9.99)
        .collect();
    let rare = [-2.5, 0.25, 0.0, -0.0, 1e-40, 50.0, f32::INFINITY, f32::NAN];
    let mut first: Option<Vec<Vec<u32>>> = None;
    for device in all_devices() {
        let run = |x: &[f32], f: usize| {
            let mut out = vec![0f32; n];
            dense::launch(&device, 2, &mut out[..], x, &ys[..], n as i32, f).unwrap();
            out.iter().map(|v| v.to_bits()).collect::<Vec<u32>>()
        };
        let wants: Vec<Vec<u32>> = [0, 2, 3].iter().map(|&f| run(&usual, f)).collect();
        for (&f, want) in [0, 2, 3].iter().zip(&wants) {
            for r in rare {
                let mut x = usual.clone();
                x[517] = r;
                let mut got = run(&x, f);
                got[517] = want[517];
                assert!(got == *want, "{device:?} function {f}, rare {r}");
            }
        }
        match &first {
            None => first = Some(wants),
            Some(first) => assert!(*first == wants, "{device:?} against the first device"),
        }
    }
}

/// `F` of an f32 tile (`pow`'s second argument `y`), for [`f32_dense_sweeps`].
#[kernel]
fn dense(out: Ptr<f32>, x: Ptr<f32>, y: Ptr<f32>, n: i32, #[constexpr] F: usize) {
    let offs = program_id(0) * 1024 + arange(0, 1024);
    let mask = offs < n;
    let a = load(x + offs, mask = mask);
    let b = load(y + offs, mask = mask);
    let r = match F {
        0 => lang::pow(a, b),
        1 => lang::erfinv(a),
        2 => lang::tgamma(a),
        3 => lang::lgamma(a),
        4 => lang::erfc(a),
        _ => lang::tanh(a),
    };
    store(out + offs, r, mask = mask);
}

/// `erfinv y` in f64 by Newton's method from `guess` (on `erfc` from ½ on, where `1 − |y|`
/// is exact).
fn erfinv_newton(y: f64, guess: f64) -> f64 {
    if y == 0.0 || y.abs() >= 1.0 || y.is_nan() {
        return erfinv_ref(y);
    }
    let a = y.abs();
    let mut x = if guess.is_finite() && guess != 0.0 {
        guess.abs()
    } else {
        1.0
    };
    for _ in 0..6 {
        let fx = if a > 0.5 {
            (1.0 - a) - erfc(x)
        } else {
            erf(x) - a
        };
        x -= fx / (std::f64::consts::FRAC_2_SQRT_PI * (-x * x).exp());
    }
    x.copysign(y)
}

/// Every f32 from `lo` to `hi` (both of one sign, `lo` nearer 0) whose bits are a multiple
/// of `step` apart.
fn f32_range(lo: f32, hi: f32, step: u32) -> impl Iterator<Item = f32> {
    (lo.to_bits()..hi.to_bits())
        .step_by(step as usize)
        .map(f32::from_bits)
}

/// `pow`, `erfinv`, `tgamma`, `lgamma`, `erfc` and `tanh` of f32 on the CPU over millions of
/// arguments,
/// against f64 (`erfinv`: Newton's method on libm's `erf` and `erfc`): the largest error in
/// ulps of the exact value, not of its rounding (below 2.5 keeps the rounded result within
/// 2 ulps of the correctly rounded one), which the README quotes; `lgamma` below 0 in ulps
/// of `max(|lgamma x|, 1)` as everywhere here. 120 million arguments (seconds in a release
/// build, minutes in a debug one), so ignored by default:
///
///     cargo test --release -p tritium --test main -- --ignored f32_dense_sweeps --nocapture
#[test]
#[ignore]
fn f32_dense_sweeps() {
    let device = Device::cpu();
    let mut s = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        (s >> 11) as f64 / (1u64 << 53) as f64
    };
    // pow: 4 million pairs, a quarter each with y·ln x uniform up to the overflow and
    // underflow (x of magnitudes 1e-38 to 1e38, and x near 1), x from 1e-4 to 1e4 with y up
    // to ±20, and negative x with integer y.
    let mut pow_args = (Vec::new(), Vec::new());
    for i in 0..1 << 22 {
        let (x, y) = match i % 4 {
            0 | 1 => {
                let x = if i % 4 == 0 {
                    10f64.powf(next() * 76.0 - 38.0)
                } else {
                    1.0 + (next() - 0.5) * 0.9
                };
                (x, (next() * 193.0 - 104.0) / x.ln())
            }
            2 => (10f64.powf(next() * 8.0 - 4.0), next() * 40.0 - 20.0),
            _ => (
                -(10f64.powf(next() * 4.0 - 2.0)),
                (next() * 40.0 - 20.0).round(),
            ),
        };
        pow_args.0.push(x as f32);
        pow_args.1.push(y as f32);
    }
    // erfinv: every 97th f32 below 1 and the 2000 next to 1, of both signs.
    let mut erfinv_args: Vec<f32> = f32_range(f32::from_bits(1), 1.0, 97)
        .chain(f32_range(f32::from_bits(1f32.to_bits() - 2000), 1.0, 1))
        .collect();
    erfinv_args.extend(erfinv_args.clone().iter().map(|v| -v));
    // tgamma, lgamma: every f32 from 0.5 to 3, every 97th from −50 to 50, and 4 million of
    // magnitudes 1e-30 to 1e6 and from −60 to 40.
    let mut gamma_args: Vec<f32> = f32_range(0.5, 3.0, 1)
        .chain(f32_range(f32::MIN_POSITIVE, 50.0, 97))
        .chain(f32_range(-f32::MIN_POSITIVE, -50.0, 97))
        .collect();
    for _ in 0..1 << 21 {
        let sign = if next() < 0.5 { -1.0 } else { 1.0 };
        gamma_args.push((sign * 10f64.powf(next() * 36.0 - 30.0)) as f32);
        gamma_args.push((next() * 100.0 - 60.0) as f32);
    }
    // erfc: every 97th f32 from the smallest normal to 11 (past which it is 0), of both
    // signs.
    let mut erfc_args: Vec<f32> = f32_range(f32::MIN_POSITIVE, 11.0, 97).collect();
    erfc_args.extend(erfc_args.clone().iter().map(|v| -v));
    // tanh: every 7th f32 from 2^-12 (below, tanh x rounds to x) to 10 (from 9.01, to ±1),
    // every 61st negative one.
    let mut tanh_args: Vec<f32> = f32_range(2f32.powi(-12), 10.0, 7).collect();
    tanh_args.extend(f32_range(-2f32.powi(-12), -10.0, 61));
    let sweeps: [(&str, &[f32], &[f32]); 6] = [
        ("pow", &pow_args.0, &pow_args.1),
        ("erfinv", &erfinv_args, &erfinv_args),
        ("tgamma", &gamma_args, &gamma_args),
        ("lgamma", &gamma_args, &gamma_args),
        ("erfc", &erfc_args, &erfc_args),
        ("tanh", &tanh_args, &tanh_args),
    ];
    for (f, (name, x, y)) in sweeps.into_iter().enumerate() {
        let n = x.len();
        let mut out = vec![0f32; n];
        dense::launch(&device, n.div_ceil(1024), &mut out[..], x, y, n as i32, f).unwrap();
        let (mut worst, mut at) = (0f64, 0);
        for i in 0..n {
            let (a, b, got) = (f64::from(x[i]), f64::from(y[i]), f64::from(out[i]));
            let want = match f {
                0 => a.powf(b),
                1 => erfinv_newton(a, got),
                2 => tgamma(a),
                3 => lgamma(a),
                4 => erfc(a),
                _ => a.tanh(),
            };
            let rounded = f64::from(want as f32);
            if !rounded.is_finite() || rounded == 0.0 || got.is_nan() || !got.is_finite() {
                // Specials and results that round to 0 or overflow: exactly as rounded (or
                // next to it, at the edge of the range).
                assert!(
                    ulps(got, rounded, true) <= 1,
                    "{name}({a:e}, {b:e}) = {got:e}, want {want:e}"
                );
                continue;
            }
            let unit = if f == 3 && a < 0.0 && want.abs() < 1.0 {
                f64::from(f32::EPSILON)
            } else {
                // An ulp of the exact value (of the smallest subnormal below the normal
                // range).
                let e = want.abs().log2().floor().max(-126.0) as i32;
                2f64.powi(e - 23)
            };
            let d = (got - want).abs() / unit;
            if d > worst {
                (worst, at) = (d, i);
            }
        }
        eprintln!(
            "{name}: {n} arguments, at most {worst:.3} ulps of the exact value (at {:e}, {:e})",
            x[at], y[at]
        );
        assert!(worst < 2.5, "{name}: {worst} ulps");
    }
}
