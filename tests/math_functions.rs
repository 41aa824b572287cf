//! The roundings `trunc`, `round`, `rint`, `nearbyint`; Triton's math compositions
//! (`clamp`, `sigmoid`, `softmax`, `fdiv`, `div_rn`, `sqrt_rn`, `isnan`, `isinf`,
//! `isfinite`) and reductions without an axis or with `keep_dims`, on every device against
//! plain Rust.

use crate::common::{all_devices, assert_close, random_f32};
use ndarray::{Array1, Array2, Axis};
use tritium::prelude::*;

/// IEEE 754-2019 maximumNumber: NaN-ignoring, -0 below +0 (the IR's float max).
fn max_number(a: f32, b: f32) -> f32 {
    if a.is_nan() || (a == b && a.is_sign_negative()) {
        b
    } else if b.is_nan() || a > b {
        a
    } else {
        b
    }
}

/// minimumNumber, as [`max_number`].
fn min_number(a: f32, b: f32) -> f32 {
    -max_number(-a, -b)
}

/// Edge values and ordinary ones.
fn inputs(n: usize) -> Array1<f32> {
    let edges = [
        0.0,
        -0.0,
        1.0,
        -1.0,
        f32::NAN,
        f32::INFINITY,
        f32::NEG_INFINITY,
        1e-40,
        3.5,
        -7.25,
        100.0,
        -100.0,
    ];
    Array1::from_iter(
        edges
            .into_iter()
            .chain(random_f32(n - edges.len(), 5).into_iter().map(|v| v * 20.0)),
    )
}

const LEN: usize = 64;

/// Each elementwise composition of `x` (and `y`) into a row of `out` (`9 × N`), and the
/// predicates into `flags` (`3 × N`).
#[kernel]
fn elementwise(out: Ptr<f32>, flags: Ptr<bool>, x: Ptr<f32>, y: Ptr<f32>, #[constexpr] N: usize) {
    let r = arange(0, N);
    let n = N as i32;
    let a = load(x + r);
    let b = load(y + r);
    store(out + r, clamp(a, -2.0, 3.0));
    store(out + n + r, clamp(a, -2.0, 3.0, propagate_nan = true));
    store(out + 2 * n + r, sigmoid(a));
    store(out + 3 * n + r, fdiv(a, b));
    store(out + 4 * n + r, div_rn(a, b));
    store(out + 5 * n + r, sqrt_rn(a));
    store(out + 6 * n + r, clamp(a, b, 5.0));
    store(out + 7 * n + r, fdiv(a, b, ieee_rounding = true));
    store(out + 8 * n + r, sigmoid(cast(a, DType::I32)));
    store(flags + r, isnan(a));
    store(flags + n + r, isinf(a));
    store(flags + 2 * n + r, isfinite(a));
}

#[test]
fn elementwise_compositions_match_rust() {
    let x = inputs(LEN);
    let y = Array1::from_iter(x.iter().rev().map(|v| v * 0.5 + 0.25));
    let clamp_ref = |v: f32, lo: f32, hi: f32| min_number(max_number(v, lo), hi);
    let sigmoid_ref = |v: f32| 1.0 / (1.0 + (-v).exp());
    let mut want = Vec::new();
    want.extend(x.iter().map(|&v| clamp_ref(v, -2.0, 3.0)));
    want.extend(x.iter().map(|&v| {
        if v.is_nan() {
            v
        } else {
            clamp_ref(v, -2.0, 3.0)
        }
    }));
    want.extend(x.iter().map(|&v| sigmoid_ref(v)));
    want.extend(x.iter().zip(&y).map(|(a, b)| a / b));
    want.extend(x.iter().zip(&y).map(|(a, b)| a / b));
    want.extend(x.iter().map(|v| v.sqrt()));
    want.extend(x.iter().zip(&y).map(|(&a, &b)| clamp_ref(a, b, 5.0)));
    want.extend(x.iter().zip(&y).map(|(a, b)| a / b));
    want.extend(x.iter().map(|&v| sigmoid_ref(v as i32 as f32)));
    let want = Array1::from_vec(want);
    let want_flags: Vec<bool> = [f32::is_nan, f32::is_infinite, f32::is_finite]
        .iter()
        .flat_map(|f| x.iter().map(move |v| f(*v)))
        .collect();
    for device in all_devices() {
        let mut out = Array1::<f32>::zeros(9 * LEN);
        let mut flags = Array1::from_elem(3 * LEN, false);
        elementwise::launch(&device, 1, &mut out, &mut flags, x.view(), y.view(), LEN).unwrap();
        for (row, name) in [
            "clamp",
            "clamp nan",
            "sigmoid",
            "fdiv",
            "div_rn",
            "sqrt_rn",
            "clamp by y",
            "fdiv ieee",
            "sigmoid i32",
        ]
        .iter()
        .enumerate()
        {
            let got = out.slice(ndarray::s![row * LEN..(row + 1) * LEN]);
            let w = want.slice(ndarray::s![row * LEN..(row + 1) * LEN]);
            if name.starts_with("sigmoid") {
                // Through exp: within a few ulps.
                assert_close(&got, &w, 4e-7, 1e-37, &format!("{device:?} {name}"));
            } else {
                // Division, square root and clamps are exact (all NaNs equal).
                let bits = |a: ndarray::ArrayView1<f32>| {
                    a.mapv(|v| if v.is_nan() { u32::MAX } else { v.to_bits() })
                };
                assert_eq!(bits(got), bits(w), "{device:?} {name}");
            }
        }
        assert_eq!(
            flags.to_vec(),
            want_flags,
            "{device:?} isnan/isinf/isfinite"
        );
    }
}

/// Row softmax of `x` (`R × C`) with `softmax(x, 1)`, and column softmax with the default
/// `dim` (0) and `keep_dims`.
#[kernel]
fn softmaxes(
    rows: Ptr<f32>,
    cols: Ptr<f32>,
    x: Ptr<f32>,
    #[constexpr] R: usize,
    #[constexpr] C: usize,
) {
    let r = arange(0, R);
    let c = arange(0, C);
    let offs = r[(.., None)] * C as i32 + c[(None, ..)];
    let t = load(x + offs);
    store(rows + offs, softmax(t, 1, keep_dims = true));
    store(cols + offs, softmax(t));
}

#[test]
fn softmax_along_either_axis() {
    let (r, c) = (8, 32);
    let x = Array2::from_shape_vec((r, c), random_f32(r * c, 9))
        .unwrap()
        .mapv(|v| v * 10.0);
    let soft = |a: &Array2<f32>, axis: usize| {
        let m = a.map_axis(Axis(axis), |l| l.fold(f32::NEG_INFINITY, |m, &v| m.max(v)));
        let m = m.insert_axis(Axis(axis));
        let e = (a - &m).mapv(f32::exp);
        let s = e.sum_axis(Axis(axis)).insert_axis(Axis(axis));
        e / s
    };
    for device in all_devices() {
        let mut rows = Array2::<f32>::zeros((r, c));
        let mut cols = Array2::<f32>::zeros((r, c));
        softmaxes::launch(&device, 1, &mut rows, &mut cols, x.view(), r, c).unwrap();
        assert_close(&rows, &soft(&x, 1), 1e-5, 1e-7, &format!("{device:?} rows"));
        assert_close(
            &cols,
            &soft(&x, 0),
            1e-5,
            1e-7,
            &format!("{device:?} columns"),
        );
    }
}

/// Reductions of a `R × C` i32 tile over every element, and along an axis with `keep_dims`
/// (broadcast back against the tile: each element minus its row's minimum).
#[kernel]
fn reductions_without_axis(
    all: Ptr<i32>,
    centered: Ptr<i32>,
    x: Ptr<i32>,
    #[constexpr] R: usize,
    #[constexpr] C: usize,
) {
    let r = arange(0, R);
    let c = arange(0, C);
    let offs = r[(.., None)] * C as i32 + c[(None, ..)];
    let t = load(x + offs);
    let i = arange(0, 1);
    store(all + i, sum(t, keep_dims = true).reshape([1]));
    store(all + 1, sum(t));
    store(all + 2, max(t));
    store(all + 3, min(t));
    store(all + 4, argmax(reshape(t, [R * C]), 0));
    store(centered + offs, t - min(t, 1, keep_dims = true));
    store(
        centered + R as i32 * C as i32 + offs,
        t - max(t, -2, keep_dims = true),
    );
}

#[test]
fn reductions_over_every_axis_and_keeping_dims() {
    let (r, c) = (4, 16);
    let x = Array2::from_shape_fn((r, c), |(i, j)| ((i * 37 + j * 11) % 23) as i32 - 9);
    let flat: Vec<i32> = x.iter().copied().collect();
    let (mx, mn) = (*flat.iter().max().unwrap(), *flat.iter().min().unwrap());
    let argmax = flat.iter().position(|&v| v == mx).unwrap() as i32;
    let total: i32 = flat.iter().sum();
    let row_min = x
        .map_axis(Axis(1), |l| *l.iter().min().unwrap())
        .insert_axis(Axis(1));
    let col_max = x
        .map_axis(Axis(0), |l| *l.iter().max().unwrap())
        .insert_axis(Axis(0));
    for device in all_devices() {
        let mut all = Array1::<i32>::zeros(5);
        let mut centered = Array1::<i32>::zeros(2 * r * c);
        reductions_without_axis::launch(&device, 1, &mut all, &mut centered, x.view(), r, c)
            .unwrap();
        assert_eq!(all.to_vec(), [total, total, mx, mn, argmax], "{device:?}");
        let want: Vec<i32> = (&x - &row_min)
            .iter()
            .chain((&x - &col_max).iter())
            .copied()
            .collect();
        assert_eq!(centered.to_vec(), want, "{device:?} keep_dims");
    }
}

/// `isnan` of integers, as a user might write.
#[kernel]
fn isnan_of_ints(out: Ptr<bool>, x: Ptr<i32>) {
    let r = arange(0, 4);
    store(out + r, isnan(load(x + r)));
}

#[test]
fn float_predicates_of_integers_are_an_error() {
    let x = Array1::<i32>::zeros(4);
    let mut out = Array1::from_elem(4, false);
    let err = isnan_of_ints::launch(&Device::interpreter(), 1, &mut out, x.view())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("isnan needs floats, got i32") && err.contains("math_functions.rs:"),
        "{err}"
    );
}

/// `trunc`, `round`, `rint` and `nearbyint` of `x` into four rows of `out`.
#[kernel]
fn roundings<T: Float>(out: Ptr<T>, x: Ptr<T>, #[constexpr] N: usize) {
    let r = arange(0, N);
    let n = N as i32;
    let a = load(x + r);
    store(out + r, trunc(a));
    store(out + n + r, round(a));
    store(out + 2 * n + r, rint(a));
    store(out + 3 * n + r, nearbyint(a));
}

/// Halfway cases of both parities and signs, ±0, NaN, ±inf, values at and past 2^23.
const ROUNDING_EDGES: [f64; 16] = [
    0.5,
    1.5,
    2.5,
    -0.5,
    -1.5,
    -2.5,
    0.0,
    -0.0,
    0.499_999_97,
    1.0e-30,
    -7.75,
    8_388_607.5,
    8_388_609.0,
    1.0e30,
    f64::NAN,
    f64::NEG_INFINITY,
];

/// The four roundings as Rust computes them (`trunc`, `round`: half away from zero,
/// `round_ties_even` twice), NaNs made one value for comparison.
fn rounding_ref(x: &[f64]) -> Vec<u64> {
    let fs: [fn(f64) -> f64; 4] = [
        f64::trunc,
        f64::round,
        f64::round_ties_even,
        f64::round_ties_even,
    ];
    fs.iter()
        .flat_map(|f| {
            x.iter()
                .map(move |&v| if v.is_nan() { u64::MAX } else { f(v).to_bits() })
        })
        .collect()
}

#[test]
fn roundings_match_rust_in_every_float_dtype() {
    let n = ROUNDING_EDGES.len();
    let nan_bits = |v: f64| if v.is_nan() { u64::MAX } else { v.to_bits() };
    for device in all_devices() {
        // f64 as is; f32 and f16 on the edges their dtype holds (rounded to it first).
        let x64 = Array1::from_vec(ROUNDING_EDGES.to_vec());
        let mut out = Array1::<f64>::zeros(4 * n);
        roundings::launch(&device, 1, &mut out, x64.view(), n).unwrap();
        assert_eq!(
            out.iter().map(|v| nan_bits(*v)).collect::<Vec<_>>(),
            rounding_ref(&ROUNDING_EDGES),
            "{device:?} f64"
        );
        let x32 = x64.mapv(|v| v as f32);
        let mut out = Array1::<f32>::zeros(4 * n);
        roundings::launch(&device, 1, &mut out, x32.view(), n).unwrap();
        let want = rounding_ref(&x32.mapv(f64::from).to_vec());
        assert_eq!(
            out.iter().map(|v| nan_bits(*v as f64)).collect::<Vec<_>>(),
            want,
            "{device:?} f32"
        );
        let x16 = x64.mapv(half::f16::from_f64);
        let mut out = Array1::from_elem(4 * n, half::f16::ZERO);
        roundings::launch(&device, 1, &mut out, x16.view(), n).unwrap();
        let want = rounding_ref(&x16.mapv(f64::from).to_vec());
        assert_eq!(
            out.iter().map(|v| nan_bits(v.to_f64())).collect::<Vec<_>>(),
            want,
            "{device:?} f16"
        );
    }
}

/// `xor_sum` of a `R × C` tile along both axes and over every element.
#[kernel]
fn xor_sums<T: Int>(
    rows: Ptr<T>,
    cols: Ptr<T>,
    all: Ptr<T>,
    x: Ptr<T>,
    #[constexpr] R: usize,
    #[constexpr] C: usize,
) {
    let r = arange(0, R);
    let c = arange(0, C);
    let t = load(x + r[(.., None)] * C as i32 + c[(None, ..)]);
    store(rows + r, xor_sum(t, 1));
    store(cols + c, xor_sum(t, 0));
    store(all, xor_sum(t));
}

/// The bool counterpart: parity along each row, kept as a column.
#[kernel]
fn parity(out: Ptr<bool>, x: Ptr<bool>, #[constexpr] R: usize, #[constexpr] C: usize) {
    let r = arange(0, R);
    let c = arange(0, C);
    let t = load(x + r[(.., None)] * C as i32 + c[(None, ..)]);
    store(out + r[(.., None)], xor_sum(t, 1, keep_dims = true));
}

fn check_xor_sums<T>(x: &Array2<T>)
where
    T: Int + Copy + Default + PartialEq + std::fmt::Debug + std::ops::BitXor<Output = T>,
{
    let (r, c) = x.dim();
    let fold = |l: ndarray::ArrayView1<T>| l.iter().fold(T::default(), |a, &b| a ^ b);
    let want_rows = x.map_axis(Axis(1), fold);
    let want_cols = x.map_axis(Axis(0), fold);
    let want_all = x.iter().fold(T::default(), |a, &b| a ^ b);
    for device in all_devices() {
        let (mut rows, mut cols, mut all) = (
            Array1::from_elem(r, T::default()),
            Array1::from_elem(c, T::default()),
            Array1::from_elem(1, T::default()),
        );
        xor_sums::launch(&device, 1, &mut rows, &mut cols, &mut all, x.view(), r, c).unwrap();
        assert_eq!(
            (rows, cols, all[0]),
            (want_rows.clone(), want_cols.clone(), want_all),
            "{device:?}"
        );
    }
}

#[test]
fn xor_sum_along_each_axis_and_over_all() {
    let (r, c) = (8, 16);
    check_xor_sums(&Array2::from_shape_fn((r, c), |(i, j)| {
        ((i as i32) << 20) ^ (j as i32 * -77_777) ^ (i32::MIN * (i % 2) as i32)
    }));
    check_xor_sums(&Array2::from_shape_fn((r, c), |(i, j)| {
        (i * 31 + j * 7) as u8 ^ 0x80
    }));
    check_xor_sums(&Array2::from_shape_fn((r, c), |(i, j)| {
        -((i * 3 + j) as i8)
    }));
    let x = Array2::from_shape_fn((r, c), |(i, j)| (i * j + i) % 3 == 0);
    let want: Vec<bool> = x
        .rows()
        .into_iter()
        .map(|l| l.iter().fold(false, |a, &b| a ^ b))
        .collect();
    for device in all_devices() {
        let mut out = Array1::from_elem(r, false);
        parity::launch(&device, 1, &mut out, x.view(), r, c).unwrap();
        assert_eq!(out.to_vec(), want, "{device:?} bool");
    }
}

/// `xor_sum` of floats, as a user might write.
#[kernel]
fn xor_of_floats(out: Ptr<f32>, x: Ptr<f32>) {
    let r = arange(0, 4);
    store(out, xor_sum(load(x + r), 0));
}

#[test]
fn xor_sum_of_floats_is_an_error() {
    let x = Array1::<f32>::zeros(4);
    let mut out = Array1::<f32>::zeros(1);
    let err = xor_of_floats::launch(&Device::cpu(), 1, &mut out, x.view())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("xor_sum needs integers or bools, got tile<4xf32>"),
        "{err}"
    );
}

/// `x`'s bits read as `U` (with `bitcast` and `.to_bitcast`), and back.
#[kernel]
fn bits_of<T: Element, U: Element>(out: Ptr<U>, back: Ptr<T>, x: Ptr<T>, #[constexpr] N: usize) {
    let r = arange(0, N);
    let b = bitcast(load(x + r), U::DTYPE);
    store(out + r, b);
    store(back + r, b.to_bitcast(T::DTYPE));
}

/// Runs [`bits_of`] on every device: `want` are `x`'s bits as `U`, and the round trip
/// must give `x`'s bits back (`same` compares bits, NaNs included).
fn check_bits<T, U>(x: Vec<T>, want: Vec<U>, same: fn(&T, &T) -> bool)
where
    T: Element + Copy + Default + std::fmt::Debug,
    U: Element + Copy + Default + PartialEq + std::fmt::Debug,
{
    let n = x.len();
    let x = Array1::from_vec(x);
    for device in all_devices() {
        let mut out = Array1::from_elem(n, U::default());
        let mut back = Array1::from_elem(n, T::default());
        bits_of::launch(&device, 1, &mut out, &mut back, x.view(), n).unwrap();
        assert_eq!(
            out.to_vec(),
            want,
            "{device:?} {:?} -> {:?}",
            T::DTYPE,
            U::DTYPE
        );
        assert!(
            back.iter().zip(&x).all(|(a, b)| same(a, b)),
            "{device:?} round trip {back:?} vs {x:?}"
        );
    }
}

#[test]
fn bitcasts_read_the_same_bits_in_every_width() {
    // Quiet NaNs with payloads and a sign; the interpreter quiets signaling ones.
    let f32s = vec![
        0.0,
        -0.0,
        1.0,
        -2.5,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::MIN_POSITIVE / 4.0,
        f32::MAX,
        f32::from_bits(0x7FC0_1234),
        f32::from_bits(0xFFC0_0001),
        3.0e-42,
        -1.0e30,
        7.0,
        0.1,
        -0.1,
        1.0e-3,
    ];
    let same32 = |a: &f32, b: &f32| a.to_bits() == b.to_bits();
    check_bits(
        f32s.clone(),
        f32s.iter()
            .map(|v| v.to_bits() as i32)
            .collect::<Vec<i32>>(),
        same32,
    );
    check_bits(
        f32s.clone(),
        f32s.iter().map(|v| v.to_bits()).collect::<Vec<u32>>(),
        same32,
    );
    let ints: Vec<i32> = vec![
        0,
        1,
        -1,
        i32::MIN,
        i32::MAX,
        0x7F80_0000,
        0x3F80_0000,
        0x0000_0001,
        -0x0080_0000,
        12345,
        0x7FC0_0000,
        0x4049_0FDB,
        -7,
        1 << 30,
        0x00FF_FFFF,
        -(1 << 23),
    ];
    check_bits(
        ints.clone(),
        ints.iter().map(|&v| v as u32).collect::<Vec<u32>>(),
        |a, b| a == b,
    );
    check_bits(
        ints.clone(),
        ints.iter()
            .map(|&v| f32::from_bits(v as u32))
            .collect::<Vec<f32>>()
            .iter()
            .map(|v| v.to_bits() as i32)
            .collect::<Vec<i32>>(),
        |a, b| a == b,
    );
    let f64s = vec![
        0.0,
        -0.0,
        1.0,
        -2.5,
        f64::INFINITY,
        f64::from_bits(0x7FF8_0000_0000_BEEF),
        5.0e-324,
        f64::MAX,
        -1.0e300,
        0.1,
        42.0,
        -3.75,
        1.0e-10,
        2.0,
        1.5,
        -0.5,
    ];
    check_bits(
        f64s.clone(),
        f64s.iter()
            .map(|v| v.to_bits() as i64)
            .collect::<Vec<i64>>(),
        |a, b| a.to_bits() == b.to_bits(),
    );
    let halves: Vec<half::f16> = [
        0.0,
        -0.0,
        1.0,
        -2.5,
        65504.0,
        6.0e-8,
        -1.0e-5,
        0.1,
        3.0,
        f32::INFINITY,
        -7.0,
        0.5,
        1024.0,
        -0.25,
        2.0,
        100.0,
    ]
    .iter()
    .map(|&v| half::f16::from_f32(v))
    .collect();
    check_bits(
        halves.clone(),
        halves
            .iter()
            .map(|v| v.to_bits() as i16)
            .collect::<Vec<i16>>(),
        |a, b| a.to_bits() == b.to_bits(),
    );
    let brains: Vec<half::bf16> = halves
        .iter()
        .map(|v| half::bf16::from_f32(v.to_f32()))
        .collect();
    check_bits(
        brains.clone(),
        brains.iter().map(|v| v.to_bits()).collect::<Vec<u16>>(),
        |a, b| a.to_bits() == b.to_bits(),
    );
}

/// `signbit` of f32 and f16 inputs.
#[kernel]
fn sign_bits(out: Ptr<bool>, x: Ptr<f32>, #[constexpr] N: usize) {
    let r = arange(0, N);
    let n = N as i32;
    let a = load(x + r);
    store(out + r, signbit(a));
    store(out + n + r, signbit(a.to(DType::F16)));
}

#[test]
fn signbit_sees_negative_zero_and_negative_nan() {
    let x = Array1::from_vec(vec![
        0.0f32,
        -0.0,
        1.0,
        -1.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::from_bits(0xFFC0_0000),
        f32::NAN,
    ]);
    let want: Vec<bool> = x
        .iter()
        .map(|v| v.is_sign_negative())
        .chain(x.iter().map(|v| v.is_sign_negative()))
        .collect();
    for device in all_devices() {
        let mut out = Array1::from_elem(2 * x.len(), false);
        sign_bits::launch(&device, 1, &mut out, x.view(), x.len()).unwrap();
        assert_eq!(out.to_vec(), want, "{device:?}");
    }
}

/// A bitcast between widths, as a user might write.
#[kernel]
fn narrowing_bitcast(out: Ptr<i16>, x: Ptr<f32>) {
    let r = arange(0, 4);
    store(out + r, bitcast(load(x + r), DType::I16));
}

#[test]
fn bitcast_between_widths_is_an_error() {
    let x = Array1::<f32>::zeros(4);
    let mut out = Array1::<i16>::zeros(4);
    let err = narrowing_bitcast::launch(&Device::cpu(), 1, &mut out, x.view())
        .unwrap_err()
        .to_string();
    assert!(err.contains("cannot bitcast tile<4xf32> to i16"), "{err}");
}

/// Python's `min(a, B)` written in a kernel: a reduction along axis `B`.
#[kernel]
fn pythons_min(out: Ptr<i32>, x: Ptr<i32>, #[constexpr] B: usize) {
    let a = load(x + arange(0, 4));
    store(out + arange(0, 4), min(a, B));
}

#[test]
fn min_of_two_values_points_to_minimum() {
    let x = Array1::<i32>::zeros(4);
    let mut out = Array1::<i32>::zeros(4);
    let err = pythons_min::launch(&Device::interpreter(), 1, &mut out, x.view(), 8)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("min: axis 8 is out of range for tile<4xi32>")
            && err.contains("use `minimum(a, b)`"),
        "{err}"
    );
}

/// `histogram` of a `R × C` tile into `B` bins, without and with a mask (`x[i, j]` counted
/// where `j < n`).
#[kernel]
fn histograms<T: Int>(
    plain: Ptr<i32>,
    masked: Ptr<i32>,
    x: Ptr<T>,
    n: i32,
    #[constexpr] R: usize,
    #[constexpr] C: usize,
    #[constexpr] B: usize,
) {
    let r = arange(0, R);
    let c = arange(0, C);
    let t = load(x + r[(.., None)] * C as i32 + c[(None, ..)]);
    let bins = arange(0, B);
    store(plain + bins, histogram(t, B));
    store(masked + bins, histogram(t, B, mask = c[(None, ..)] < n));
}

fn check_histogram<T: Int + Copy + Into<i128>>(x: Array2<T>, bins: usize, n: usize) {
    let (r, c) = x.dim();
    let count = |keep: &dyn Fn(usize) -> bool| {
        let mut h = vec![0i32; bins];
        for ((_, j), v) in x.indexed_iter() {
            let v: i128 = (*v).into();
            if keep(j) && (0..bins as i128).contains(&v) {
                h[v as usize] += 1;
            }
        }
        h
    };
    let (want_plain, want_masked) = (count(&|_| true), count(&|j| j < n));
    for device in all_devices() {
        let (mut p, mut m) = (Array1::<i32>::zeros(bins), Array1::<i32>::zeros(bins));
        histograms::launch(&device, 1, &mut p, &mut m, x.view(), n as i32, r, c, bins).unwrap();
        assert_eq!(
            (p.to_vec(), m.to_vec()),
            (want_plain.clone(), want_masked.clone()),
            "{device:?}"
        );
    }
}

#[test]
fn histogram_counts_values_in_range_and_under_the_mask() {
    check_histogram(
        Array2::from_shape_fn((4, 16), |(i, j)| (i as i32 * 5 + j as i32 * 3) % 23 - 3),
        16,
        9,
    );
    check_histogram(
        Array2::from_shape_fn((2, 32), |(i, j)| (i * 97 + j * 41) as u8),
        256,
        20,
    );
    check_histogram(
        Array2::from_shape_fn((2, 8), |(i, j)| {
            if j % 3 == 0 {
                u64::MAX - i as u64
            } else {
                j as u64
            }
        }),
        8,
        5,
    );
}

/// `where_` with integer and float conditions (nonzero is true, NaN too).
#[kernel]
fn numeric_conditions(out: Ptr<i32>, ci: Ptr<i32>, cf: Ptr<f32>, #[constexpr] N: usize) {
    let r = arange(0, N);
    store(out + r, where_(load(ci + r), 1, 2));
    store(out + N as i32 + r, where_(load(cf + r), 1, 2));
}

#[test]
fn where_converts_numeric_conditions_as_triton() {
    let ci = Array1::from_vec(vec![0, 1, -1, 7, 0, i32::MIN, 0, 2]);
    let cf = Array1::from_vec(vec![
        0.0f32,
        -0.0,
        0.5,
        f32::NAN,
        f32::INFINITY,
        1e-45,
        -3.0,
        0.0,
    ]);
    let want: Vec<i32> = ci
        .iter()
        .map(|&c| if c != 0 { 1 } else { 2 })
        .chain(cf.iter().map(|&c| if c != 0.0 { 1 } else { 2 }))
        .collect();
    for device in all_devices() {
        let mut out = Array1::<i32>::zeros(16);
        numeric_conditions::launch(&device, 1, &mut out, ci.view(), cf.view(), 8).unwrap();
        assert_eq!(out.to_vec(), want, "{device:?}");
    }
}

/// `erf` of `x`, in f32 and through f16.
#[kernel]
fn erfs(out: Ptr<f32>, half_out: Ptr<half::f16>, x: Ptr<f32>, n: i32, #[constexpr] BLOCK: usize) {
    let offs = program_id(0) * BLOCK as i32 + arange(0, BLOCK);
    let m = offs < n;
    let v = load(x + offs, mask = m);
    store(out + offs, erf(v), mask = m);
    store(half_out + offs, erf(v.to(DType::F16)), mask = m);
}

#[test]
fn erf_is_within_2_ulps_on_every_device() {
    let mut xs: Vec<f32> = (-4000..=4000).map(|i| i as f32 * 0.00125).collect();
    xs.extend([
        1e-6,
        -1e-30,
        0.0,
        -0.0,
        0.4999,
        0.5,
        0.5001,
        5.0,
        -9.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
    ]);
    let n = xs.len();
    let x = Array1::from(xs.clone());
    for device in crate::common::devices_for(n) {
        let mut out = Array1::<f32>::zeros(n);
        let mut half_out = Array1::from_elem(n, half::f16::ZERO);
        erfs::launch(
            &device,
            n.div_ceil(256),
            &mut out,
            &mut half_out,
            x.view(),
            n as i32,
            256,
        )
        .unwrap();
        let mut worst = (0.0f64, 0.0f32);
        for (i, (&v, &got)) in xs.iter().zip(out.iter()).enumerate() {
            let want = crate::common::erf_f64(v as f64);
            let ulp = (want.abs() as f32).max(f32::MIN_POSITIVE);
            let ulp = (f32::from_bits(ulp.to_bits() + 1) - ulp) as f64;
            let e = (got as f64 - want).abs() / ulp;
            if e > worst.0 {
                worst = (e, v);
            }
            let h = half::f16::from_f32(v);
            let want_h = half::f16::from_f64(crate::common::erf_f64(h.to_f64()));
            let got_h = half_out[i];
            assert!(
                (got_h.to_f64() - want_h.to_f64()).abs()
                    <= 2.0 * half::f16::EPSILON.to_f64() * want_h.to_f64().abs().max(1e-4),
                "f16 erf({v}) = {got_h}, want {want_h} on {device:?}"
            );
        }
        eprintln!(
            "erf on {device:?}: worst {:.2} ulps at {}",
            worst.0, worst.1
        );
        assert!(
            worst.0 <= 2.0,
            "erf({}) is {:.2} ulps off on {device:?}",
            worst.1,
            worst.0
        );
    }
}
