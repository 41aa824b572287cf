//! The reference interpreter against plain ndarray computations.

use half::f16;
use ndarray::{Array1, Array2, Axis};
use rstest::rstest;
use std::fmt::Debug;
use tritium_backend::interp::interpret;
use tritium_backend::launch::{Grid, KernelArgs};
use tritium_backend::{Error, Result};
use tritium_dsl::ir::{parse_function, CmpPred, DType, Function};
use tritium_dsl::trace::flow::{for_range, if_else, while_loop};
use tritium_dsl::trace::lang::*;
use tritium_dsl::trace::{ptr_param, scalar_param, Element, Specialization, Tile, Tracer};

/// Traces `body` as kernel `name`.
fn trace(name: &str, body: impl FnOnce()) -> Result<Function> {
    let t = Tracer::begin(name)?;
    body();
    Ok(t.finish()?)
}

fn run(f: &Function, grid: [u64; 3], args: KernelArgs<'_>) -> Result<()> {
    interpret(f, Grid(grid), &args.args)
}

/// A runtime i32 scalar parameter (never specialized).
fn i32_param(name: &str, index: usize) -> Tile {
    scalar_param(name, DType::I32, index, &Specialization::default())
}

/// `out[i] = x[i] + y[i]` for `i < n`, BLOCK lanes per program.
fn vector_add(dtype: DType, block: usize) -> Result<Function> {
    trace("vector_add", || {
        let (x, y, out) = (
            ptr_param("x", dtype),
            ptr_param("y", dtype),
            ptr_param("out", dtype),
        );
        let n = i32_param("n", 3);
        let offs = program_id(0) * block as i32 + arange(0, block);
        let mask = compare(offs, CmpPred::Lt, n);
        let a = load(x + offs, mask, NoArg);
        let b = load(y + offs, mask, NoArg);
        store(out + offs, a + b, mask);
    })
}

fn check_vector_add<T>(n: usize, make: impl Fn(usize) -> T) -> Result<()>
where
    T: Element + Debug + PartialEq + Default + std::ops::Add<Output = T>,
{
    const BLOCK: usize = 1024;
    let f = vector_add(T::DTYPE, BLOCK)?;
    let x = Array1::from_shape_fn(n, &make);
    let y = Array1::from_shape_fn(n, |i| make(n - i));
    let mut out = Array1::from_elem(n, T::default());
    let mut args = KernelArgs::new();
    args.ptr("x", &x);
    args.ptr("y", &y);
    args.ptr("out", &mut out);
    args.scalar("n", n as i32);
    run(&f, [n.div_ceil(BLOCK) as u64, 1, 1], args)?;
    let want = Array1::from_shape_fn(n, |i| x[i] + y[i]);
    assert_eq!(out, want);
    Ok(())
}

#[rstest]
fn vector_add_matches_ndarray(#[values(1, 7, 1024, 1000003)] n: usize) -> Result<()> {
    check_vector_add(n, |i| i as f32 * 0.25 - 3.0)?;
    check_vector_add(n, |i| (i % 65536) as i32 * 7919 - 5)?;
    check_vector_add(n, |i| f16::from_f32((i % 2048) as f32 * 0.125))
}

#[rstest]
#[case::all_in(8, 8)]
#[case::some_out(5, 8)]
#[case::one_in(1, 8)]
fn masked_load_gives_other(#[case] n: usize, #[case] block: usize) -> Result<()> {
    // The buffer has exactly n elements: masked-off lanes must not be read at all.
    let f = trace("masked", || {
        let (x, out) = (ptr_param("x", DType::F32), ptr_param("out", DType::F32));
        let n = i32_param("n", 2);
        let offs = arange(0, block);
        let v = load(x + offs, compare(offs, CmpPred::Lt, n), -1.5);
        store(out + offs, v, NoArg);
    })?;
    let x = Array1::from_shape_fn(n, |i| i as f32);
    let mut out = Array1::<f32>::zeros(block);
    let mut args = KernelArgs::new();
    args.ptr("x", &x);
    args.ptr("out", &mut out);
    args.scalar("n", n as i32);
    run(&f, [1, 1, 1], args)?;
    let want = Array1::from_shape_fn(block, |i| if i < n { i as f32 } else { -1.5 });
    assert_eq!(out, want);
    Ok(())
}

/// Loads an `[r, c]` f32 matrix, reduces it along `axis` with `op`, stores the result.
fn reduce_kernel(op: &str, axis: usize, r: usize, c: usize, out_dtype: DType) -> Result<Function> {
    let op = op.to_string();
    trace("reduce", move || {
        let (x, out) = (ptr_param("x", DType::F32), ptr_param("out", out_dtype));
        let offs = arange(0, r).expand_dims(1) * c as i32 + arange(0, c).expand_dims(0);
        let v = load(x + offs, NoArg, NoArg);
        let red = match op.as_str() {
            "sum" => sum(v, axis, NoArg),
            "max" => max(v, axis, NoArg),
            "min" => min(v, axis, NoArg),
            "argmax" => argmax(v, axis, NoArg),
            _ => argmin(v, axis, NoArg),
        };
        let len = if axis == 0 { c } else { r };
        store(out + arange(0, len), red, NoArg);
    })
}

fn first_index(lane: ndarray::ArrayView1<f32>, better: impl Fn(f32, f32) -> bool) -> i32 {
    let mut best: Option<(usize, f32)> = None;
    for (i, &v) in lane.iter().enumerate() {
        if v.is_nan() {
            continue;
        }
        if best.is_none_or(|(_, b)| better(v, b)) {
            best = Some((i, v));
        }
    }
    best.map_or(0, |(i, _)| i as i32)
}

#[rstest]
fn reductions_match_ndarray(
    #[values("sum", "max", "min", "argmax", "argmin")] op: &str,
    #[values(0, 1)] axis: usize,
    #[values((1, 1), (17, 33), (4, 6))] shape: (usize, usize),
) -> Result<()> {
    let (r, c) = shape;
    let is_arg = op.starts_with("arg");
    let f = reduce_kernel(op, axis, r, c, if is_arg { DType::I32 } else { DType::F32 })?;
    // Few distinct values, so there are ties; one NaN that max/min/argmax must ignore.
    let mut x = Array2::from_shape_fn((r, c), |(i, j)| ((i * 7 + j * 3) % 5) as f32 - 2.0);
    if r * c > 1 {
        x[[r / 2, c / 2]] = f32::NAN;
    }
    let len = if axis == 0 { c } else { r };
    let flat = x
        .as_standard_layout()
        .into_owned()
        .into_shape_with_order(r * c)
        .unwrap();
    let ax = Axis(axis);
    if is_arg {
        let mut out = Array1::<i32>::zeros(len);
        let mut args = KernelArgs::new();
        args.ptr("x", &flat);
        args.ptr("out", &mut out);
        run(&f, [1, 1, 1], args)?;
        let want = if op == "argmax" {
            x.map_axis(ax, |l| first_index(l, |v, b| v > b))
        } else {
            x.map_axis(ax, |l| first_index(l, |v, b| v < b))
        };
        assert_eq!(out, want, "{op} along {axis} of\n{x}");
    } else {
        let mut out = Array1::<f32>::zeros(len);
        let mut args = KernelArgs::new();
        args.ptr("x", &flat);
        args.ptr("out", &mut out);
        run(&f, [1, 1, 1], args)?;
        let want = match op {
            // The sum keeps NaN, as IEEE addition does.
            "sum" => x.map_axis(ax, |l| l.iter().map(|&v| v as f64).sum::<f64>() as f32),
            "max" => x.map_axis(ax, |l| l.iter().fold(f32::NAN, |m, &v| m.max(v))),
            _ => x.map_axis(ax, |l| l.iter().fold(f32::NAN, |m, &v| m.min(v))),
        };
        let same = out
            .iter()
            .zip(&want)
            .all(|(a, b)| a == b || (a.is_nan() && b.is_nan()));
        assert!(same, "{op} along {axis}: got {out}, want {want}");
    }
    Ok(())
}

#[test]
fn argmax_of_all_nan_is_zero_and_ties_take_the_first() -> Result<()> {
    let f = reduce_kernel("argmax", 1, 2, 4, DType::I32)?;
    let x = Array1::from(vec![
        f32::NAN,
        f32::NAN,
        f32::NAN,
        f32::NAN,
        1.0,
        3.0,
        3.0,
        f32::NAN,
    ]);
    let mut out = Array1::<i32>::zeros(2);
    let mut args = KernelArgs::new();
    args.ptr("x", &x);
    args.ptr("out", &mut out);
    run(&f, [1, 1, 1], args)?;
    assert_eq!(out.to_vec(), vec![0, 1]);
    Ok(())
}

/// `out = a @ b (+ acc)` for `[m, k] @ [k, n]` tiles of `dtype`.
fn dot_kernel(
    dtype: DType,
    acc_dtype: DType,
    m: usize,
    k: usize,
    n: usize,
    with_acc: bool,
) -> Result<Function> {
    trace("dot", || {
        let (pa, pb) = (ptr_param("a", dtype), ptr_param("b", dtype));
        let (pc, out) = (ptr_param("c", acc_dtype), ptr_param("out", acc_dtype));
        let grid2 = |rows: usize, cols: usize| {
            arange(0, rows).expand_dims(1) * cols as i32 + arange(0, cols).expand_dims(0)
        };
        let a = load(pa + grid2(m, k), NoArg, NoArg);
        let b = load(pb + grid2(k, n), NoArg, NoArg);
        let c = if with_acc {
            dot(a, b, load(pc + grid2(m, n), NoArg, NoArg))
        } else {
            dot(a, b, NoArg)
        };
        store(out + grid2(m, n), c, NoArg);
    })
}

#[rstest]
#[case(1, 1, 1, false)]
#[case(16, 32, 8, false)]
#[case(17, 33, 5, true)]
fn dot_f16_accumulates_in_f32(
    #[case] m: usize,
    #[case] k: usize,
    #[case] n: usize,
    #[case] with_acc: bool,
) -> Result<()> {
    let f = dot_kernel(DType::F16, DType::F32, m, k, n, with_acc)?;
    let a = Array2::from_shape_fn((m, k), |(i, j)| {
        f16::from_f32(((i * 3 + j) % 11) as f32 * 0.125 - 0.5)
    });
    let b = Array2::from_shape_fn((k, n), |(i, j)| {
        f16::from_f32(((i + 5 * j) % 7) as f32 * 0.25 - 0.75)
    });
    let c = Array2::from_shape_fn((m, n), |(i, j)| (i as f32) - (j as f32) * 0.5);
    let mut out = Array2::<f32>::zeros((m, n));
    let mut args = KernelArgs::new();
    args.ptr("a", &a);
    args.ptr("b", &b);
    args.ptr("c", &c);
    args.ptr("out", &mut out);
    run(&f, [1, 1, 1], args)?;
    let mut want = a.mapv(f16::to_f32).dot(&b.mapv(f16::to_f32));
    if with_acc {
        want += &c;
    }
    for (g, w) in out.iter().zip(&want) {
        assert!(
            (g - w).abs() <= 1e-4 * w.abs().max(1.0),
            "got {g}, want {w}"
        );
    }
    Ok(())
}

#[test]
fn dot_of_i32_wraps() -> Result<()> {
    let f = dot_kernel(DType::I32, DType::I32, 2, 3, 2, false)?;
    let a = Array2::from_shape_fn((2, 3), |(i, j)| i32::MAX - (i * 3 + j) as i32);
    let b = Array2::from_shape_fn((3, 2), |(i, j)| (i + j) as i32 + 3);
    let c = Array2::<i32>::zeros((2, 2));
    let mut out = Array2::<i32>::zeros((2, 2));
    let mut args = KernelArgs::new();
    args.ptr("a", &a);
    args.ptr("b", &b);
    args.ptr("c", &c);
    args.ptr("out", &mut out);
    run(&f, [1, 1, 1], args)?;
    let want = Array2::from_shape_fn((2, 2), |(i, j)| {
        (0..3).fold(0i32, |s, kk| {
            s.wrapping_add(a[[i, kk]].wrapping_mul(b[[kk, j]]))
        })
    });
    assert_eq!(out, want);
    Ok(())
}

#[test]
fn atomics_return_old_values_in_lane_order() -> Result<()> {
    const BLOCK: usize = 16;
    const PROGRAMS: u64 = 5;
    let f = trace("atomics", || {
        let (counts, hi, lo, slot, lock) = (
            ptr_param("counts", DType::I32),
            ptr_param("hi", DType::F32),
            ptr_param("lo", DType::I64),
            ptr_param("slot", DType::U32),
            ptr_param("lock", DType::I32),
        );
        let old = ptr_param("old", DType::I32);
        let pid = program_id(0);
        let lanes = arange(0, BLOCK);
        let prev = atomic_add(counts + lanes % 4, 1, NoArg);
        store(old + pid * BLOCK as i32 + lanes, prev, NoArg);
        let v = (lanes * (pid + 1)).to(DType::F32);
        atomic_max(hi + lanes, v, NoArg);
        atomic_min(
            lo + lanes,
            (lanes - pid * 3).to(DType::I64),
            compare(lanes, CmpPred::Lt, 8),
        );
        atomic_xchg(slot, pid.to(DType::U32), NoArg);
        atomic_cas(lock, 0, pid + 100);
    })?;
    let mut counts = Array1::<i32>::zeros(4);
    let mut hi = Array1::from_elem(BLOCK, -1.0f32);
    let mut lo = Array1::from_elem(BLOCK, 0i64);
    let mut slot = vec![7u32];
    let mut lock = vec![0i32];
    let mut old = Array1::<i32>::zeros(BLOCK * PROGRAMS as usize);
    let mut args = KernelArgs::new();
    args.ptr("counts", &mut counts);
    args.ptr("hi", &mut hi);
    args.ptr("lo", &mut lo);
    args.ptr("slot", &mut slot);
    args.ptr("lock", &mut lock);
    args.ptr("old", &mut old);
    run(&f, [PROGRAMS, 1, 1], args)?;
    assert_eq!(
        counts.to_vec(),
        vec![(BLOCK as i32 / 4) * PROGRAMS as i32; 4]
    );
    // Lane i of program p sees the increments of the programs before and of lanes i-4, i-8, …
    let want_old = Array1::from_shape_fn(old.len(), |g| {
        let (p, i) = (g / BLOCK, g % BLOCK);
        (p * BLOCK / 4 + i / 4) as i32
    });
    assert_eq!(old, want_old);
    assert_eq!(
        hi,
        Array1::from_shape_fn(BLOCK, |i| (i * PROGRAMS as usize) as f32)
    );
    let want_lo = Array1::from_shape_fn(BLOCK, |i| if i < 8 { (i as i64 - 12).min(0) } else { 0 });
    assert_eq!(lo, want_lo);
    assert_eq!(slot, vec![PROGRAMS as u32 - 1]);
    assert_eq!(lock, vec![100]);
    Ok(())
}

/// Loads `from` values, casts them to `to`, stores them.
fn cast_kernel(from: DType, to: DType, n: usize) -> Result<Function> {
    trace("cast", || {
        let (x, out) = (ptr_param("x", from), ptr_param("out", to));
        let offs = arange(0, n);
        store(out + offs, load(x + offs, NoArg, NoArg).to(to), NoArg);
    })
}

fn check_cast<A: Element, B: Element + Default + PartialEq + Debug>(
    xs: &[A],
    conv: impl Fn(A) -> B,
) -> Result<()> {
    let f = cast_kernel(A::DTYPE, B::DTYPE, xs.len())?;
    let x = Array1::from(xs.to_vec());
    let mut out = Array1::from_elem(xs.len(), B::default());
    let mut args = KernelArgs::new();
    args.ptr("x", &x);
    args.ptr("out", &mut out);
    run(&f, [1, 1, 1], args)?;
    // Debug text compares NaN equal to NaN and tells -0.0 from 0.0.
    let want = x.mapv(conv);
    assert_eq!(
        format!("{out:?}"),
        format!("{want:?}"),
        "{} -> {}",
        A::DTYPE,
        B::DTYPE
    );
    Ok(())
}

#[test]
fn casts_saturate_wrap_and_map_nan_to_zero() -> Result<()> {
    let floats = [
        1e10f32,
        -1e10,
        f32::NAN,
        3.7,
        -3.7,
        255.9,
        256.0,
        -1.0,
        f32::INFINITY,
        -0.0,
    ];
    check_cast(&floats, |v| v as i32)?;
    check_cast(&floats, |v| v as u8)?;
    check_cast(&floats, |v| v as i64)?;
    check_cast(&floats, |v| v != 0.0)?;
    check_cast(&floats, f16::from_f32)?;
    check_cast(&floats, |v| v as f64)?;
    let ints = [300i32, -129, 70000, i32::MIN, -1, 0, 16777217];
    check_cast(&ints, |v| v as i8)?;
    check_cast(&ints, |v| v as u16)?;
    check_cast(&ints, |v| v as u64)?;
    check_cast(&ints, |v| v as f32)?;
    check_cast(&ints, |v| v != 0)?;
    check_cast(&[u64::MAX, 1 << 63, 5], |v| v as i32)?;
    check_cast(&[u64::MAX, 1 << 63, 5], |v| v as f32)?;
    check_cast(&[true, false, true], |v| v as i32 as f32)?;
    check_cast(&[true, false], |v| v as u8)?;
    check_cast(
        &[
            f16::from_f32(65504.0),
            f16::NEG_INFINITY,
            f16::from_f32(-2.5),
        ],
        |v| v.to_f32() as i16,
    )
}

/// `q = a / b`, `r = a % b` elementwise for integers of `T`.
fn check_div<T>(pairs: &[(T, T)], div: impl Fn(T, T) -> T, rem: impl Fn(T, T) -> T) -> Result<()>
where
    T: Element + Default + PartialEq + Debug,
{
    let n = pairs.len();
    let f = trace("divrem", || {
        let (a, b) = (ptr_param("a", T::DTYPE), ptr_param("b", T::DTYPE));
        let (q, r) = (ptr_param("q", T::DTYPE), ptr_param("r", T::DTYPE));
        let offs = arange(0, n);
        let (x, y) = (load(a + offs, NoArg, NoArg), load(b + offs, NoArg, NoArg));
        store(q + offs, x / y, NoArg);
        store(r + offs, x % y, NoArg);
    })?;
    let a = Array1::from_iter(pairs.iter().map(|p| p.0));
    let b = Array1::from_iter(pairs.iter().map(|p| p.1));
    let (mut q, mut r) = (
        Array1::from_elem(n, T::default()),
        Array1::from_elem(n, T::default()),
    );
    let mut args = KernelArgs::new();
    args.ptr("a", &a);
    args.ptr("b", &b);
    args.ptr("q", &mut q);
    args.ptr("r", &mut r);
    run(&f, [1, 1, 1], args)?;
    assert_eq!(q, Array1::from_iter(pairs.iter().map(|p| div(p.0, p.1))));
    assert_eq!(r, Array1::from_iter(pairs.iter().map(|p| rem(p.0, p.1))));
    Ok(())
}

#[test]
fn int_division_truncates_and_zero_divisors_give_zero() -> Result<()> {
    check_div(
        &[
            (7i32, 2),
            (-7, 2),
            (7, -2),
            (-7, -2),
            (5, 0),
            (i32::MIN, -1),
            (0, 0),
            (-5, 0),
        ],
        |a, b| if b == 0 { 0 } else { a.wrapping_div(b) },
        |a, b| if b == 0 { 0 } else { a.wrapping_rem(b) },
    )?;
    check_div(
        &[(7i8, 2), (i8::MIN, -1), (-128, 3), (1, 0)],
        |a, b| if b == 0 { 0 } else { a.wrapping_div(b) },
        |a, b| if b == 0 { 0 } else { a.wrapping_rem(b) },
    )?;
    check_div(
        &[(7u32, 2), (u32::MAX, 3), (5, 0)],
        |a, b| a.checked_div(b).unwrap_or(0),
        |a, b| a.checked_rem(b).unwrap_or(0),
    )
}

#[test]
fn shifts_take_the_amount_modulo_the_width() -> Result<()> {
    let n = 6;
    let f = trace("shifts", || {
        let (a, s) = (ptr_param("a", DType::I32), ptr_param("s", DType::I32));
        let (l, r, u) = (
            ptr_param("l", DType::I32),
            ptr_param("r", DType::I32),
            ptr_param("u", DType::U32),
        );
        let offs = arange(0, n);
        let (x, k) = (load(a + offs, NoArg, NoArg), load(s + offs, NoArg, NoArg));
        store(l + offs, x << k, NoArg);
        store(r + offs, x >> k, NoArg);
        store(u + offs, x.to(DType::U32) >> k.to(DType::U32), NoArg);
    })?;
    let a = Array1::from(vec![1i32, -8, -8, i32::MIN, 3, -1]);
    let s = Array1::from(vec![33i32, 1, 2, 31, -1, 40]);
    let (mut l, mut r, mut u) = (
        Array1::<i32>::zeros(n),
        Array1::<i32>::zeros(n),
        Array1::<u32>::zeros(n),
    );
    let mut args = KernelArgs::new();
    args.ptr("a", &a);
    args.ptr("s", &s);
    args.ptr("l", &mut l);
    args.ptr("r", &mut r);
    args.ptr("u", &mut u);
    run(&f, [1, 1, 1], args)?;
    let m = |k: i32| (k as u32) & 31;
    assert_eq!(l, Array1::from_shape_fn(n, |i| a[i].wrapping_shl(m(s[i]))));
    assert_eq!(r, Array1::from_shape_fn(n, |i| a[i] >> m(s[i])));
    assert_eq!(u, Array1::from_shape_fn(n, |i| (a[i] as u32) >> m(s[i])));
    Ok(())
}

#[rstest]
#[case::none(0)]
#[case::one(1)]
#[case::many(9)]
fn for_loop_carries_tiles_up_and_down(#[case] rows: usize) -> Result<()> {
    const BLOCK: usize = 8;
    let f = trace("rows", || {
        let (x, out, back) = (
            ptr_param("x", DType::F32),
            ptr_param("out", DType::F32),
            ptr_param("back", DType::F32),
        );
        let n = i32_param("n", 3);
        let lanes = arange(0, BLOCK);
        let acc = zeros([BLOCK], DType::F32);
        let acc = for_range(0, n, 1, acc, |i, acc| {
            acc + load(x + i * BLOCK as i32 + lanes, NoArg, NoArg)
        });
        store(out + lanes, acc, NoArg);
        // Counting down: an order-dependent accumulation (Horner).
        let h = zeros([BLOCK], DType::F32);
        let h = for_range(n - 1, -1, -1, h, |i, h| h * 2.0 + i.to(DType::F32));
        store(back + lanes, h, NoArg);
    })?;
    let x = Array2::from_shape_fn((rows.max(1), BLOCK), |(i, j)| (i * BLOCK + j) as f32);
    let (mut out, mut back) = (Array1::<f32>::zeros(BLOCK), Array1::<f32>::zeros(BLOCK));
    let mut args = KernelArgs::new();
    args.ptr("x", &x);
    args.ptr("out", &mut out);
    args.ptr("back", &mut back);
    args.scalar("n", rows as i32);
    run(&f, [1, 1, 1], args)?;
    let want = x.slice(ndarray::s![..rows, ..]).sum_axis(Axis(0));
    assert_eq!(out, want);
    let horner = (0..rows).rev().fold(0.0f32, |h, i| h * 2.0 + i as f32);
    assert_eq!(back, Array1::from_elem(BLOCK, horner));
    Ok(())
}

#[test]
fn if_and_while_carry_tiles() -> Result<()> {
    const BLOCK: usize = 4;
    let f = trace("branches", || {
        let (x, out) = (ptr_param("x", DType::I32), ptr_param("out", DType::I32));
        let n = i32_param("n", 2);
        let pid = program_id(0);
        let offs = pid * BLOCK as i32 + arange(0, BLOCK);
        let v = load(x + offs, NoArg, NoArg);
        let even = compare(pid % 2, CmpPred::Eq, 0);
        let (v, (), ()) = if_else(even, (), |()| (v * 10, (), ()), |()| (v - 1, (), ()));
        // Doubles v n times; k counts.
        let k = scalar(0, DType::I32);
        let (v, _k) = while_loop(
            (v, k),
            |(_, k)| compare(k, CmpPred::Lt, n),
            |(v, k)| (v * 2, k + 1),
        );
        store(out + offs, v, NoArg);
    })?;
    let programs = 3;
    let x = Array1::from_shape_fn(BLOCK * programs, |i| i as i32);
    let mut out = Array1::<i32>::zeros(BLOCK * programs);
    for n in [0, 3] {
        let mut args = KernelArgs::new();
        args.ptr("x", &x);
        args.ptr("out", &mut out);
        args.scalar("n", n);
        run(&f, [programs as u64, 1, 1], args)?;
        let want = x.mapv(|v| {
            let p = v as usize / BLOCK;
            let b = if p.is_multiple_of(2) { v * 10 } else { v - 1 };
            b << n
        });
        assert_eq!(out, want, "n = {n}");
    }
    Ok(())
}

#[test]
fn grid_runs_every_program_with_its_ids() -> Result<()> {
    let f = trace("ids", || {
        let out = ptr_param("out", DType::I32);
        let (x, y, z) = (program_id(0), program_id(1), program_id(2));
        let (nx, ny) = (num_programs(0), num_programs(1));
        let flat = (z * ny + y) * nx + x;
        store(out + flat, flat * 1000 + num_programs(2), NoArg);
    })?;
    let mut out = Array1::<i32>::zeros(2 * 3 * 4);
    let mut args = KernelArgs::new();
    args.ptr("out", &mut out);
    run(&f, [2, 3, 4], args)?;
    assert_eq!(out, Array1::from_shape_fn(24, |i| i as i32 * 1000 + 4));
    Ok(())
}

#[test]
fn text_form_kernels_run() -> Result<()> {
    let f = parse_function(
        r#"kernel @count(out %0: ptr<i32>, n %1: i32) {
  %2 = const {value = 0} : i32 loc("t.rs":1:1)
  %3 = while %2 : i32 loc("t.rs":2:1) {
  ^(%4: i32)
    %5 = cmp %4, %1 {pred = lt} : bool loc("t.rs":3:1)
    condition %5 loc("t.rs":3:1)
  } {
  ^(%6: i32)
    %7 = const {value = 3} : i32 loc("t.rs":4:1)
    %8 = add %6, %7 : i32 loc("t.rs":4:1)
    yield %8 loc("t.rs":4:1)
  }
  store %0, %3 loc("t.rs":5:1)
}
"#,
    )?;
    let mut out = vec![0i32];
    let mut args = KernelArgs::new();
    args.ptr("out", &mut out);
    args.scalar("n", 10i32);
    run(&f, [1, 1, 1], args)?;
    assert_eq!(out, vec![12]);
    Ok(())
}

/// The `Runtime` error's location and message.
fn runtime_error(r: Result<()>) -> (String, String) {
    match r {
        Err(Error::Runtime {
            location, message, ..
        }) => (location, message),
        other => panic!("expected a runtime error, got {other:?}"),
    }
}

#[rstest]
#[case::load(true)]
#[case::store(false)]
fn out_of_bounds_access_is_an_error_at_its_line(#[case] is_load: bool) -> Result<()> {
    let mut line = 0;
    let f = trace("oob", || {
        let (x, out) = (ptr_param("x", DType::F32), ptr_param("out", DType::F32));
        let offs = arange(0, 16);
        if is_load {
            line = line!() + 1;
            let v = load(x + offs, NoArg, NoArg);
            store(out + arange(0, 1), sum(v, 0, NoArg), NoArg);
        } else {
            line = line!() + 1;
            store(out + offs, 1.0, NoArg);
        }
    })?;
    let x = Array1::<f32>::zeros(10);
    let mut out = Array1::<f32>::zeros(10);
    let mut args = KernelArgs::new();
    args.ptr("x", &x);
    args.ptr("out", &mut out);
    let (location, message) = runtime_error(run(&f, [1, 1, 1], args));
    assert!(
        location.contains(&format!("interp.rs:{line}:")),
        "{location}"
    );
    let what = if is_load { "load" } else { "store" };
    assert!(
        message.starts_with(what) && message.contains("outside every buffer"),
        "{message}"
    );
    assert!(
        message.contains("lane [10]") && message.contains("`x`") && message.contains("`out`"),
        "{message}"
    );
    // A faulting store writes nothing, not even its in-bounds lanes.
    assert_eq!(out, Array1::<f32>::zeros(10));
    Ok(())
}

#[test]
fn store_through_a_read_only_buffer_is_an_error() -> Result<()> {
    let f = trace("ro", || {
        let out = ptr_param("out", DType::I32);
        store(out + arange(0, 4), 7, NoArg);
    })?;
    let out = Array1::<i32>::zeros(4);
    let mut args = KernelArgs::new();
    args.ptr("out", &out);
    let (_, message) = runtime_error(run(&f, [1, 1, 1], args));
    assert!(message.contains("read-only"), "{message}");
    assert_eq!(out, Array1::<i32>::zeros(4));
    Ok(())
}

#[test]
fn zero_loop_step_is_an_error_not_a_hang() -> Result<()> {
    let f = trace("step0", || {
        let out = ptr_param("out", DType::I32);
        let s = i32_param("s", 1);
        let acc = for_range(0, 10, s, scalar(0, DType::I32), |_, a| a + 1);
        store(out, acc, NoArg);
    })?;
    let mut out = vec![0i32];
    let mut args = KernelArgs::new();
    args.ptr("out", &mut out);
    args.scalar("s", 0i32);
    let (_, message) = runtime_error(run(&f, [1, 1, 1], args));
    assert!(message.contains("step 0"), "{message}");
    Ok(())
}

#[test]
fn mismatched_arguments_are_launch_errors() -> Result<()> {
    let f = vector_add(DType::F32, 4)?;
    let x = vec![0i32; 4];
    let mut args = KernelArgs::new();
    args.ptr("x", &x);
    assert!(matches!(
        run(&f, [1, 1, 1], args),
        Err(Error::Launch { .. })
    ));
    Ok(())
}

/// Row softmax, one row per program: the 2-D shapes of the issue, incl. 4096×781.
#[rstest]
fn row_softmax_matches_ndarray(
    #[values((1, 1), (17, 33), (4096, 781))] shape: (usize, usize),
) -> Result<()> {
    let (rows, cols) = shape;
    let block = cols.next_power_of_two();
    let f = trace("softmax", || {
        let (x, out) = (ptr_param("x", DType::F32), ptr_param("out", DType::F32));
        let n = i32_param("n", 2);
        let row = program_id(0);
        let lanes = arange(0, block);
        let mask = compare(lanes, CmpPred::Lt, n);
        let v = load(x + row * n + lanes, mask, f32::NEG_INFINITY);
        let e = exp(v - max(v, 0, NoArg));
        store(out + row * n + lanes, e / sum(e, 0, NoArg), mask);
    })?;
    let x = Array2::from_shape_fn((rows, cols), |(i, j)| ((i * 31 + j * 17) % 97) as f32 * 0.1);
    let mut out = Array2::<f32>::zeros((rows, cols));
    let start = std::time::Instant::now();
    let mut args = KernelArgs::new();
    args.ptr("x", &x);
    args.ptr("out", &mut out);
    args.scalar("n", cols as i32);
    run(&f, [rows as u64, 1, 1], args)?;
    eprintln!("interpreted softmax {rows}x{cols} in {:?}", start.elapsed());
    let mut want = x.clone();
    for mut r in want.rows_mut() {
        let m = r.fold(f32::NEG_INFINITY, |a, &b| a.max(b));
        r.mapv_inplace(|v| (v - m).exp());
        let s = r.sum();
        r.mapv_inplace(|v| v / s);
    }
    for (g, w) in out.iter().zip(&want) {
        assert!(
            (g - w).abs() <= 1e-5 * w.abs().max(1e-3),
            "got {g}, want {w}"
        );
    }
    Ok(())
}

/// Lanes of one store that write different values to one element make a lane-conflict
/// check an error naming the lane and address; equal values (a broadcast) are fine, and
/// without the check the last lane in row-major order lands.
#[rstest]
#[case::different_values(true, true)]
#[case::equal_values(false, true)]
#[case::unchecked(true, false)]
fn lane_conflicts_are_errors_when_checked(
    #[case] differ: bool,
    #[case] checked: bool,
) -> Result<()> {
    use tritium_backend::interp::{interpret_with, InterpretOptions};
    let f = trace("one_address", || {
        let out = ptr_param("out", DType::I32);
        let value = match differ {
            true => arange(0, 4),
            false => full([4], 7, DType::I32),
        };
        store(out + zeros([4], DType::I32), value, NoArg);
    })?;
    let mut out = Array1::<i32>::zeros(1);
    let mut args = KernelArgs::new();
    args.ptr("out", &mut out);
    let options = InterpretOptions {
        lane_conflicts: checked,
        ..Default::default()
    };
    let run = interpret_with(&f, Grid([1, 1, 1]), &args.args, &options);
    drop(args);
    match (differ, checked) {
        (true, true) => {
            let e = run.expect_err("conflicting lanes").to_string();
            assert!(
                e.contains("lane 0 of the store") && e.contains("unspecified"),
                "{e}"
            );
        }
        _ => {
            run?;
            assert_eq!(out[0], if differ { 3 } else { 7 });
        }
    }
    Ok(())
}
