//! Reductions along either axis of a 2-D tile, on every device against plain ndarray
//! folds: few outputs (lanes share a line and combine with shuffles on CUDA) and many
//! (one line per slot), ties for argmax/argmin, NaN rows, f32, f16 and i32.

use crate::common::all_devices;
use half::f16;
use ndarray::{Array1, Array2, Axis};
use rstest::rstest;
use tritium::prelude::*;

/// Sums, maxima, minima and first arg-extremes of `x` (`R × C`) along both axes.
#[kernel]
fn float_reductions<T: Float>(
    sum0: Ptr<T>,
    max0: Ptr<T>,
    argmin0: Ptr<i32>,
    sum1: Ptr<T>,
    min1: Ptr<T>,
    argmax1: Ptr<i32>,
    x: Ptr<T>,
    #[constexpr] R: usize,
    #[constexpr] C: usize,
) {
    let rows = arange(0, R);
    let cols = arange(0, C);
    let t = load(x + rows[(.., None)] * C as i32 + cols[(None, ..)]);
    store(sum0 + cols, sum(t, 0));
    store(max0 + cols, max(t, 0));
    store(argmin0 + cols, argmin(t, 0));
    store(sum1 + rows, sum(t, 1));
    store(min1 + rows, min(t, 1));
    store(argmax1 + rows, argmax(t, 1));
}

/// The integer counterpart (wrapping sums).
#[kernel]
fn int_reductions(
    sum0: Ptr<i32>,
    argmax0: Ptr<i32>,
    sum1: Ptr<i32>,
    max1: Ptr<i32>,
    argmin1: Ptr<i32>,
    x: Ptr<i32>,
    #[constexpr] R: usize,
    #[constexpr] C: usize,
) {
    let rows = arange(0, R);
    let cols = arange(0, C);
    let t = load(x + rows[(.., None)] * C as i32 + cols[(None, ..)]);
    store(sum0 + cols, sum(t, 0));
    store(argmax0 + cols, argmax(t, 0));
    store(sum1 + rows, sum(t, 1));
    store(max1 + rows, max(t, 1));
    store(argmin1 + rows, argmin(t, 1));
}

/// The first index of the extreme of `line` (`better(a, b)`: `a` beats `b`), NaN ignored,
/// 0 when there is none, as the interpreter defines argmax/argmin.
fn arg_extreme(line: impl Iterator<Item = f64>, better: fn(f64, f64) -> bool) -> i32 {
    let mut best: Option<(usize, f64)> = None;
    for (i, v) in line.enumerate() {
        if v.is_nan() {
            continue;
        }
        match best {
            Some((_, b)) if !better(v, b) => {}
            _ => best = Some((i, v)),
        }
    }
    best.map_or(0, |(i, _)| i as i32)
}

/// maxnum/minnum folds: NaN only when the whole line is NaN.
fn fold_num(line: impl Iterator<Item = f64>, max: bool) -> f64 {
    line.fold(f64::NAN, |a, v| if max { a.max(v) } else { a.min(v) })
}

/// Values with repeats (ties for the arg-reductions) and, when `nans`, a NaN in every
/// third row and one row all NaN.
fn values(r: usize, c: usize, nans: bool) -> Array2<f64> {
    Array2::from_shape_fn((r, c), |(i, j)| {
        if nans && (i == 1 || (i % 3 == 0 && j == c / 2)) {
            return f64::NAN;
        }
        ((i * 7 + j * 13) % 11) as f64 - 5.0
    })
}

fn lines(x: &Array2<f64>, axis: usize) -> Vec<Vec<f64>> {
    x.axis_iter(Axis(1 - axis)).map(|l| l.to_vec()).collect()
}

/// Shapes with fewer outputs than a CTA's threads along one axis or both (lanes share
/// lines), and with more (one line per slot).
const SHAPES: [(usize, usize); 6] = [(2, 64), (4, 256), (16, 16), (64, 4), (256, 2), (1, 32)];

#[rstest]
fn float_reductions_along_each_axis(
    #[values(SHAPES[0], SHAPES[1], SHAPES[2], SHAPES[3], SHAPES[4], SHAPES[5])] shape: (
        usize,
        usize,
    ),
    #[values(false, true)] nans: bool,
    #[values(1, 4)] num_warps: u32,
) {
    let (r, c) = shape;
    let x = values(r, c, nans);
    let opts = LaunchOptions {
        num_warps,
        ..Default::default()
    };
    let sum_of = |l: &Vec<f64>| l.iter().sum::<f64>();
    let (cols, rows) = (lines(&x, 0), lines(&x, 1));
    let want_sum0: Vec<f64> = cols.iter().map(sum_of).collect();
    let want_max0: Vec<f64> = cols
        .iter()
        .map(|l| fold_num(l.iter().copied(), true))
        .collect();
    let want_argmin0: Vec<i32> = cols
        .iter()
        .map(|l| arg_extreme(l.iter().copied(), |a, b| a < b))
        .collect();
    let want_sum1: Vec<f64> = rows.iter().map(sum_of).collect();
    let want_min1: Vec<f64> = rows
        .iter()
        .map(|l| fold_num(l.iter().copied(), false))
        .collect();
    let want_argmax1: Vec<i32> = rows
        .iter()
        .map(|l| arg_extreme(l.iter().copied(), |a, b| a > b))
        .collect();
    macro_rules! check {
        ($t:ty, $from:expr, $to:expr) => {
            for d in all_devices() {
                let xt = x.mapv($from);
                let (mut s0, mut m0, mut a0) = (
                    Array1::<$t>::from_elem(c, $from(0.0)),
                    Array1::<$t>::from_elem(c, $from(0.0)),
                    Array1::<i32>::zeros(c),
                );
                let (mut s1, mut m1, mut a1) = (
                    Array1::<$t>::from_elem(r, $from(0.0)),
                    Array1::<$t>::from_elem(r, $from(0.0)),
                    Array1::<i32>::zeros(r),
                );
                float_reductions::launch_with(
                    &d, 1, &opts, &mut s0, &mut m0, &mut a0, &mut s1, &mut m1, &mut a1, &xt, r, c,
                )
                .unwrap();
                let what = format!(
                    "{d:?} {} {shape:?} nans={nans} warps={num_warps}",
                    stringify!($t)
                );
                // Exact: sums of small integers, extremes and indices.
                let same = |got: &Array1<$t>, want: &[f64], name: &str| {
                    let got: Vec<f64> = got.iter().map(|v| $to(*v)).collect();
                    let eq = got
                        .iter()
                        .zip(want)
                        .all(|(g, w)| g == w || (g.is_nan() && w.is_nan()));
                    assert!(eq, "{name} on {what}: got {got:?}, want {want:?}");
                };
                same(&s0, &want_sum0, "sum axis 0");
                same(&m0, &want_max0, "max axis 0");
                same(&s1, &want_sum1, "sum axis 1");
                same(&m1, &want_min1, "min axis 1");
                assert_eq!(a0.to_vec(), want_argmin0, "argmin axis 0 on {what}");
                assert_eq!(a1.to_vec(), want_argmax1, "argmax axis 1 on {what}");
            }
        };
    }
    check!(f32, |v: f64| v as f32, |v: f32| v as f64);
    check!(f16, f16::from_f64, |v: f16| v.to_f64());
}

#[rstest]
fn int_reductions_along_each_axis(
    #[values(SHAPES[0], SHAPES[1], SHAPES[2], SHAPES[3], SHAPES[4], SHAPES[5])] shape: (
        usize,
        usize,
    ),
    #[values(1, 4)] num_warps: u32,
) {
    let (r, c) = shape;
    // Large values so that sums wrap.
    let x = Array2::from_shape_fn((r, c), |(i, j)| {
        (((i * 7 + j * 13) % 11) as i32 - 5).wrapping_mul(0x3000_0001)
    });
    let opts = LaunchOptions {
        num_warps,
        ..Default::default()
    };
    let wrapping = |l: ndarray::ArrayView1<i32>| l.iter().fold(0i32, |a, v| a.wrapping_add(*v));
    let first = |l: ndarray::ArrayView1<i32>, max: bool| {
        let best = if max { l.iter().max() } else { l.iter().min() };
        l.iter().position(|v| Some(v) == best).unwrap_or(0) as i32
    };
    let want_sum0: Vec<i32> = x.axis_iter(Axis(1)).map(wrapping).collect();
    let want_argmax0: Vec<i32> = x.axis_iter(Axis(1)).map(|l| first(l, true)).collect();
    let want_sum1: Vec<i32> = x.axis_iter(Axis(0)).map(wrapping).collect();
    let want_max1: Vec<i32> = x
        .axis_iter(Axis(0))
        .map(|l| *l.iter().max().unwrap())
        .collect();
    let want_argmin1: Vec<i32> = x.axis_iter(Axis(0)).map(|l| first(l, false)).collect();
    for d in all_devices() {
        let (mut s0, mut a0) = (Array1::<i32>::zeros(c), Array1::<i32>::zeros(c));
        let (mut s1, mut m1, mut a1) = (
            Array1::<i32>::zeros(r),
            Array1::<i32>::zeros(r),
            Array1::<i32>::zeros(r),
        );
        int_reductions::launch_with(
            &d, 1, &opts, &mut s0, &mut a0, &mut s1, &mut m1, &mut a1, &x, r, c,
        )
        .unwrap();
        let what = format!("{d:?} {shape:?} warps={num_warps}");
        assert_eq!(s0.to_vec(), want_sum0, "sum axis 0 on {what}");
        assert_eq!(a0.to_vec(), want_argmax0, "argmax axis 0 on {what}");
        assert_eq!(s1.to_vec(), want_sum1, "sum axis 1 on {what}");
        assert_eq!(m1.to_vec(), want_max1, "max axis 1 on {what}");
        assert_eq!(a1.to_vec(), want_argmin1, "argmin axis 1 on {what}");
    }
}

#[test]
fn axis_reductions_with_few_outputs_use_warp_shuffles() {
    use tritium::backend::cuda::{compile_ptx, CudaCompileOptions};
    let s = tritium::dsl::trace::Specialization::default();
    let ptx = |r: usize, c: usize| {
        let f = int_reductions::trace(&s, r, c).unwrap();
        compile_ptx(&f, "k", &CudaCompileOptions::default())
            .unwrap()
            .text
    };
    // 4 rows of 256 (4 outputs for 128 threads): groups of 32 lanes per row.
    assert!(ptx(4, 256).contains("shfl.sync.bfly"));
    // 128 × 128: a line per thread along either axis, no shuffles.
    assert!(!ptx(128, 128).contains("shfl.sync"));
}

/// The reported miscompile (issue 10): an axis reduction inside a runtime `for` whose
/// carried tile starts as a constant kept the first (peeled) iteration's value on the CPU.
#[kernel]
fn max_in_loop(out: Ptr<f32>, x: Ptr<f32>, n: i32) {
    let r = arange(0, 2);
    let mut m = zeros([2], DType::F32);
    for j in range(0, n) {
        let t = load(x + j * 4 + r[(.., None)] * 2 + r[(None, ..)]);
        m = max(t, 1);
    }
    store(out + r, m);
}

/// Every axis reduction inside a runtime loop: carried (`acc` starts as zeros, so the
/// first iteration is peeled) and stored from inside the loop, per iteration.
#[kernel]
fn reductions_in_loop(
    carried: Ptr<f32>,
    per_iter: Ptr<f32>,
    x: Ptr<f32>,
    n: i32,
    #[constexpr] R: usize,
    #[constexpr] C: usize,
) {
    let rows = arange(0, R);
    let cols = arange(0, C);
    let mut s0 = zeros([C], DType::F32);
    let mut m1 = zeros([R], DType::F32);
    for j in range(0, n) {
        let t = load(x + j * (R * C) as i32 + rows[(.., None)] * C as i32 + cols[(None, ..)]);
        s0 = s0 + sum(t, 0);
        m1 = max(t, 1);
        let base = per_iter + j * (2 * R + C) as i32;
        store(base + cols, sum(t, 0));
        store(base + C as i32 + rows, min(t, 1));
        store(base + (C + R) as i32 + rows, sum(t, 1));
    }
    store(carried + cols, s0);
    store(carried + C as i32 + rows, m1);
}

#[test]
fn max_along_an_axis_in_a_loop_keeps_every_iteration() {
    let x = Array1::from_iter((0..12).map(|v| v as f32));
    for d in all_devices() {
        let mut out = Array1::<f32>::zeros(2);
        max_in_loop::launch(&d, 1, &mut out, &x, 3).unwrap();
        assert_eq!(out.to_vec(), vec![9.0, 11.0], "on {d:?}");
    }
}

#[rstest]
fn axis_reductions_in_a_loop_see_every_iteration(
    #[values((2, 4), (4, 8), (8, 2))] shape: (usize, usize),
    #[values(0, 1, 2, 5)] n: i32,
) {
    let (r, c) = shape;
    let iters = n.max(0) as usize;
    // Small integers: every sum is exact in any order.
    let x = Array1::from_iter((0..iters * r * c).map(|v| ((v * 7) % 13) as f32 - 6.0));
    let tile = |j: usize| {
        Array2::from_shape_vec((r, c), x.as_slice().unwrap()[j * r * c..][..r * c].to_vec())
            .unwrap()
    };
    let mut want_carried = vec![0.0f32; c + r];
    let mut want_iter = vec![0.0f32; iters * (2 * r + c)];
    for j in 0..iters {
        let t = tile(j);
        let base = j * (2 * r + c);
        for (k, s) in t.sum_axis(Axis(0)).iter().enumerate() {
            want_carried[k] += s;
            want_iter[base + k] = *s;
        }
        for (k, l) in t.axis_iter(Axis(0)).enumerate() {
            want_carried[c + k] = l.iter().copied().fold(f32::NAN, f32::max);
            want_iter[base + c + k] = l.iter().copied().fold(f32::NAN, f32::min);
            want_iter[base + c + r + k] = l.sum();
        }
    }
    for d in all_devices() {
        let mut carried = Array1::<f32>::zeros(c + r);
        let mut per_iter = Array1::<f32>::zeros(iters * (2 * r + c));
        reductions_in_loop::launch(&d, 1, &mut carried, &mut per_iter, &x, n, r, c).unwrap();
        let what = format!("{d:?} {shape:?} n={n}");
        assert_eq!(carried.to_vec(), want_carried, "carried on {what}");
        assert_eq!(per_iter.to_vec(), want_iter, "per iteration on {what}");
    }
}

/// Elementwise, reduced and atomic float max/min of signed zeros: every device orders -0
/// below +0 (IEEE 754-2019 maximumNumber/minimumNumber), in either operand order. Found by
/// the fuzzer: `maxnum` left it open, and the interpreter and compiled code differed.
#[kernel]
fn signed_zero_max_min(out: Ptr<f32>, at: Ptr<f32>, x: Ptr<f32>, y: Ptr<f32>) {
    let r = arange(0, 64);
    let a = load(x + r);
    let b = load(y + r);
    store(out + r, maximum(a, b));
    store(out + 64 + r, minimum(a, b));
    // Rows of 32 along the last axis (the CPU keeps vector partials there) and along 0.
    let rows = arange(0, 2);
    let t = load(x + rows[(.., None)] * 32 + arange(0, 32)[(None, ..)]);
    store(out + 128 + rows, max(t, 1));
    store(out + 130 + rows, min(t, 1));
    let cols = arange(0, 32);
    store(out + 132 + cols, max(t, 0));
    store(out + 164 + cols, min(t, 0));
    atomic_max(at + r, b);
    atomic_min(at + 64 + r, b);
}

#[test]
fn float_max_min_order_negative_zero_below_positive_zero() {
    let max0 = |a: f32, b: f32| {
        if a == b {
            f32::from_bits(a.to_bits() & b.to_bits())
        } else {
            a.max(b)
        }
    };
    let min0 = |a: f32, b: f32| {
        if a == b {
            f32::from_bits(a.to_bits() | b.to_bits())
        } else {
            a.min(b)
        }
    };
    // Row 0 mixes the signs, row 1 is all -0; y's signs differ from x's in most lanes.
    let x = Array1::from_iter((0..64).map(|i| if i < 32 && i % 3 == 1 { 0.0f32 } else { -0.0 }));
    let y = Array1::from_iter((0..64).map(|i| if i % 2 == 0 { 0.0f32 } else { -0.0 }));
    let at0 = Array1::from_iter((0..128).map(|i| if i % 4 < 2 { 0.0f32 } else { -0.0 }));
    let fold = |v: &[f32], f: &dyn Fn(f32, f32) -> f32| v.iter().copied().fold(f32::NAN, f);
    let mut want = vec![0.0f32; 196];
    for i in 0..64 {
        want[i] = max0(x[i], y[i]);
        want[64 + i] = min0(x[i], y[i]);
    }
    for row in 0..2 {
        let l = &x.as_slice().unwrap()[row * 32..][..32];
        want[128 + row] = fold(l, &max0);
        want[130 + row] = fold(l, &min0);
    }
    for c in 0..32 {
        want[132 + c] = max0(x[c], x[32 + c]);
        want[164 + c] = min0(x[c], x[32 + c]);
    }
    let mut want_at = at0.to_vec();
    for i in 0..64 {
        want_at[i] = max0(at0[i], y[i]);
        want_at[64 + i] = min0(at0[64 + i], y[i]);
    }
    let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
    assert!(want.iter().any(|v| v.is_sign_negative()) && want.iter().any(|v| v.is_sign_positive()));
    for d in all_devices() {
        let mut out = Array1::<f32>::from_elem(196, 7.0);
        let mut at = at0.clone();
        signed_zero_max_min::launch(&d, 1, &mut out, &mut at, &x, &y).unwrap();
        assert_eq!(bits(out.as_slice().unwrap()), bits(&want), "on {d:?}");
        assert_eq!(
            bits(at.as_slice().unwrap()),
            bits(&want_at),
            "atomics on {d:?}"
        );
    }
}

/// Float sums of signed zeros, f32 and f16, along the last axis (the CPU keeps vector
/// partials there), along axis 0, and of a whole line to a scalar (across warps on CUDA):
/// a lane of -0s sums to -0 and a lane with a +0 to +0 on every device, as Triton's folds
/// from each lane's first element give (a sum from +0 gave +0 for both).
#[kernel]
fn signed_zero_sums(out: Ptr<f32>, x: Ptr<f32>, h: Ptr<f16>) {
    let rows = arange(0, 2);
    let cols = arange(0, 32);
    let at = rows[(.., None)] * 32 + cols[(None, ..)];
    let t = load(x + at);
    store(out + rows, sum(t, 1));
    store(out + 2 + cols, sum(t, 0));
    store(out + 34, sum(load(x + arange(0, 64)), 0));
    store(out + 35, sum(load(x + 32 + cols), 0));
    let th = load(h + at);
    store(out + 36 + rows, sum(th, 1).to(DType::F32));
    store(out + 38 + cols, sum(th, 0).to(DType::F32));
}

#[test]
fn float_sums_of_negative_zeros_are_negative_zero() {
    // Row 0 mixes the signs, row 1 is all -0, so columns with a +0 in row 0 sum to +0.
    let x: Vec<f32> = (0..64)
        .map(|i| if i < 32 && i % 3 == 1 { 0.0 } else { -0.0 })
        .collect();
    let h: Vec<f16> = x.iter().map(|&v| f16::from_f32(v)).collect();
    let sum = |v: &mut dyn Iterator<Item = f32>| v.fold(-0.0f32, |s, v| s + v);
    let mut want = vec![0f32; 70];
    for base in [0, 36] {
        for r in 0..2 {
            want[base + r] = sum(&mut x[r * 32..][..32].iter().copied());
        }
        for c in 0..32 {
            want[base + 2 + c] = x[c] + x[32 + c];
        }
    }
    want[34] = sum(&mut x.iter().copied());
    want[35] = sum(&mut x[32..].iter().copied());
    let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
    let negative = want.iter().filter(|v| v.is_sign_negative()).count();
    assert!(negative > 10 && negative < 60, "{want:?}");
    for d in all_devices() {
        let mut out = vec![7.0f32; 70];
        signed_zero_sums::launch(&d, 1, &mut out, &x, &h).unwrap();
        assert_eq!(bits(&out), bits(&want), "on {d:?}");
    }
}

/// Attention's row maximum: `max(where(cols < n & qk >= lo, qk * s, -1e6), 1)` for
/// `qk = a @ b`, in a scratch buffer, and a mask that varies along the row.
#[kernel]
fn masked_row_max_of_product(out: Ptr<f32>, a: Ptr<f32>, b: Ptr<f32>, n: i32, lo: f32, s: f32) {
    let r = arange(0, 16);
    let c = arange(0, 64);
    let ta = load(a + r[(.., None)] * 16 + r[(None, ..)]);
    let tb = load(b + r[(.., None)] * 64 + c[(None, ..)]);
    let qk = dot(ta, tb, zeros([16, 64], DType::F32));
    let valid = broadcast_to(c[(None, ..)] < n, [16, 64]) & (qk >= lo);
    let m = max(where_(valid, qk * s, -1.0e6), 1);
    store(out + r, m);
}

/// On the CPU a row maximum is taken a vector of lanes at a time, and those lanes are
/// computed as vectors where their ops allow (here the compares, the select, the scaling
/// and the buffer read: `fmul <` and `fcmp oge <` in the LLVM IR); before, each lane was
/// computed alone and inserted, and LLVM branched on every lane's mask. Every device
/// agrees with the plain computation, masked-off columns included.
#[rstest]
#[case(64)]
#[case(40)]
#[case(0)]
fn a_masked_row_max_is_computed_on_vectors(#[case] n: i32) {
    let a = Array2::from_shape_fn((16, 16), |(i, j)| ((i * 5 + j * 3) % 11) as f32 - 5.0);
    let b = Array2::from_shape_fn((16, 64), |(i, j)| ((i * 7 + j * 13) % 17) as f32 - 8.0);
    // The rows' maxima of `qk` are 68–98: `lo` masks half of the rows entirely.
    let (lo, s) = (76.0f32, 0.5f32);
    let qk = a.dot(&b);
    let want: Vec<f32> = (0..16)
        .map(|i| {
            (0..64)
                .map(|j| match (j as i32) < n && qk[[i, j]] >= lo {
                    true => qk[[i, j]] * s,
                    false => -1.0e6,
                })
                .fold(f32::NEG_INFINITY, f32::max)
        })
        .collect();
    for d in all_devices() {
        let mut out = Array1::<f32>::zeros(16);
        masked_row_max_of_product::launch(&d, 1, &mut out, &a, &b, n, lo, s).unwrap();
        assert_eq!(out.to_vec(), want, "n = {n} on {d:?}");
    }
    let mut out = Array1::<f32>::zeros(16);
    let dumps = crate::common::dumps_of(&format!("row-max-{n}"), |options| {
        let cpu = Device::cpu();
        masked_row_max_of_product::launch_with(&cpu, 1, options, &mut out, &a, &b, n, lo, s)
            .unwrap()
    });
    assert_eq!(out.to_vec(), want);
    let ll = dumps.get("ll");
    assert!(ll.contains("fmul <"), "the scaling was not vectorized");
    assert!(
        ll.contains("fcmp oge <"),
        "the float compare was not vectorized"
    );
}
