//! `cumsum` and `cumprod` along either axis, forwards and reversed, `sort` and `topk`, on every device against
//! plain Rust folds in the same order: bit for bit, floats included.

use crate::common::{all_devices, random_f32};
use ndarray::{Array1, Array2, Axis};
use tritium::prelude::*;

/// Running sums and products of `x` (`R × C`) along both axes, forwards and reversed, in
/// eight `R × C` blocks of `out`.
#[kernel]
fn scans<T: Element, U: Element>(
    sums: Ptr<T>,
    prods: Ptr<U>,
    x: Ptr<U>,
    #[constexpr] R: usize,
    #[constexpr] C: usize,
) {
    let r = arange(0, R);
    let c = arange(0, C);
    let offs = r[(.., None)] * C as i32 + c[(None, ..)];
    let n = (R * C) as i32;
    let t = load(x + offs);
    store(sums + offs, cumsum(t));
    store(sums + n + offs, cumsum(t, 1));
    store(sums + 2 * n + offs, cumsum(t, 0, reverse = true));
    store(sums + 3 * n + offs, cumsum(t, -1, reverse = true));
    store(prods + offs, cumprod(t));
    store(prods + n + offs, cumprod(t, 1));
    store(prods + 2 * n + offs, cumprod(t, 0, reverse = true));
    store(prods + 3 * n + offs, cumprod(t, 1, reverse = true));
}

/// The four running folds of `x` with `f` (axis 0, axis 1, axis 0 reversed, axis 1
/// reversed), flattened one after the other.
fn folds<A: Copy, R: Copy>(x: &Array2<A>, start: impl Fn(A) -> R, f: impl Fn(R, A) -> R) -> Vec<R> {
    let mut all = Vec::new();
    for (axis, reverse) in [(0, false), (1, false), (0, true), (1, true)] {
        let mut out = x.mapv(&start);
        for (line, mut o) in x
            .lanes(Axis(axis))
            .into_iter()
            .zip(out.lanes_mut(Axis(axis)))
        {
            let n = line.len();
            let mut acc: Option<R> = None;
            for k in 0..n {
                let i = if reverse { n - 1 - k } else { k };
                let next = match acc {
                    None => start(line[i]),
                    Some(a) => f(a, line[i]),
                };
                o[i] = next;
                acc = Some(next);
            }
        }
        all.extend(out.iter().copied());
    }
    all
}

fn check<T, U>(
    x: Array2<U>,
    sums: Vec<T>,
    prods: Vec<U>,
    bits_t: fn(&T) -> u64,
    bits_u: fn(&U) -> u64,
) where
    T: Element + Copy + Default + std::fmt::Debug,
    U: Element + Copy + Default + std::fmt::Debug,
{
    let (r, c) = x.dim();
    for device in all_devices() {
        let mut s = Array1::from_elem(4 * r * c, T::default());
        let mut p = Array1::from_elem(4 * r * c, U::default());
        scans::launch(&device, 1, &mut s, &mut p, x.view(), r, c).unwrap();
        let got_s: Vec<u64> = s.iter().map(bits_t).collect();
        let got_p: Vec<u64> = p.iter().map(bits_u).collect();
        assert_eq!(
            got_s,
            sums.iter().map(bits_t).collect::<Vec<_>>(),
            "{device:?} {:?} cumsum",
            U::DTYPE
        );
        assert_eq!(
            got_p,
            prods.iter().map(bits_u).collect::<Vec<_>>(),
            "{device:?} {:?} cumprod",
            U::DTYPE
        );
    }
}

#[test]
fn running_sums_and_products_match_rust_in_order() {
    let (r, c) = (8, 16);
    // f32: arbitrary values, so the order of the adds shows in the low bits.
    let x = Array2::from_shape_vec((r, c), random_f32(r * c, 3))
        .unwrap()
        .mapv(|v| v * 3.7 + 0.1);
    let bits32 = |v: &f32| {
        if v.is_nan() {
            u64::MAX
        } else {
            v.to_bits() as u64
        }
    };
    check(
        x.clone(),
        folds(&x, |v| v, |a, v| a + v),
        folds(&x, |v| v, |a, v| a * v),
        bits32,
        bits32,
    );
    // f16: f32 accumulators, each result rounded.
    let h = x.mapv(half::f16::from_f32);
    let to16 = |v: f32| half::f16::from_f32(v);
    let sums: Vec<half::f16> = folds(&h, |v| v.to_f32(), |a, v| a + v.to_f32())
        .into_iter()
        .map(to16)
        .collect();
    let prods: Vec<half::f16> = folds(&h, |v| v.to_f32(), |a, v| a * v.to_f32())
        .into_iter()
        .map(to16)
        .collect();
    let bits16 = |v: &half::f16| {
        if v.is_nan() {
            u64::MAX
        } else {
            v.to_bits() as u64
        }
    };
    check(h, sums, prods, bits16, bits16);
    // i32 wraps.
    let xi = Array2::from_shape_fn((r, c), |(i, j)| {
        (i as i32 * 1_000_003) ^ (j as i32 * -70_001) | 1
    });
    let bi = |v: &i32| *v as u32 as u64;
    check(
        xi.clone(),
        folds(&xi, |v| v, i32::wrapping_add),
        folds(&xi, |v| v, i32::wrapping_mul),
        bi,
        bi,
    );
    // i8: sums run in i32, products wrap in i8.
    let x8 = Array2::from_shape_fn((r, c), |(i, j)| (i * 31 + j * 7) as i8);
    let sums: Vec<i32> = folds(&x8, |v| v as i32, |a, v| a + v as i32);
    let b8 = |v: &i8| *v as u8 as u64;
    check(
        x8.clone(),
        sums,
        folds(&x8, |v| v, i8::wrapping_mul),
        bi,
        b8,
    );
}

/// A scan of bools' products, as a user might write.
#[kernel]
fn cumprod_of_bools(out: Ptr<bool>, x: Ptr<bool>) {
    let r = arange(0, 4);
    store(out + r, cumprod(load(x + r)));
}

#[test]
fn cumprod_of_bools_is_an_error() {
    let x = Array1::from_elem(4, true);
    let mut out = Array1::from_elem(4, false);
    let err = cumprod_of_bools::launch(&Device::cpu(), 1, &mut out, x.view())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("cumprod needs numbers, got tile<4xbool>"),
        "{err}"
    );
}

/// `sort` of each row of `x` (`R × C`), ascending and descending, and `topk(x, K)`.
#[kernel]
fn sorts<T: Element>(
    up: Ptr<T>,
    down: Ptr<T>,
    top: Ptr<T>,
    x: Ptr<T>,
    #[constexpr] R: usize,
    #[constexpr] C: usize,
    #[constexpr] K: usize,
) {
    let r = arange(0, R);
    let c = arange(0, C);
    let offs = r[(.., None)] * C as i32 + c[(None, ..)];
    let t = load(x + offs);
    store(up + offs, sort(t));
    store(down + offs, sort(t, descending = true));
    store(
        top + r[(.., None)] * K as i32 + arange(0, K)[(None, ..)],
        topk(t, K),
    );
}

fn check_sorts<T>(
    x: Array2<T>,
    k: usize,
    cmp: fn(&T, &T) -> std::cmp::Ordering,
    bits: fn(&T) -> u64,
) where
    T: Element + Copy + Default + std::fmt::Debug,
{
    let (r, c) = x.dim();
    let mut up = Vec::new();
    let mut down = Vec::new();
    let mut top = Vec::new();
    for row in x.rows() {
        let mut v: Vec<T> = row.to_vec();
        v.sort_by(cmp);
        up.extend(v.iter().map(bits));
        down.extend(v.iter().rev().map(bits));
        top.extend(v.iter().rev().take(k).map(bits));
    }
    for device in all_devices() {
        let z = |n| Array1::from_elem(n, T::default());
        let (mut u, mut d, mut t) = (z(r * c), z(r * c), z(r * k));
        sorts::launch(&device, 1, &mut u, &mut d, &mut t, x.view(), r, c, k).unwrap();
        assert_eq!(
            u.iter().map(bits).collect::<Vec<_>>(),
            up,
            "{device:?} {:?} ascending",
            T::DTYPE
        );
        assert_eq!(
            d.iter().map(bits).collect::<Vec<_>>(),
            down,
            "{device:?} descending"
        );
        assert_eq!(
            t.iter().map(bits).collect::<Vec<_>>(),
            top,
            "{device:?} topk"
        );
    }
}

#[test]
fn sort_and_topk_order_rows_like_rust() {
    // f32 without NaN (where NaNs go is unspecified, as in Triton); infinities and
    // repeated values included. -0.0 and +0.0 compare equal, so the rows avoid zeros.
    let x = Array2::from_shape_vec((4, 32), random_f32(128, 8))
        .unwrap()
        .mapv(|v| (v * 7.0).round() + 0.5);
    let mut x = x;
    x[(1, 3)] = f32::INFINITY;
    x[(2, 5)] = f32::NEG_INFINITY;
    check_sorts(
        x,
        4,
        |a, b| a.partial_cmp(b).unwrap(),
        |v| v.to_bits() as u64,
    );
    let xi = Array2::from_shape_fn((3, 16), |(i, j)| {
        if j == 2 {
            i32::MIN + i as i32
        } else {
            ((i * 7919 + j * 104_729) % 1000) as i32 - 500
        }
    });
    check_sorts(xi, 8, |a, b| a.cmp(b), |v| *v as u32 as u64);
    let xu = Array2::from_shape_fn((2, 8), |(i, j)| {
        u64::MAX - ((i * 3 + j * 5) % 4) as u64 * (1 << 62) - j as u64
    });
    check_sorts(xu, 2, |a, b| a.cmp(b), |v| *v);
    let xh = Array2::from_shape_fn((2, 16), |(i, j)| {
        half::f16::from_f32((j as f32 * 1.7 - 9.0) * if i == 0 { 1.0 } else { -1.0 })
    });
    check_sorts(
        xh,
        1,
        |a, b| a.partial_cmp(b).unwrap(),
        |v| v.to_bits() as u64,
    );
}

/// `sort` of a row whose length is not a power of two.
#[kernel]
fn sort_odd(out: Ptr<i32>, x: Ptr<i32>) {
    let c = arange(0, 6);
    store(out + c, sort(load(x + c)));
}

#[test]
fn sort_of_a_non_power_of_two_is_an_error() {
    let x = Array1::<i32>::zeros(6);
    let mut out = Array1::<i32>::zeros(6);
    let err = sort_odd::launch(&Device::interpreter(), 1, &mut out, x.view())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("sort needs a power-of-two last axis, got tile<6xi32>")
            && err.contains("scans.rs:"),
        "{err}"
    );
}

/// Triton's `reduce` and `associative_scan` with combine closures on `x` (`R × C` f32) and
/// `a`, `b` (`R × C` i32): a closure sum, an argmax over (value, index) pairs, a whole-tile
/// max kept as `1 × 1`, running maxima both ways, and the linear recurrence
/// `h = a·h + b` as a scan over affine maps (associative, not commutative).
#[kernel]
fn combines(
    sums: Ptr<f32>,
    argmax: Ptr<i32>,
    whole: Ptr<f32>,
    running: Ptr<f32>,
    running_back: Ptr<f32>,
    recurrence: Ptr<i32>,
    x: Ptr<f32>,
    a: Ptr<i32>,
    b: Ptr<i32>,
    #[constexpr] R: usize,
    #[constexpr] C: usize,
) {
    let (r, c) = (arange(0, R), arange(0, C));
    let offs = r[(.., None)] * C as i32 + c[(None, ..)];
    let v = load(x + offs);
    store(sums + r, reduce(v, 1, |p, q| p + q));
    let idx = broadcast_to(c[(None, ..)], [R, C]);
    let (_, best) = reduce((v, idx), 1, |(p, i), (q, j)| {
        let later = q > p;
        (where_(later, q, p), where_(later, j, i))
    });
    store(argmax + r, best);
    let m = reduce(v, None, |p, q| maximum(p, q), keep_dims = true);
    store(whole + arange(0, 1)[(.., None)], m);
    store(running + offs, associative_scan(v, 1, |p, q| maximum(p, q)));
    store(
        running_back + offs,
        associative_scan(v, 1, |p, q| maximum(p, q), reverse = true),
    );
    let (ta, tb) = (load(a + offs), load(b + offs));
    // (a1, b1) then (a2, b2): h -> a2 (a1 h + b1) + b2.
    let (_, h) = associative_scan((ta, tb), 1, |(a1, b1), (a2, b2)| (a1 * a2, b1 * a2 + b2));
    store(recurrence + offs, h);
}

#[test]
fn reduce_and_scan_with_combine_functions_match_rust() {
    let (r, c) = (4, 16);
    let x = Array2::from_shape_vec((r, c), random_f32(r * c, 11)).unwrap();
    let a = Array2::from_shape_fn((r, c), |(i, j)| ((i * 7 + j * 3) % 5) as i32 - 2);
    let b = Array2::from_shape_fn((r, c), |(i, j)| ((i * 5 + j * 11) % 9) as i32 - 4);
    let rows = |f: &dyn Fn(ndarray::ArrayView1<f32>) -> Vec<f32>| {
        let v: Vec<f32> = x.rows().into_iter().flat_map(f).collect();
        Array2::from_shape_vec((r, c), v).unwrap()
    };
    let scan_max = |row: ndarray::ArrayView1<f32>| {
        row.iter()
            .scan(f32::NEG_INFINITY, |m, &v| {
                *m = m.max(v);
                Some(*m)
            })
            .collect()
    };
    let want_running = rows(&scan_max);
    let want_back = rows(&|row| {
        let mut v: Vec<f32> = scan_max(row.slice(ndarray::s![..;-1]));
        v.reverse();
        v
    });
    let want_sums = x.sum_axis(Axis(1));
    let want_argmax: Array1<i32> = x
        .rows()
        .into_iter()
        .map(|row| {
            let m = row.fold(f32::NEG_INFINITY, |m, &v| m.max(v));
            row.iter().position(|&v| v == m).unwrap() as i32
        })
        .collect();
    let want_whole = x.fold(f32::NEG_INFINITY, |m, &v| m.max(v));
    let want_recurrence = Array2::from_shape_fn((r, c), |(i, j)| {
        (0..=j).fold(0i32, |h, k| {
            a[[i, k]].wrapping_mul(h).wrapping_add(b[[i, k]])
        })
    });
    for device in all_devices() {
        let what = format!("{device:?}");
        let (mut sums, mut argmax) = (Array1::<f32>::zeros(r), Array1::<i32>::zeros(r));
        let mut whole = Array2::<f32>::zeros((1, 1));
        let (mut running, mut back) = (Array2::<f32>::zeros((r, c)), Array2::<f32>::zeros((r, c)));
        let mut rec = Array2::<i32>::zeros((r, c));
        combines::launch(
            &device,
            1,
            &mut sums,
            &mut argmax,
            &mut whole,
            &mut running,
            &mut back,
            &mut rec,
            x.view(),
            a.view(),
            b.view(),
            r,
            c,
        )
        .unwrap();
        crate::common::assert_close(&sums, &want_sums, 1e-5, 1e-5, &what);
        assert_eq!(argmax, want_argmax, "{what}");
        assert_eq!(whole[[0, 0]], want_whole, "{what}");
        assert_eq!(running, want_running, "{what}");
        assert_eq!(back, want_back, "{what}");
        assert_eq!(rec, want_recurrence, "{what}");
    }
}

#[kernel]
fn odd_scan(out: Ptr<f32>, x: Ptr<f32>) {
    let v = load(x + arange(0, 8));
    let w = reshape(v, [2, 4]);
    let s = associative_scan(reshape(cat(w, w), [16]), 0, |p, q| p + q);
    let t = reduce(reshape(join(v, v), [8, 2]), 2, |p, q| p + q);
    store(out + arange(0, 16), s + sum(t));
}

#[test]
fn combine_errors_are_trace_errors() {
    let x = Array1::<f32>::ones(8);
    let mut out = Array1::<f32>::zeros(16);
    let e = odd_scan::launch(&Device::interpreter(), 1, &mut out, x.view())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("reduce: axis 2 is out of range") && e.contains("scans.rs:"),
        "{e}"
    );
}

/// `reduce` over every axis without `keep_dims` gives a scalar.
#[kernel]
fn reduce_all(out: Ptr<i32>, x: Ptr<i32>) {
    let v = reshape(load(x + arange(0, 8)), [2, 4]);
    let total = reduce(v, None, |p, q| p + q);
    store(out, total);
}

#[test]
fn reduce_over_every_axis_gives_a_scalar() {
    let x = Array1::from_iter(1..=8);
    for device in all_devices() {
        let mut out = Array1::<i32>::zeros(1);
        reduce_all::launch(&device, 1, &mut out, x.view()).unwrap();
        assert_eq!(out[0], 36, "{device:?}");
    }
}

/// `out = cumsum(x, 0)` of a `R × C` tile.
#[kernel]
fn column_scan(out: Ptr<f32>, x: Ptr<f32>, #[constexpr] R: usize, #[constexpr] C: usize) {
    let offs = arange(0, R)[(.., None)] * C as i32 + arange(0, C)[(None, ..)];
    store(out + offs, cumsum(load(x + offs), 0));
}

/// A scan along a leading axis folds its lines side by side: the CPU adds whole rows with
/// packed instructions (each column still summed in row order, bit for bit).
#[cfg(target_arch = "x86_64")]
#[test]
fn scans_along_a_leading_axis_are_vectorized_on_the_cpu() {
    use crate::common::{dumps_of, packed};
    // More rows than LLVM fully unrolls (16), so the row loop stays a loop.
    let (r, c) = (32, 64);
    let x = Array2::from_shape_vec((r, c), random_f32(r * c, 11)).unwrap();
    let mut out = Array2::<f32>::zeros((r, c));
    let dumps = dumps_of("scan-asm", |options| {
        column_scan::launch_with(&Device::cpu(), 1, options, &mut out, &x, r, c).unwrap()
    });
    let mut want = x.clone();
    for i in 1..r {
        for j in 0..c {
            want[(i, j)] = want[(i - 1, j)] + x[(i, j)];
        }
    }
    assert_eq!(out, want);
    let asm = dumps.get("s");
    assert!(packed(asm, "vaddps"), "no packed add in:\n{asm}");
}

/// `out = sort(x)` of a `R × C` tile, along its rows.
#[kernel]
fn row_sort(out: Ptr<f32>, x: Ptr<f32>, #[constexpr] R: usize, #[constexpr] C: usize) {
    let offs = arange(0, R)[(.., None)] * C as i32 + arange(0, C)[(None, ..)];
    store(out + offs, sort(load(x + offs)));
}

/// The bitonic sort network compares whole rows of pairs at once: packed min/max on the
/// CPU.
#[cfg(target_arch = "x86_64")]
#[test]
fn sorts_are_vector_networks_on_the_cpu() {
    use crate::common::{dumps_of, packed};
    let (r, c) = (8, 32);
    let x = Array2::from_shape_vec((r, c), random_f32(r * c, 12)).unwrap();
    let mut out = Array2::<f32>::zeros((r, c));
    let dumps = dumps_of("sort-asm", |options| {
        row_sort::launch_with(&Device::cpu(), 1, options, &mut out, &x, r, c).unwrap()
    });
    let mut want = x.clone();
    for mut row in want.rows_mut() {
        let mut v = row.to_vec();
        v.sort_by(f32::total_cmp);
        row.assign(&Array1::from(v));
    }
    assert_eq!(out, want);
    let asm = dumps.get("s");
    assert!(
        ["vminps", "vmaxps", "vcmpltps", "vblendvps"]
            .iter()
            .any(|op| packed(asm, op)),
        "no packed compare or min/max in:\n{asm}"
    );
}
