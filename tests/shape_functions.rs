//! Triton's shape compositions (`ravel`, `view`, `zeros_like`, `full_like`, `broadcast`,
//! `join`, `interleave`, `split`, `cat`, `swizzle2d`) on every device against plain Rust,
//! bit for bit (NaN payloads and -0.0 included).

use crate::common::all_devices;
use ndarray::{Array1, Array2};
use tritium::prelude::*;

/// Each composition of `a` and `b` (`R × C`), flattened into `out`.
#[kernel]
fn shapes<T: Element>(
    joined: Ptr<T>,
    interleaved: Ptr<T>,
    concatenated: Ptr<T>,
    halves: Ptr<T>,
    misc: Ptr<T>,
    a: Ptr<T>,
    b: Ptr<T>,
    #[constexpr] R: usize,
    #[constexpr] C: usize,
) {
    let r = arange(0, R);
    let c = arange(0, C);
    let offs = r[(.., None)] * C as i32 + c[(None, ..)];
    let x = load(a + offs);
    let y = load(b + offs);
    let n = (R * C) as i32;
    let j = join(x, y);
    store(joined + arange(0, R * C * 2), ravel(j));
    store(interleaved + arange(0, R * C * 2), ravel(interleave(x, y)));
    store(concatenated + arange(0, 2 * R * C), ravel(cat(x, y)));
    let (lo, hi) = split(j);
    store(halves + offs, lo);
    store(halves + n + offs, hi);
    let (bx, by) = broadcast(x, y);
    store(misc + offs, bx);
    store(misc + n + offs, by);
    store(misc + 2 * n + offs, zeros_like(x));
    store(misc + 3 * n + offs, full_like(x, 3));
}

fn check_shapes<T>(a: Array2<T>, b: Array2<T>, bits: fn(&T) -> u64)
where
    T: Element + Copy + Default + std::fmt::Debug + From<u8>,
{
    let (r, c) = a.dim();
    let n = r * c;
    let (af, bf): (Vec<T>, Vec<T>) = (a.iter().copied().collect(), b.iter().copied().collect());
    let joined: Vec<T> = af.iter().zip(&bf).flat_map(|(x, y)| [*x, *y]).collect();
    let concatenated: Vec<T> = af.iter().chain(&bf).copied().collect();
    let halves = concatenated.clone();
    let misc: Vec<T> = af
        .iter()
        .chain(&bf)
        .copied()
        .chain(std::iter::repeat_n(T::default(), n))
        .chain(std::iter::repeat_n(T::from(3), n))
        .collect();
    let as_bits = |v: &[T]| v.iter().map(bits).collect::<Vec<u64>>();
    for device in all_devices() {
        let z = || Array1::from_elem(2 * n, T::default());
        let (mut j, mut i, mut k, mut h) = (z(), z(), z(), z());
        let mut m = Array1::from_elem(4 * n, T::default());
        shapes::launch(
            &device,
            1,
            &mut j,
            &mut i,
            &mut k,
            &mut h,
            &mut m,
            a.view(),
            b.view(),
            r,
            c,
        )
        .unwrap();
        assert_eq!(
            as_bits(j.as_slice().unwrap()),
            as_bits(&joined),
            "{device:?} join"
        );
        assert_eq!(
            as_bits(i.as_slice().unwrap()),
            as_bits(&joined),
            "{device:?} interleave"
        );
        assert_eq!(
            as_bits(k.as_slice().unwrap()),
            as_bits(&concatenated),
            "{device:?} cat"
        );
        assert_eq!(
            as_bits(h.as_slice().unwrap()),
            as_bits(&halves),
            "{device:?} split"
        );
        assert_eq!(
            as_bits(m.as_slice().unwrap()),
            as_bits(&misc),
            "{device:?} broadcast/zeros_like/full_like"
        );
    }
}

#[test]
fn shape_compositions_move_bits_exactly() {
    let (r, c) = (4, 8);
    let special = [
        0.0,
        -0.0,
        f32::NAN,
        f32::from_bits(0xFFC0_0ABC),
        f32::INFINITY,
        -1.5,
        1e-42,
        7.0,
    ];
    let a = Array2::from_shape_fn((r, c), |(i, j)| {
        special[(i + j) % 8] * if i > 1 { 3.0 } else { 1.0 }
    });
    let b = Array2::from_shape_fn((r, c), |(i, j)| -special[(i * 3 + j) % 8]);
    check_shapes(a, b, |v: &f32| v.to_bits() as u64);
    let a = Array2::from_shape_fn((r, c), |(i, j)| {
        ((i * 100 + j) as i64 - 50) ^ (i64::MIN * (j % 2) as i64)
    });
    let b = Array2::from_shape_fn((r, c), |(i, j)| -((i * 7 + j) as i64));
    check_shapes(a, b, |v: &i64| *v as u64);
    let a = Array2::from_shape_fn((r, c), |(i, j)| {
        half::f16::from_f32(special[(i + 2 * j) % 8])
    });
    let b = Array2::from_shape_fn((r, c), |(i, j)| half::f16::from_f32(i as f32 - j as f32));
    check_shapes(a, b, |v: &half::f16| v.to_bits() as u64);
    let a = Array2::from_shape_fn((r, c), |(i, j)| (i * 37 + j * 11) as u8);
    let b = Array2::from_shape_fn((r, c), |(i, j)| 255 - (i * 3 + j) as u8);
    check_shapes(a, b, |v: &u8| *v as u64);
}

/// Triton's grouped program order for a `M × N` grid of tiles in groups of `G` rows.
#[kernel]
fn swizzled(
    rows: Ptr<i32>,
    cols: Ptr<i32>,
    #[constexpr] M: usize,
    #[constexpr] N: usize,
    #[constexpr] G: usize,
) {
    let m = arange(0, M);
    let n = arange(0, N);
    let (i, j) = swizzle2d(m[(.., None)], n[(None, ..)], M as i32, N as i32, G as i32);
    let offs = m[(.., None)] * N as i32 + n[(None, ..)];
    store(rows + offs, i);
    store(cols + offs, j);
}

#[test]
fn swizzle2d_matches_tritons_formula() {
    let (m, n, g) = (8usize, 4usize, 3usize);
    let mut want = (Vec::new(), Vec::new());
    for i in 0..m {
        for j in 0..n {
            let ij = i * n + j;
            let group = ij / (g * n);
            let off_i = group * g;
            let size_g = (m - off_i).min(g);
            let ij = ij % (g * n);
            want.0.push((off_i + ij % size_g) as i32);
            want.1.push((ij / size_g) as i32);
        }
    }
    for device in all_devices() {
        let (mut rows, mut cols) = (Array1::<i32>::zeros(m * n), Array1::<i32>::zeros(m * n));
        swizzled::launch(&device, 1, &mut rows, &mut cols, m, n, g).unwrap();
        assert_eq!((rows.to_vec(), cols.to_vec()), want, "{device:?}");
    }
}

/// `flip` of a `R × C` tile along each axis (the default is the last), and of a masked
/// load (lanes past `n` read 0) along its only axis.
#[kernel]
fn flips(
    out: Ptr<f32>,
    masked: Ptr<f32>,
    x: Ptr<f32>,
    n: i32,
    #[constexpr] R: usize,
    #[constexpr] C: usize,
) {
    let r = arange(0, R);
    let c = arange(0, C);
    let offs = r[(.., None)] * C as i32 + c[(None, ..)];
    let t = load(x + offs);
    let m = (R * C) as i32;
    store(out + offs, flip(t));
    store(out + m + offs, flip(t, 0));
    store(out + 2 * m + offs, flip(t, -2) + flip(flip(t, 1), 1));
    let k = arange(0, C);
    store(masked + k, flip(load(x + k, mask = k < n, other = 0.0)));
}

#[test]
fn flip_reverses_either_axis() {
    let (r, c) = (4, 16);
    let x = Array2::from_shape_fn((r, c), |(i, j)| (i * c + j) as f32 - 0.5);
    let mut want = Vec::new();
    want.extend(
        (0..r)
            .flat_map(|i| (0..c).map(move |j| (i, c - 1 - j)))
            .map(|p| x[p]),
    );
    want.extend(
        (0..r)
            .flat_map(|i| (0..c).map(move |j| (r - 1 - i, j)))
            .map(|p| x[p]),
    );
    want.extend(
        (0..r)
            .flat_map(|i| (0..c).map(move |j| (i, j)))
            .map(|(i, j)| x[(r - 1 - i, j)] + x[(i, j)]),
    );
    let n = 5;
    let masked: Vec<f32> = (0..c)
        .map(|k| {
            if c - 1 - k < n {
                x[(0, c - 1 - k)]
            } else {
                0.0
            }
        })
        .collect();
    for device in all_devices() {
        let mut out = Array1::<f32>::zeros(3 * r * c);
        let mut got = Array1::<f32>::zeros(c);
        flips::launch(&device, 1, &mut out, &mut got, x.view(), n as i32, r, c).unwrap();
        assert_eq!(out.to_vec(), want, "{device:?}");
        assert_eq!(got.to_vec(), masked, "{device:?} masked");
    }
}

/// `split` of a 2-element tile: two scalars.
#[kernel]
fn split_pair(out: Ptr<f32>, x: Ptr<f32>) {
    let (lo, hi) = split(load(x + arange(0, 2)));
    store(out, hi);
    store(out + 1, lo);
}

#[test]
fn split_of_a_pair_gives_scalars() {
    let x = Array1::from_vec(vec![-0.0f32, f32::from_bits(0x7FC0_0123)]);
    for device in all_devices() {
        let mut out = Array1::<f32>::zeros(2);
        split_pair::launch(&device, 1, &mut out, x.view()).unwrap();
        let bits: Vec<u32> = out.iter().map(|v| v.to_bits()).collect();
        assert_eq!(bits, [0x7FC0_0123, 0x8000_0000], "{device:?}");
    }
}

/// `x` (`A × B × C`) permuted three ways, each stored row-major: `permute(x, (0, 2, 1))`,
/// `trans(x, (2, 0, 1))`, and the transpose of `x` as `A × BC` (`.t()`).
#[kernel]
fn permutes<T: Element>(
    p021: Ptr<T>,
    p201: Ptr<T>,
    t2d: Ptr<T>,
    x: Ptr<T>,
    #[constexpr] A: usize,
    #[constexpr] B: usize,
    #[constexpr] C: usize,
) {
    let all = arange(0, A * B * C);
    let v = reshape(load(x + all), [A, B, C]);
    store(p021 + all, ravel(permute(v, (0, 2, 1))));
    store(p201 + all, ravel(trans(v, dims = (2, 0, 1))));
    store(t2d + all, ravel(reshape(v, [A, B * C]).t()));
}

#[test]
fn permute_and_trans_reorder_dims_like_ndarray() {
    for (a, b, c) in [(2, 4, 8), (4, 2, 2), (1, 8, 4)] {
        let n = a * b * c;
        let x =
            ndarray::Array3::from_shape_fn((a, b, c), |(i, j, k)| (i * 100 + j * 10 + k) as i32);
        let flat = Array1::from_iter(x.iter().copied());
        let order =
            |axes: [usize; 3]| Array1::from_iter(x.view().permuted_axes(axes).iter().copied());
        let x2d = x.view().into_shape_with_order((a, b * c)).unwrap();
        let t2d = Array1::from_iter(x2d.t().iter().copied());
        for device in all_devices() {
            let (mut p021, mut p201, mut t) =
                (Array1::zeros(n), Array1::zeros(n), Array1::zeros(n));
            permutes::launch(
                &device,
                1,
                &mut p021,
                &mut p201,
                &mut t,
                flat.view(),
                a,
                b,
                c,
            )
            .unwrap();
            let what = format!("{a}x{b}x{c} on {device:?}");
            assert_eq!(p021, order([0, 2, 1]), "permute (0, 2, 1), {what}");
            assert_eq!(p201, order([2, 0, 1]), "trans (2, 0, 1), {what}");
            assert_eq!(t, t2d, ".t(), {what}");
        }
    }
}

/// `permute` with dims that are not a permutation, and `trans` of a 3-D tile without
/// dims, are trace errors at their line.
#[kernel]
fn bad_permute(out: Ptr<f32>, #[constexpr] CASE: usize) {
    let v = zeros([2, 2, 2], DType::F32);
    let p = if CASE == 0 {
        permute(v, (0, 0, 1))
    } else {
        trans(v)
    };
    store(out + arange(0, 8), ravel(p));
}

#[test]
fn permute_misuse_is_a_trace_error() {
    let cases = [
        "permute: dims [0, 0, 1] are not a permutation",
        "trans without dims needs a 2-D tile",
    ];
    for (case, want) in cases.iter().enumerate() {
        let mut out = Array1::<f32>::zeros(8);
        let e = bad_permute::launch(&Device::interpreter(), 1, &mut out, case)
            .unwrap_err()
            .to_string();
        assert!(e.contains(want) && e.contains("shape_functions.rs:"), "{e}");
    }
}

/// `x` (`R × C`) gathered along rows by `rows` (`K × C`, i32) and along columns by
/// `cols` (`R × K`, i64).
#[kernel]
fn gathers<T: Element>(
    along0: Ptr<T>,
    along1: Ptr<T>,
    x: Ptr<T>,
    rows: Ptr<i32>,
    cols: Ptr<i64>,
    #[constexpr] R: usize,
    #[constexpr] C: usize,
    #[constexpr] K: usize,
) {
    let (r, c, k) = (arange(0, R), arange(0, C), arange(0, K));
    let v = load(x + r[(.., None)] * C as i32 + c[(None, ..)]);
    let kc = k[(.., None)] * C as i32 + c[(None, ..)];
    store(along0 + kc, gather(v, load(rows + kc), 0));
    let rk = r[(.., None)] * K as i32 + k[(None, ..)];
    store(along1 + rk, gather(v, load(cols + rk), 1));
}

#[test]
fn gather_picks_along_either_axis_and_zeroes_outside() {
    let (r, c, k) = (4, 8, 16);
    let x = Array2::from_shape_fn((r, c), |(i, j)| (i * 10 + j) as f32 + 0.5);
    // Mostly in range; -1, the axis length and far values read 0.
    let pick = |n: usize, s: usize| match s % 7 {
        5 => -1,
        6 => n as i64 + (s % 3) as i64 * 1000,
        _ => ((s * 5) % n) as i64,
    };
    let rows = Array2::from_shape_fn((k, c), |(i, j)| pick(r, i * c + j) as i32);
    let cols = Array2::from_shape_fn((r, k), |(i, j)| pick(c, i * k + j + 3));
    let at = |i: i64, n: usize| (0..n as i64).contains(&i).then_some(i as usize);
    let want0 = Array2::from_shape_fn((k, c), |(i, j)| {
        at(rows[[i, j]] as i64, r).map_or(0.0, |p| x[[p, j]])
    });
    let want1 = Array2::from_shape_fn((r, k), |(i, j)| {
        at(cols[[i, j]], c).map_or(0.0, |p| x[[i, p]])
    });
    for device in all_devices() {
        let mut got0 = Array2::<f32>::from_elem((k, c), f32::NAN);
        let mut got1 = Array2::<f32>::from_elem((r, k), f32::NAN);
        gathers::launch(
            &device,
            1,
            &mut got0,
            &mut got1,
            x.view(),
            rows.view(),
            cols.view(),
            r,
            c,
            k,
        )
        .unwrap();
        assert_eq!(got0, want0, "along 0 on {device:?}");
        assert_eq!(got1, want1, "along 1 on {device:?}");
    }
}

/// Gathers and N-D permutes compile to PTX for sm_80 and sm_90.
#[test]
fn gathers_and_permutes_compile_to_ptx() {
    use tritium::backend::cuda::{compile_ptx, CudaCompileOptions};
    use tritium::dsl::trace::Specialization;
    let s = Specialization::default();
    let kernels = [
        gathers::trace::<f32>(&s, 4, 8, 16).unwrap(),
        permutes::trace::<i16>(&s, 2, 4, 8).unwrap(),
    ];
    for sm in [80, 90] {
        for f in &kernels {
            let copts = CudaCompileOptions {
                sm,
                ..Default::default()
            };
            let ptx = compile_ptx(f, "k", &copts).unwrap().text;
            assert!(
                ptx.contains("st.shared"),
                "{}: no exchange through shared memory",
                f.name
            );
        }
    }
}

/// Triton's hints are accepted and change no value; a hint of 0 is a trace error.
#[kernel]
fn hinted(out: Ptr<i32>, #[constexpr] BAD: bool) {
    let offs = arange(0, 16);
    let x = max_constancy(max_contiguous(multiple_of(offs, 16), 16), (1,));
    assume(x >= 0);
    debug_barrier();
    let y = if BAD { multiple_of(x, 0) } else { x };
    store(out + offs, y * 2);
}

#[test]
fn hints_keep_values_and_check_their_arguments() {
    for device in all_devices() {
        let mut out = Array1::<i32>::zeros(16);
        hinted::launch(&device, 1, &mut out, false).unwrap();
        assert_eq!(out, Array1::from_iter((0..16).map(|i| i * 2)), "{device:?}");
    }
    let mut out = Array1::<i32>::zeros(16);
    let e = hinted::launch(&Device::interpreter(), 1, &mut out, true)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("multiple_of: [0] must be one positive value"),
        "{e}"
    );
}

/// `likely` from a kernel: `x < 0` usually false. No promise: a block with negative
/// lanes gives what one without the hint gives, on every device; a non-bool condition
/// is a trace error naming it.
#[kernel]
fn likely_abs(out: Ptr<f32>, x: Ptr<f32>, #[constexpr] BAD: bool) {
    let offs = program_id(0) * 64 + arange(0, 64);
    let v = load(x + offs);
    let neg = if BAD {
        tritium::dsl::trace::lang::likely(v, false)
    } else {
        tritium::dsl::trace::lang::likely(v < 0.0, false)
    };
    store(out + offs, where_(neg, -v * 2.0, v * 2.0));
}

#[test]
fn likely_changes_no_value_and_takes_a_bool_tile() {
    // Block 0 all positive (the CPU's likely copy), block 1 with negative lanes.
    let x = Array1::from_iter((0..128).map(|i| {
        if i < 64 || i % 3 != 0 {
            i as f32
        } else {
            -(i as f32)
        }
    }));
    let want = x.mapv(|v: f32| v.abs() * 2.0);
    for device in all_devices() {
        let mut out = Array1::<f32>::zeros(128);
        likely_abs::launch(&device, 2, &mut out, &x, false).unwrap();
        assert_eq!(out, want, "{device:?}");
    }
    let mut out = Array1::<f32>::zeros(128);
    let e = likely_abs::launch(&Device::cpu(), 2, &mut out, &x, true)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("likely: the condition must be a bool tile"),
        "{e}"
    );
}

/// `assume(x < limit)`: checked as a `device_assert` in checked mode (and on the
/// interpreter), nothing otherwise.
#[kernel]
fn assumes(out: Ptr<i32>, limit: i32) {
    let offs = arange(0, 16);
    assume(offs < limit);
    store(out + offs, offs);
}

#[test]
fn a_false_assume_fails_in_checked_mode() {
    let checked = LaunchOptions {
        bounds_check: Some(true),
        ..Default::default()
    };
    for device in all_devices() {
        let mut out = Array1::<i32>::zeros(16);
        let e = assumes::launch_with(&device, 1, &checked, &mut out, 10)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("device_assert failed: assume (lane [10]"),
            "{device:?}: {e}"
        );
        assumes::launch_with(&device, 1, &checked, &mut out, 16).unwrap();
    }
    let mut out = Array1::<i32>::zeros(16);
    assumes::launch(&Device::cpu(), 1, &mut out, 10).unwrap();
}

/// `reshape` takes Triton's tuple shapes and `can_reorder` (the order is kept either way).
#[kernel]
fn reshapes(out: Ptr<i32>) {
    let x = arange(0, 8);
    let a = reshape(x, (2, 4));
    let b = reshape(a, (4, 2), can_reorder = true);
    store(out + arange(0, 8), ravel(trans(b)));
}

#[test]
fn reshape_with_tuples_and_can_reorder() {
    for device in all_devices() {
        let mut out = Array1::<i32>::zeros(8);
        reshapes::launch(&device, 1, &mut out).unwrap();
        assert_eq!(out.to_vec(), [0, 2, 4, 6, 1, 3, 5, 7], "{device:?}");
    }
}

/// Rank-3 tiles through loads and stores of 3-D pointer tiles, elementwise ops and a
/// reduction along each axis.
#[kernel]
fn rank3(
    sum0: Ptr<f32>,
    sum1: Ptr<f32>,
    sum2: Ptr<f32>,
    scaled: Ptr<f32>,
    x: Ptr<f32>,
    #[constexpr] A: usize,
    #[constexpr] B: usize,
    #[constexpr] C: usize,
) {
    let (a, b, c) = (arange(0, A), arange(0, B), arange(0, C));
    let offs =
        a[(.., None, None)] * (B * C) as i32 + b[(None, .., None)] * C as i32 + c[(None, None, ..)];
    let v = load(x + offs, mask = c[(None, None, ..)] < C as i32, other = 0.0);
    store(scaled + offs, v * 2.0 + 1.0);
    store(sum0 + b[(.., None)] * C as i32 + c[(None, ..)], sum(v, 0));
    store(sum1 + a[(.., None)] * C as i32 + c[(None, ..)], sum(v, 1));
    store(sum2 + a[(.., None)] * B as i32 + b[(None, ..)], sum(v, 2));
}

#[test]
fn rank3_tiles_load_store_and_reduce_along_each_axis() {
    use ndarray::{Array3, Axis};
    let (a, b, c) = (2, 4, 8);
    let x = Array3::from_shape_fn((a, b, c), |(i, j, k)| (i * 32 + j * 8 + k) as f32 * 0.25);
    for device in all_devices() {
        let (mut s0, mut s1) = (Array2::<f32>::zeros((b, c)), Array2::<f32>::zeros((a, c)));
        let mut s2 = Array2::<f32>::zeros((a, b));
        let mut scaled = Array3::<f32>::zeros((a, b, c));
        rank3::launch(
            &device,
            1,
            &mut s0,
            &mut s1,
            &mut s2,
            &mut scaled,
            x.view(),
            a,
            b,
            c,
        )
        .unwrap();
        assert_eq!(scaled, x.mapv(|v| v * 2.0 + 1.0), "{device:?}");
        assert_eq!(s0, x.sum_axis(Axis(0)), "{device:?}");
        assert_eq!(s1, x.sum_axis(Axis(1)), "{device:?}");
        assert_eq!(s2, x.sum_axis(Axis(2)), "{device:?}");
    }
}
