//! Compiled code against the reference interpreter on the paths the CPU code generator
//! specializes: the blocked `dot`, vectorized float max/min reductions, the closed-form
//! "mask is all true" test, in-place loop-carried updates and loads repeated per consumer.
//! Each kernel is traced once and run both ways on identical inputs.

use crate::common::TempDir;
use half::{bf16, f16};
use ndarray::{Array1, ArrayD, IxDyn};
use tritium_backend::check_args;
use tritium_backend::cpu::{self, CompileOptions, Compiled};
use tritium_backend::interp::interpret;
use tritium_backend::launch::{Grid, KernelArgs};
use tritium_dsl::ir::{CmpPred, DType, Function};
use tritium_dsl::trace::flow::for_range;
use tritium_dsl::trace::lang::*;
use tritium_dsl::trace::{ptr_param, scalar_param, Element, Specialization, Tile, Tracer};

fn trace(name: &str, body: impl FnOnce()) -> Function {
    let t = Tracer::begin(name).unwrap();
    body();
    t.finish().unwrap()
}

fn compile(f: &Function, cache: &TempDir) -> Compiled {
    let opts = CompileOptions {
        cache_dir: Some(cache.path().to_path_buf()),
        ..Default::default()
    };
    cpu::compile(f.clone(), &opts).unwrap()
}

/// Runs `f` compiled, then interpreted, each time on fresh buffers from `make`, and
/// returns the buffers of both runs.
fn both<B>(
    f: &Function,
    grid: [u64; 3],
    make: impl Fn() -> B,
    args: impl for<'a> Fn(&'a mut B) -> KernelArgs<'a>,
) -> (B, B) {
    let cache = TempDir::new("codegen");
    let compiled = compile(f, &cache);
    let mut got = make();
    {
        let a = args(&mut got);
        check_args(f, &a).unwrap();
        compiled.run(Grid(grid), &a.args, false).unwrap();
    }
    let mut want = make();
    interpret(f, Grid(grid), &args(&mut want).args).unwrap();
    (got, want)
}

/// The bits of each element (NaN payloads and signed zeros count).
fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

/// The arguments `x` (read) and `out` (written) from a pair of buffers, then the i32
/// scalars `scalars`, in order.
fn x_out<'a, T: Element>(
    b: &'a mut (Vec<T>, Vec<T>),
    scalars: &[(&'static str, i32)],
) -> KernelArgs<'a> {
    let mut args = KernelArgs::new();
    args.ptr("x", &b.0[..]);
    args.ptr("out", &mut b.1[..]);
    for (name, v) in scalars {
        args.scalar(name, *v);
    }
    args
}

/// The `.ll` dump (before LLVM's passes) of `f` compiled for the CPU, in a fresh directory
/// named after `what`.
fn unoptimized_ll(f: Function, what: &str) -> String {
    dumped(f, what, |p| p.ends_with(".ll") && !p.ends_with(".opt.ll"))
}

/// The `.opt.ll` dump (after LLVM's passes) of `f` compiled for the CPU.
fn optimized_ll(f: Function, what: &str) -> String {
    dumped(f, what, |p| p.ends_with(".opt.ll"))
}

/// The dump of `f`'s compile whose path `pick` chooses.
fn dumped(f: Function, what: &str, pick: impl Fn(&str) -> bool) -> String {
    let dump = TempDir::new(what);
    let opts = CompileOptions {
        dump_dir: Some(dump.path().to_path_buf()),
        ..Default::default()
    };
    cpu::compile(f, &opts).unwrap();
    std::fs::read_dir(dump.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| pick(&p.to_string_lossy()))
        .map(|p| std::fs::read_to_string(p).unwrap())
        .expect("the dump")
}

/// A `[rows, cols]` tile of row-major offsets with row stride `stride`.
fn offsets2(rows: usize, cols: usize, stride: usize) -> Tile {
    expand_dims(arange(0, rows), 1) * stride as i32 + expand_dims(arange(0, cols), 0)
}

/// Deterministic values in [-1, 1).
fn values(n: usize, seed: u64) -> Vec<f64> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
        })
        .collect()
}

fn assert_close(got: &[f64], want: &[f64], tol: f64, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let ok = g == w || (g - w).abs() <= tol * (1.0 + w.abs()) || (g.is_nan() && w.is_nan());
        assert!(ok, "{what}: element {i}: compiled {g}, interpreted {w}");
    }
}

/// Buffers of one `dot` test: a, b, acc and two outputs, as f64 for comparison.
struct DotBufs<A, C> {
    a: Vec<A>,
    b: Vec<A>,
    acc: Vec<C>,
    out: Vec<C>,
    out2: Vec<C>,
}

#[derive(Clone, Copy, Debug)]
enum DotUse {
    /// `store(out, dot(a, b, acc))`.
    Plain,
    /// `acc` is stored too after the dot: it must not be overwritten.
    AccLivesOn,
    /// The dot runs twice in a loop on an `acc` defined before it.
    InLoop,
    /// `acc` is carried through a loop over two K blocks (updated in place).
    KLoop,
    /// As `KLoop`, from `zeros` (the first iteration is peeled).
    KLoopFromZeros,
}

fn dot_kernel(da: DType, dc: DType, (m, k, n): (usize, usize, usize), use_: DotUse) -> Function {
    trace("codegen_dot", || {
        let a = ptr_param("a", da);
        let b = ptr_param("b", da);
        let acc = ptr_param("acc", dc);
        let out = ptr_param("out", dc);
        let out2 = ptr_param("out2", dc);
        let c_offs = offsets2(m, n, n);
        let tc = load(acc + c_offs, NoArg, NoArg);
        match use_ {
            DotUse::Plain | DotUse::AccLivesOn | DotUse::InLoop => {
                let ta = load(a + offsets2(m, k, k), NoArg, NoArg);
                let tb = load(b + offsets2(k, n, n), NoArg, NoArg);
                match use_ {
                    DotUse::Plain => store(out + c_offs, dot(ta, tb, tc), NoArg),
                    DotUse::AccLivesOn => {
                        store(out + c_offs, dot(ta, tb, tc), NoArg);
                        store(out2 + c_offs, tc, NoArg);
                    }
                    _ => {
                        for_range(0, 2, 1, (), |i, ()| {
                            let c = dot(ta, tb, tc);
                            store(out + c_offs, c, compare(i, CmpPred::Eq, 0));
                            store(out2 + c_offs, c, compare(i, CmpPred::Eq, 1));
                        });
                    }
                }
            }
            DotUse::KLoop | DotUse::KLoopFromZeros => {
                // a is [m, 2k], b is [2k, n].
                let init = match use_ {
                    DotUse::KLoop => tc,
                    _ => zeros([m, n], dc),
                };
                let c = for_range(0, 2, 1, init, |kb, acc| {
                    let k0 = kb * k as i32;
                    let ta = load(a + offsets2(m, k, 2 * k) + k0, NoArg, NoArg);
                    let tb = load(b + offsets2(k, n, n) + k0 * n as i32, NoArg, NoArg);
                    dot(ta, tb, acc)
                });
                store(out + c_offs, c, NoArg);
            }
        }
    })
}

fn check_dot<A: Element + Copy, C: Element + Copy + Default>(
    shape: (usize, usize, usize),
    to_a: impl Fn(f64) -> A,
    to_c: impl Fn(f64) -> C,
    back: impl Fn(C) -> f64,
    tol: f64,
) {
    let (m, k, n) = shape;
    for use_ in [
        DotUse::Plain,
        DotUse::AccLivesOn,
        DotUse::InLoop,
        DotUse::KLoop,
        DotUse::KLoopFromZeros,
    ] {
        let k_total = if matches!(use_, DotUse::KLoop | DotUse::KLoopFromZeros) {
            2 * k
        } else {
            k
        };
        let f = dot_kernel(A::DTYPE, C::DTYPE, shape, use_);
        let make = || DotBufs {
            a: values(m * k_total, 1).into_iter().map(&to_a).collect(),
            b: values(k_total * n, 2).into_iter().map(&to_a).collect(),
            acc: values(m * n, 3).into_iter().map(&to_c).collect(),
            out: vec![C::default(); m * n],
            out2: vec![C::default(); m * n],
        };
        let (got, want) = both(&f, [1, 1, 1], make, |bufs: &mut DotBufs<A, C>| {
            let mut args = KernelArgs::new();
            args.ptr("a", &bufs.a[..]);
            args.ptr("b", &bufs.b[..]);
            args.ptr("acc", &bufs.acc[..]);
            args.ptr("out", &mut bufs.out[..]);
            args.ptr("out2", &mut bufs.out2[..]);
            args
        });
        let what = format!(
            "{} x {} -> {} {shape:?} {use_:?}",
            A::DTYPE,
            A::DTYPE,
            C::DTYPE
        );
        let f64s = |v: &[C]| v.iter().map(|x| back(*x)).collect::<Vec<_>>();
        assert_close(&f64s(&got.out), &f64s(&want.out), tol, &what);
        if matches!(use_, DotUse::AccLivesOn | DotUse::InLoop) {
            assert_close(&f64s(&got.out2), &f64s(&want.out2), tol, &what);
        }
    }
}

/// Shapes with full micro-kernel blocks, leftover rows, leftover vector columns, a single
/// row, and column counts that are not a multiple of any vector width (the fallback); `b`
/// packed in panels of the micro-kernel's width where its rows would crowd L1 (64 rows of
/// 128 columns: 8 of AVX2's f32 panels, 4 of AVX-512's), row-major elsewhere.
const DOT_SHAPES: [(usize, usize, usize); 8] = [
    (6, 4, 16),
    (13, 7, 24),
    (64, 32, 64),
    (12, 64, 128),
    (1, 1, 8),
    (5, 3, 4),
    (7, 5, 3),
    (2, 9, 1),
];

#[test]
fn dot_f32_matches_interpreter() {
    for s in DOT_SHAPES {
        check_dot(s, |x| x as f32, |x| x as f32, |x: f32| x as f64, 1e-5);
    }
}

#[test]
fn dot_f16_and_bf16_inputs_accumulate_in_f32() {
    for s in DOT_SHAPES {
        check_dot(s, f16::from_f64, |x| x as f32, |x: f32| x as f64, 1e-5);
        check_dot(s, bf16::from_f64, |x| x as f32, |x: f32| x as f64, 1e-5);
    }
}

#[test]
fn dot_f64_matches_interpreter() {
    for s in DOT_SHAPES {
        check_dot(s, |x| x, |x| x, |x: f64| x, 1e-12);
    }
}

#[test]
fn dot_integers_match_interpreter_exactly() {
    for s in DOT_SHAPES {
        check_dot(
            s,
            |x| (x * 100.0) as i8,
            |x| (x * 1000.0) as i32,
            |x: i32| x as f64,
            0.0,
        );
        check_dot(
            s,
            |x| (x * 3e9) as i64,
            |x| (x * 1e18) as i64,
            |x: i64| x as f64,
            0.0,
        );
    }
}

/// How the transposed operand of [`check_transposed_dot`] is addressed.
#[derive(Clone, Copy, Debug)]
enum Transposed {
    /// i32 offsets `kk + j·k`: every lane in, read by transposed blocks.
    Plain,
    /// Columns `j >= valid` masked off (`other` 0): full blocks when `valid == n`, lane by
    /// lane otherwise.
    Masked,
    /// i8 offsets `120 + kk + j·k` that wrap inside a column (from `b + 128`): the
    /// run-time check sends the copy lane by lane, which reads what they address.
    WrappingI8,
    /// `kk + j·stride` with `stride` a run-time argument: the column offsets, equal down
    /// each column, need no check, so whole blocks are transposed.
    RuntimeStride,
    /// `kk` plus i8 column offsets `j·stride` that wrap from column to column (from
    /// `b + 128`): each column is still one run, read by transposed blocks where it lies.
    WrappingColumnsI8,
}

/// `dot(a, bᵀ)` where `b` is stored `[n, k]` row-major and loaded as the `[k, n]` tile
/// `bᵀ` (lanes contiguous down the columns, as attention's `kᵀ`), compiled against the
/// interpreter, and whether the compiled code transposed blocks in registers.
fn check_transposed_dot<T: Element + Copy + Default>(
    (m, k, n): (usize, usize, usize),
    how: Transposed,
    valid: usize,
    to_t: impl Fn(f64) -> T,
    back: impl Fn(T) -> f64,
) -> bool {
    let f = trace("codegen_dot_transposed", || {
        let a = ptr_param("a", T::DTYPE);
        let b = ptr_param("b", T::DTYPE);
        let out = ptr_param("out", T::DTYPE);
        let nv = scalar_param("valid", DType::I32, 3, &Specialization::default());
        let stride = scalar_param("stride", DType::I32, 4, &Specialization::default());
        let ta = load(a + offsets2(m, k, k), NoArg, NoArg);
        let kk = expand_dims(arange(0, k), 1);
        let j = expand_dims(arange(0, n), 0);
        let offs = kk + j * k as i32;
        let tb = match how {
            Transposed::Plain => load(b + offs, NoArg, NoArg),
            Transposed::Masked => load(b + offs, compare(j, CmpPred::Lt, nv), 0),
            Transposed::WrappingI8 => load(b + 128 + cast(offs + 120, DType::I8), NoArg, NoArg),
            Transposed::RuntimeStride => load(b + kk + j * stride, NoArg, NoArg),
            Transposed::WrappingColumnsI8 => {
                let columns = cast(j * stride, DType::I8);
                load(b + 128 + columns + kk, NoArg, NoArg)
            }
        };
        store(
            out + offsets2(m, n, n),
            dot(ta, tb, zeros([m, n], T::DTYPE)),
            NoArg,
        );
    });
    let b_len = (n * k).max(512);
    let make = || {
        (
            values(m * k, 1).into_iter().map(&to_t).collect::<Vec<T>>(),
            values(b_len, 2).into_iter().map(&to_t).collect::<Vec<T>>(),
            vec![T::default(); m * n],
        )
    };
    let (got, want) = both(&f, [1, 1, 1], make, |bufs| {
        let mut args = KernelArgs::new();
        args.ptr("a", &bufs.0[..]);
        args.ptr("b", &bufs.1[..]);
        args.ptr("out", &mut bufs.2[..]);
        args.scalar("valid", valid as i32);
        args.scalar("stride", k as i32);
        args
    });
    let what = format!(
        "{} {:?} {how:?}, {valid} valid columns",
        T::DTYPE,
        (m, k, n)
    );
    let f64s = |v: &[T]| v.iter().map(|x| back(*x)).collect::<Vec<_>>();
    assert_close(&f64s(&got.2), &f64s(&want.2), 1e-5, &what);
    let ll = unoptimized_ll(f, "codegen-dump");
    ll.contains("%transposed")
}

/// A `dot` operand stored transposed is packed by blocks transposed in registers when
/// every lane is in (its column stride known or a run-time value), and lane by lane (the
/// same values) when a mask or a narrow offset wrapping inside a column says otherwise.
#[test]
fn dot_of_a_transposed_load_matches_interpreter() {
    let f32s = |x| x as f32;
    let back = |x: f32| x as f64;
    for (shape, how, valid) in [
        ((6, 32, 48), Transposed::Plain, 48),
        ((16, 64, 64), Transposed::Plain, 64),
        // Into panels (`b`'s rows would crowd L1).
        ((6, 64, 128), Transposed::Plain, 128),
        ((6, 64, 128), Transposed::Masked, 120),
        ((6, 32, 48), Transposed::Masked, 48),
        ((6, 32, 48), Transposed::Masked, 40),
        ((6, 16, 16), Transposed::WrappingI8, 16),
        ((6, 64, 128), Transposed::RuntimeStride, 128),
        ((16, 32, 48), Transposed::RuntimeStride, 48),
        ((6, 16, 16), Transposed::WrappingColumnsI8, 16),
    ] {
        let blocks = check_transposed_dot(shape, how, valid, f32s, back);
        assert!(blocks, "no transposed blocks for {shape:?} {how:?}");
    }
    let f64_blocks = check_transposed_dot((6, 32, 32), Transposed::Plain, 32, |x| x, |x| x);
    let to_i32 = |x| (x * 1000.0) as i32;
    let i32_blocks = check_transposed_dot((6, 32, 32), Transposed::Plain, 32, to_i32, |x| x as f64);
    assert!(
        f64_blocks && i32_blocks,
        "no transposed blocks for f64 or i32"
    );
}

/// `reduce(op, load(x), axis)` over `shape`; row `r` of the last axis has `n` valid
/// lanes (the rest is masked with the op's identity as `other`).
fn reduce_kernel(d: DType, shape: &[usize], axis: usize, is_max: bool) -> Function {
    let shape = shape.to_vec();
    trace("codegen_reduce", || {
        let x = ptr_param("x", d);
        let out = ptr_param("out", d);
        let n = scalar_param("n", DType::I32, 2, &Specialization::default());
        let last = shape[shape.len() - 1];
        let (offs, cols, out_offs) = if shape.len() == 1 {
            (arange(0, last), arange(0, last), None)
        } else {
            let cols = expand_dims(arange(0, last), 0);
            let out_offs = if axis == 0 {
                arange(0, last)
            } else {
                arange(0, shape[0])
            };
            (offsets2(shape[0], last, last), cols, Some(out_offs))
        };
        let other = if is_max {
            f64::NEG_INFINITY
        } else {
            f64::INFINITY
        };
        let t = load(x + offs, compare(cols, CmpPred::Lt, n), other);
        let r = if is_max {
            max(t, axis, NoArg)
        } else {
            min(t, axis, NoArg)
        };
        match out_offs {
            None => store(out, r, NoArg),
            Some(o) => store(out + o, r, NoArg),
        }
    })
}

fn check_reduce<T: Element + Copy + Default>(to: impl Fn(f64) -> T, back: impl Fn(T) -> f64) {
    let cases: [(&[usize], usize); 6] = [
        (&[1024], 0),
        (&[40], 0),
        (&[3, 64], 1),
        (&[64, 3], 0),
        (&[2, 32], 1),
        (&[4, 16], 1),
    ];
    for (shape, axis) in cases {
        let numel: usize = shape.iter().product();
        let last = shape[shape.len() - 1];
        // Specials in every row, never a row of NaN only.
        let data: Vec<f64> = values(numel, 7)
            .into_iter()
            .enumerate()
            .map(|(i, v)| match i % 11 {
                3 => f64::NAN,
                5 if i % 3 == 0 => f64::INFINITY,
                7 if i % 2 == 0 => f64::NEG_INFINITY,
                _ => v * 100.0,
            })
            .collect();
        for is_max in [true, false] {
            let f = reduce_kernel(T::DTYPE, shape, axis, is_max);
            for n in [last, last.saturating_sub(5).max(1)] {
                let outs = if shape.len() == 1 {
                    1
                } else {
                    numel / shape[axis]
                };
                let make = || {
                    (
                        data.iter().map(|v| to(*v)).collect::<Vec<T>>(),
                        vec![T::default(); outs],
                    )
                };
                let (got, want) = both(&f, [1, 1, 1], make, |b: &mut (Vec<T>, Vec<T>)| {
                    x_out(b, &[("n", n as i32)])
                });
                let what = format!(
                    "{} {} of {shape:?} along {axis}, {n} valid",
                    T::DTYPE,
                    if is_max { "max" } else { "min" }
                );
                let f64s = |v: &[T]| v.iter().map(|x| back(*x)).collect::<Vec<_>>();
                assert_close(&f64s(&got.1), &f64s(&want.1), 0.0, &what);
            }
        }
    }
}

#[test]
fn float_max_min_reductions_match_interpreter() {
    check_reduce(|x| x as f32, |x: f32| x as f64);
    check_reduce(|x| x, |x: f64| x);
    check_reduce(f16::from_f64, |x: f16| x.to_f64());
}

#[test]
fn mask_of_a_wrapping_index_is_not_taken_as_full() {
    // idx + s with s = i32::MAX - 3 wraps for lanes 4..8, which then compare false with
    // `>= s`: those lanes must take `other` (a mask test that ignores the wrap would read
    // them).
    let f = trace("codegen_wrap_mask", || {
        let x = ptr_param("x", DType::F32);
        let out = ptr_param("out", DType::F32);
        let s = scalar_param("s", DType::I32, 2, &Specialization::default());
        let idx = arange(0, 8);
        let mask = compare(idx + s, CmpPred::Ge, s);
        let v = load(x + idx, mask, -1.0f32);
        store(out + idx, v, NoArg);
    });
    let make = || {
        (
            Array1::from_iter((0..8).map(|i| i as f32)),
            Array1::<f32>::zeros(8),
        )
    };
    let (got, want) = both(&f, [1, 1, 1], make, |b: &mut (Array1<f32>, Array1<f32>)| {
        let mut args = KernelArgs::new();
        args.ptr("x", &b.0);
        args.ptr("out", &mut b.1);
        args.scalar("s", i32::MAX - 3);
        args
    });
    let expect = Array1::from(vec![0.0, 1.0, 2.0, 3.0, -1.0, -1.0, -1.0, -1.0]);
    assert_eq!(want.1, expect);
    assert_eq!(got.1, expect);
}

#[test]
fn loop_carried_tiles_update_in_place_only_when_safe() {
    // (a, b, c, d, e, t) <- (b, a + b, c + a, d + 1, d + e, t + trans(t)), five times: a
    // swap, updates that read another slot, one that reads its own slot at its own index
    // while another value reads that slot too, and one that reads its own slot elsewhere.
    const NAMES: [&str; 6] = ["oa", "ob", "oc", "od", "oe", "ot"];
    let f = trace("codegen_carried", || {
        let x = ptr_param("x", DType::F32);
        let outs: Vec<Tile> = NAMES.iter().map(|n| ptr_param(n, DType::F32)).collect();
        let xs = load(x + arange(0, 64), NoArg, NoArg);
        let t0 = load(x + offsets2(8, 8, 8), NoArg, NoArg);
        let init = (xs, xs * 2.0f32, xs, xs * 3.0f32, xs, t0);
        let (a, b, c, d, e, t) = for_range(0, 5, 1, init, |_, (a, b, c, d, e, t)| {
            (b, a + b, c + a, d + 1.0f32, d + e, t + trans(t))
        });
        for (k, v) in [a, b, c, d, e].into_iter().enumerate() {
            store(outs[k] + arange(0, 64), v, NoArg);
        }
        store(outs[5] + offsets2(8, 8, 8), t, NoArg);
    });
    let make = || {
        let x: Vec<f32> = values(64, 9).into_iter().map(|v| v as f32).collect();
        (x, vec![vec![0f32; 64]; 6])
    };
    let (got, want) = both(&f, [1, 1, 1], make, |b: &mut (Vec<f32>, Vec<Vec<f32>>)| {
        let mut args = KernelArgs::new();
        args.ptr("x", &b.0[..]);
        for (name, o) in NAMES.iter().zip(b.1.iter_mut()) {
            args.ptr(name, &mut o[..]);
        }
        args
    });
    for (k, name) in NAMES.iter().enumerate() {
        assert_eq!(got.1[k], want.1[k], "{name}");
    }
}

#[test]
fn a_load_used_after_a_store_to_its_buffer_keeps_the_old_values() {
    // x is used by two stores; the first overwrites x's memory, so x cannot be loaded again
    // for the second.
    let f = trace("codegen_load_store", || {
        let p = ptr_param("p", DType::F32);
        let q = ptr_param("q", DType::F32);
        let offs = arange(0, 32);
        let x = load(p + offs, NoArg, NoArg);
        store(p + offs, x + 1.0f32, NoArg);
        store(q + offs, x * 2.0f32, NoArg);
    });
    let make = || {
        (
            ArrayD::from_shape_fn(IxDyn(&[32]), |i| i[0] as f32),
            ArrayD::<f32>::zeros(IxDyn(&[32])),
        )
    };
    let (got, want) = both(&f, [1, 1, 1], make, |b: &mut (ArrayD<f32>, ArrayD<f32>)| {
        let mut args = KernelArgs::new();
        args.ptr("p", &mut b.0);
        args.ptr("q", &mut b.1);
        args
    });
    assert_eq!(got, want);
    assert_eq!(
        got.1,
        ArrayD::from_shape_fn(IxDyn(&[32]), |i| 2.0 * i[0] as f32)
    );
}

#[test]
fn loops_from_constant_tiles_run_zero_one_or_more_times() {
    // acc = full(…, 2) counted up from lo to hi, b = zeros counted down from hi to lo: the
    // first iteration is peeled, and a loop that never runs leaves the constants.
    let f = trace("codegen_peel", || {
        let x = ptr_param("x", DType::F32);
        let out = ptr_param("out", DType::F32);
        let out2 = ptr_param("out2", DType::F32);
        let lo = scalar_param("lo", DType::I32, 3, &Specialization::default());
        let hi = scalar_param("hi", DType::I32, 4, &Specialization::default());
        let offs = arange(0, 64);
        let up = for_range(lo, hi, 1, full([64], 2.0f32, DType::F32), |i, acc| {
            acc * 0.5f32 + load(x + offs + i, NoArg, NoArg)
        });
        let down = for_range(hi, lo, -1, zeros([64], DType::F32), |i, acc| {
            acc + load(x + offs + i, NoArg, NoArg) * 3.0f32
        });
        store(out + offs, up, NoArg);
        store(out2 + offs, down, NoArg);
    });
    for (lo, hi) in [(0, 0), (0, 1), (2, 5), (4, 1)] {
        let make = || {
            let x: Vec<f32> = values(64 + 8, 4).into_iter().map(|v| v as f32).collect();
            (x, vec![0f32; 64], vec![0f32; 64])
        };
        let (got, want) = both(
            &f,
            [1, 1, 1],
            make,
            |b: &mut (Vec<f32>, Vec<f32>, Vec<f32>)| {
                let mut args = KernelArgs::new();
                args.ptr("x", &b.0[..]);
                args.ptr("out", &mut b.1[..]);
                args.ptr("out2", &mut b.2[..]);
                args.scalar("lo", lo);
                args.scalar("hi", hi);
                args
            },
        );
        assert_eq!(got.1, want.1, "up from {lo} to {hi}");
        assert_eq!(got.2, want.2, "down from {hi} to {lo}");
    }
}

#[test]
fn sums_fused_into_a_materialization_match_interpreter() {
    // t is materialized (two consumers, an expensive op); its sum is taken in the same loop.
    let f = trace("codegen_fused_sum", || {
        let x = ptr_param("x", DType::I32);
        let y = ptr_param("y", DType::F16);
        let out = ptr_param("out", DType::I32);
        let outf = ptr_param("outf", DType::F16);
        let sums = ptr_param("sums", DType::I32);
        let sumf = ptr_param("sumf", DType::F16);
        let offs = arange(0, 256);
        let t = load(x + offs, NoArg, NoArg) / 7;
        store(out + offs, t, NoArg);
        store(sums, sum(t, 0, NoArg), NoArg);
        let u = exp(load(y + offs, NoArg, NoArg));
        store(outf + offs, u, NoArg);
        store(sumf, sum(u, 0, NoArg), NoArg);
    });
    type Bufs = (Vec<i32>, Vec<f16>, Vec<i32>, Vec<f16>, Vec<i32>, Vec<f16>);
    let make = || -> Bufs {
        let v = values(256, 5);
        (
            v.iter().map(|x| (x * 2e9) as i32).collect(),
            v.iter().map(|x| f16::from_f64(x * 2.0)).collect(),
            vec![0; 256],
            vec![f16::ZERO; 256],
            vec![0],
            vec![f16::ZERO],
        )
    };
    let (got, want) = both(&f, [1, 1, 1], make, |b: &mut Bufs| {
        let mut args = KernelArgs::new();
        args.ptr("x", &b.0[..]);
        args.ptr("y", &b.1[..]);
        args.ptr("out", &mut b.2[..]);
        args.ptr("outf", &mut b.3[..]);
        args.ptr("sums", &mut b.4[..]);
        args.ptr("sumf", &mut b.5[..]);
        args
    });
    assert_eq!(got.2, want.2);
    assert_eq!(got.4, want.4, "wrapping i32 sum");
    let f64s = |v: &[f16]| v.iter().map(|x| x.to_f64()).collect::<Vec<_>>();
    assert_close(&f64s(&got.3), &f64s(&want.3), 1e-3, "exp in f16");
    assert_close(&f64s(&got.5), &f64s(&want.5), 1e-3, "f16 sum");
}

/// One row per program, `n` valid lanes of `block`, rows `stride` apart: softmax with a
/// fused sum of exps (the loop that computes the exps carries the next row's prefetches
/// and keeps the sum in partial accumulators).
fn spread_softmax_kernel(block: usize) -> Function {
    trace("codegen_spread_softmax", || {
        let x = ptr_param("x", DType::F32);
        let out = ptr_param("out", DType::F32);
        let n = scalar_param("n", DType::I32, 2, &Specialization::default());
        let stride = scalar_param("stride", DType::I32, 3, &Specialization::default());
        let cols = arange(0, block);
        let m = compare(cols, CmpPred::Lt, n);
        let base = program_id(0) * stride;
        let t = load(x + base + cols, m, f64::NEG_INFINITY);
        let e = (t - t.max(0)).exp();
        let s = e.sum(0);
        store(out + base + cols, e * (1.0 / s), m);
    })
}

#[test]
fn spread_prefetch_softmax_matches_interpreter() {
    let block = 256;
    let rows = 5;
    for n in [256, 200, 33, 1, 0] {
        for stride in [block, block + 64] {
            let f = spread_softmax_kernel(block);
            let len = rows * stride;
            let make = || -> (Vec<f32>, Vec<f32>) {
                let mut x: Vec<f32> = values(len, 11).iter().map(|v| (v * 30.0) as f32).collect();
                // Row 1 holds -inf lanes, row 2 a NaN, row 3 a single huge value.
                x[stride] = f32::NEG_INFINITY;
                x[stride + 7] = f32::NEG_INFINITY;
                x[2 * stride + 5] = f32::NAN;
                x[3 * stride] = 1e30;
                (x, vec![0.5; len])
            };
            let (got, want) = both(&f, [rows as u64, 1, 1], make, |b| {
                x_out(b, &[("n", n), ("stride", stride as i32)])
            });
            let f64s = |v: &[f32]| v.iter().map(|x| *x as f64).collect::<Vec<_>>();
            let what = format!("softmax rows of {n} lanes, stride {stride}");
            assert_close(&f64s(&got.1), &f64s(&want.1), 1e-5, &what);
        }
    }
    // The chunks' loops stay one vector per iteration (no copies of the exp to compile).
    let ll = unoptimized_ll(spread_softmax_kernel(block), "codegen-spread-dump");
    assert!(ll.contains(r#"!{!"llvm.loop.interleave.count", i32 1}"#));
    // So does the loop over the lanes past the mask's true prefix (the head's is free).
    let hinted_lane_loops = ll
        .lines()
        .filter(|l| l.contains("label %prefix.loop") && l.contains("!llvm.loop"))
        .count();
    assert!(hinted_lane_loops >= 1, "no hint on a loop past the prefix");
    // The partial sums' vectors never straddle two cache lines.
    assert!(
        ll.contains("alloca [32 x float], align 64"),
        "partials not aligned"
    );
}

#[test]
fn spread_prefetch_partial_sums_are_exact_for_integers() {
    // `q` is materialized (two consumers, a division); its loop carries the prefetches of
    // the next row's output and its sum, in partial accumulators: wrapping i32 sums are
    // exact in any order, so they must equal the interpreter's.
    let block = 128;
    let rows = 4;
    let f = trace("codegen_spread_isum", || {
        let x = ptr_param("x", DType::I32);
        let out = ptr_param("out", DType::I32);
        let sums = ptr_param("sums", DType::I32);
        let n = scalar_param("n", DType::I32, 3, &Specialization::default());
        let cols = arange(0, block);
        let m = compare(cols, CmpPred::Lt, n);
        let row = program_id(0);
        let base = row * block as i32;
        let q = load(x + base + cols, m, 0) / 7;
        store(out + base + cols, q, m);
        store(sums + row, q.sum(0), NoArg);
    });
    for n in [128, 100, 1, 0] {
        let make = || -> (Vec<i32>, Vec<i32>, Vec<i32>) {
            let x = values(rows * block, 3)
                .iter()
                .map(|v| (v * 2e9) as i32)
                .collect();
            (x, vec![-1; rows * block], vec![-1; rows])
        };
        let (got, want) = both(&f, [rows as u64, 1, 1], make, |b| {
            let mut args = KernelArgs::new();
            args.ptr("x", &b.0[..]);
            args.ptr("out", &mut b.1[..]);
            args.ptr("sums", &mut b.2[..]);
            args.scalar("n", n);
            args
        });
        assert_eq!(got.1, want.1, "quotients, {n} lanes");
        assert_eq!(got.2, want.2, "row sums, {n} lanes");
    }
}

/// One of the CPU's f32 functions written in vectorizable arithmetic instead of libm.
struct VectorMath {
    name: &'static str,
    op: fn(Tile) -> Tile,
    reference: fn(f64) -> f64,
    /// The dense inputs span `[lo, hi)`, past both ends of the finite, nonzero results.
    lo: f64,
    hi: f64,
    /// Inputs near the ends of the range: overflow, subnormal results, zero.
    edges: &'static [f32],
    /// The largest error measured when the function was written, in ulps: a change to the
    /// polynomial or the reduction shows here.
    worst: f64,
}

const VECTOR_MATH: [VectorMath; 2] = [
    VectorMath {
        name: "exp",
        op: exp,
        reference: f64::exp,
        lo: -105.0,
        hi: 90.0,
        edges: &[
            88.3, 88.39, 88.5, 88.7, 88.722_83, 88.73, 89.0, 100.0, -87.336_55, -87.5, -87.67,
            -87.69, -88.0, -95.0, -103.0, -103.97, -104.0, -110.0,
        ],
        // Unchanged from the first vectorized exp: 0.924.
        worst: 0.93,
    },
    VectorMath {
        name: "exp2",
        op: exp2,
        reference: f64::exp2,
        lo: -152.0,
        hi: 130.0,
        edges: &[
            127.0, 127.999_99, 128.0, 129.0, 200.0, -125.0, -126.0, -126.5, -127.0, -140.3, -149.0,
            -149.5, -150.0, -150.01, -151.0, -160.0, 0.5, -0.5, 1e-8, -1e-8,
        ],
        worst: 0.58,
    },
];

#[rstest::rstest]
fn vectorized_math_is_within_one_ulp_over_the_whole_range(#[values("exp", "exp2")] name: &str) {
    let case = VECTOR_MATH.iter().find(|c| c.name == name).unwrap();
    let block = 1024;
    let f = trace(&format!("codegen_{name}"), || {
        let x = ptr_param("x", DType::F32);
        let out = ptr_param("out", DType::F32);
        let offs = program_id(0) * block as i32 + arange(0, block);
        store(out + offs, (case.op)(load(x + offs, NoArg, NoArg)), NoArg);
    });
    let specials = [
        f32::NAN,
        f32::INFINITY,
        f32::NEG_INFINITY,
        0.0,
        -0.0,
        1e-30,
        -1e-30,
        1e30,
        -1e30,
    ];
    let dense = 255 * block;
    let mut x: Vec<f32> = (0..dense)
        .map(|i| case.lo + (case.hi - case.lo) * i as f64 / dense as f64)
        .map(|v| v as f32)
        .collect();
    x.extend(specials);
    x.extend(case.edges);
    x.resize(x.len().next_multiple_of(block), 0.5);
    let cache = TempDir::new("codegen");
    let compiled = compile(&f, &cache);
    let mut out = vec![0f32; x.len()];
    {
        let mut args = KernelArgs::new();
        args.ptr("x", &x[..]);
        args.ptr("out", &mut out[..]);
        check_args(&f, &args).unwrap();
        let grid = Grid([(x.len() / block) as u64, 1, 1]);
        compiled.run(grid, &args.args, false).unwrap();
    }
    let mut worst = 0f64;
    for (&xi, &got) in x.iter().zip(&out) {
        let exact = (case.reference)(xi as f64);
        if xi.is_nan() {
            assert!(got.is_nan(), "{name}(NaN) = {got}");
        } else if exact >= f32::MAX as f64 * (1.0 + f32::EPSILON as f64 / 2.0) {
            // Rounds to +inf.
            assert_eq!(got, f32::INFINITY, "{name}({xi})");
        } else if exact < f32::MIN_POSITIVE as f64 {
            // Subnormal results (and 0 below half the smallest): within one step.
            let step = f32::from_bits(1) as f64;
            let near = (got as f64 - exact).abs() <= step;
            assert!(near, "{name}({xi}) = {got}, not {exact}");
        } else {
            let e = exact as f32;
            let ulp = (f32::from_bits(e.to_bits() + 1) - e) as f64;
            let err = (got as f64 - exact).abs() / ulp;
            worst = worst.max(err);
            assert!(err <= 1.0, "{name}({xi}) = {got}, not {exact}: {err} ulp");
        }
    }
    eprintln!("{name}: worst error {worst} ulp");
    assert!(worst < case.worst, "{name}: worst error {worst} ulp");
}

/// Counts the iterations of `for i in range(lo, hi, step)` and keeps the last `i`, for
/// bounds of dtype `T`, compiled and interpreted; both must match `want` (count, last).
fn check_loop_counter<T>(dtype: DType, cases: &[(T, T, T, i32, T)])
where
    T: Element + Copy + Default + PartialEq + std::fmt::Debug,
{
    let f = trace(&format!("codegen_counter_{dtype}"), || {
        let count = ptr_param("count", DType::I32);
        let last = ptr_param("last", dtype);
        let spec = Specialization::default();
        let lo = scalar_param("lo", dtype, 2, &spec);
        let hi = scalar_param("hi", dtype, 3, &spec);
        let step = scalar_param("step", dtype, 4, &spec);
        let init = (zeros([1], DType::I32), zeros([1], dtype));
        let (n, l) = for_range(lo, hi, step, init, |i, (n, _)| {
            (n + 1, zeros([1], dtype) + i)
        });
        store(count + arange(0, 1), n, NoArg);
        store(last + arange(0, 1), l, NoArg);
    });
    for &(lo, hi, step, want_count, want_last) in cases {
        let (got, want) = both(
            &f,
            [1, 1, 1],
            || (vec![-1i32], vec![T::default()]),
            |b: &mut (Vec<i32>, Vec<T>)| {
                let mut args = KernelArgs::new();
                args.ptr("count", &mut b.0[..]);
                args.ptr("last", &mut b.1[..]);
                args.scalar("lo", lo);
                args.scalar("hi", hi);
                args.scalar("step", step);
                args
            },
        );
        let case = format!("{dtype} range({lo:?}, {hi:?}, {step:?})");
        assert_eq!(
            want,
            (vec![want_count], vec![want_last]),
            "interpreter: {case}"
        );
        assert_eq!(got, want, "compiled: {case}");
        // The CUDA lowering counts the same way (run on the emulator).
        let mut emulated = (vec![-1i32], vec![T::default()]);
        {
            let mut args = KernelArgs::new();
            args.ptr("count", &mut emulated.0[..]);
            args.ptr("last", &mut emulated.1[..]);
            args.scalar("lo", lo);
            args.scalar("hi", hi);
            args.scalar("step", step);
            tritium_backend::cuda::run_emulated(&f, Grid([1, 1, 1]), &args, 1).unwrap();
        }
        assert_eq!(emulated, want, "CUDA emulator: {case}");
    }
}

#[test]
fn loop_counters_never_wrap_near_the_dtype_limits() {
    check_loop_counter::<i32>(
        DType::I32,
        &[
            (i32::MAX - 5, i32::MAX, 2, 3, i32::MAX - 1),
            (i32::MIN + 5, i32::MIN, -2, 3, i32::MIN + 1),
            (i32::MAX - 1, i32::MAX, i32::MAX, 1, i32::MAX - 1),
            (0, i32::MAX, 1 << 30, 2, 1 << 30),
            (3, 3, 1, 0, 0),
        ],
    );
    check_loop_counter::<u32>(
        DType::U32,
        &[
            (0, 3_000_000_000, 1_000_000_000, 3, 2_000_000_000),
            (u32::MAX - 3, u32::MAX, 2, 2, u32::MAX - 1),
        ],
    );
    check_loop_counter::<i64>(
        DType::I64,
        &[
            (i64::MAX - 5, i64::MAX, 2, 3, i64::MAX - 1),
            (i64::MIN + 5, i64::MIN, -2, 3, i64::MIN + 1),
        ],
    );
    check_loop_counter::<u64>(
        DType::U64,
        &[
            (u64::MAX - 5, u64::MAX, 2, 3, u64::MAX - 1),
            (0, u64::MAX, 1 << 63, 2, 1 << 63),
        ],
    );
}

/// The lanes of the all-NaN test: lane `r` of a reduction holds pattern `r % 8` at its
/// `k` elements (see `nan_pattern`).
const NAN_PATTERNS: usize = 8;

/// Element `i` of `k` of the lane with pattern `r`: all NaN; NaN and -inf; all -inf; NaN
/// and +inf; all +inf; numbers with one NaN; numbers; NaN with one number last.
fn nan_pattern(r: usize, i: usize, k: usize) -> f64 {
    let v = (i as f64 * 0.37).sin() * 10.0 + r as f64;
    match r % NAN_PATTERNS {
        0 => f64::NAN,
        1 if i.is_multiple_of(2) => f64::NAN,
        1 | 2 => f64::NEG_INFINITY,
        3 if i % 3 == 1 => f64::INFINITY,
        3 => f64::NAN,
        4 => f64::INFINITY,
        5 if i == k / 2 => f64::NAN,
        5 | 6 => v,
        _ if i + 1 == k => v,
        _ => f64::NAN,
    }
}

/// How the all-NaN test lays out its lanes.
#[derive(Clone, Copy, Debug)]
enum NanLayout {
    /// One lane per program: `max(x[pid*k .. pid*k + k], 0)`, a scalar result.
    Rank1,
    /// `[lanes, k]` along axis 1 (the last).
    Rows,
    /// `[k, lanes]` along axis 0 (not the last).
    Cols,
}

fn nan_reduce_kernel(d: DType, layout: NanLayout, k: usize, is_max: bool) -> Function {
    trace("codegen_nan_reduce", || {
        let x = ptr_param("x", d);
        let out = ptr_param("out", d);
        let red = |t: Tile, axis: usize| {
            if is_max {
                max(t, axis, NoArg)
            } else {
                min(t, axis, NoArg)
            }
        };
        let lanes = arange(0, NAN_PATTERNS);
        match layout {
            NanLayout::Rank1 => {
                let pid = program_id(0);
                let t = load(x + pid * k as i32 + arange(0, k), NoArg, NoArg);
                store(out + pid, red(t, 0), NoArg);
            }
            NanLayout::Rows => {
                let t = load(x + offsets2(NAN_PATTERNS, k, k), NoArg, NoArg);
                store(out + lanes, red(t, 1), NoArg);
            }
            NanLayout::Cols => {
                let t = load(x + offsets2(k, NAN_PATTERNS, NAN_PATTERNS), NoArg, NoArg);
                store(out + lanes, red(t, 0), NoArg);
            }
        }
    })
}

fn check_nan_reduce<T: Element + Copy + Default>(to: impl Fn(f64) -> T, back: impl Fn(T) -> f64) {
    // 64 elements take the vector-partials path along the last axis; 40 and 8 do not.
    for k in [64, 40, 8] {
        for layout in [NanLayout::Rank1, NanLayout::Rows, NanLayout::Cols] {
            let data: Vec<T> = (0..NAN_PATTERNS * k)
                .map(|j| {
                    let (r, i) = match layout {
                        NanLayout::Cols => (j % NAN_PATTERNS, j / NAN_PATTERNS),
                        _ => (j / k, j % k),
                    };
                    to(nan_pattern(r, i, k))
                })
                .collect();
            let grid = match layout {
                NanLayout::Rank1 => NAN_PATTERNS as u64,
                _ => 1,
            };
            for is_max in [true, false] {
                let f = nan_reduce_kernel(T::DTYPE, layout, k, is_max);
                let make = || (data.clone(), vec![T::default(); NAN_PATTERNS]);
                let (got, want) = both(&f, [grid, 1, 1], make, |b: &mut (Vec<T>, Vec<T>)| {
                    x_out(b, &[])
                });
                let what = format!(
                    "{} {} of {k} elements, {layout:?}",
                    T::DTYPE,
                    if is_max { "max" } else { "min" }
                );
                let f64s = |v: &[T]| v.iter().map(|x| back(*x)).collect::<Vec<_>>();
                let (got, want) = (f64s(&got.1), f64s(&want.1));
                assert!(
                    want[0].is_nan(),
                    "{what}: the interpreter gives NaN for all NaN"
                );
                assert_eq!(want[2], f64::NEG_INFINITY, "{what}");
                assert_eq!(want[4], f64::INFINITY, "{what}");
                assert_close(&got, &want, 0.0, &what);
            }
        }
    }
}

#[test]
fn all_nan_max_min_lanes_give_nan_as_in_the_interpreter() {
    check_nan_reduce(|x| x as f32, |x: f32| x as f64);
    check_nan_reduce(f16::from_f64, |x: f16| x.to_f64());
    // The rarely run second look is a scalar loop (no vector copies to compile).
    let f = nan_reduce_kernel(DType::F32, NanLayout::Rows, 64, true);
    let ll = unoptimized_ll(f, "codegen-nan-rescan-dump");
    assert!(ll.contains("red.allnan"));
    assert!(ll.contains(r#"!{!"llvm.loop.vectorize.width", i32 1}"#));
}

/// `acc` carried over `hi` column blocks of 64 (from zeros, so the first iteration is
/// peeled, or from a loaded tile), its sum taken after the loop; with `keep`, `acc` itself
/// is stored too (its last write is not dead).
fn carried_sum_kernel(d: DType, from_zeros: bool, keep: bool) -> Function {
    trace("codegen_carried_sum", || {
        let x = ptr_param("x", d);
        let out = ptr_param("out", d);
        let s = ptr_param("s", d);
        let n = scalar_param("n", DType::I32, 3, &Specialization::default());
        let hi = scalar_param("hi", DType::I32, 4, &Specialization::default());
        let cols = arange(0, 64);
        let init = if from_zeros {
            zeros([64], d)
        } else {
            load(x + cols, NoArg, NoArg) * 2
        };
        let acc = for_range(0, hi, 64, init, |off, acc| {
            let c = cols + off;
            let v = load(x + c, compare(c, CmpPred::Lt, n), 0);
            acc + v * v
        });
        if keep {
            store(out + cols, acc, NoArg);
        }
        store(s, sum(acc, 0, NoArg), NoArg);
    })
}

fn check_carried_sum<T: Element + Copy + Default>(to: impl Fn(f64) -> T, back: impl Fn(T) -> f64) {
    for from_zeros in [true, false] {
        for keep in [true, false] {
            let f = carried_sum_kernel(T::DTYPE, from_zeros, keep);
            // Zero, one (full or partial) and several iterations.
            for (n, hi) in [(0, 0), (64, 64), (50, 64), (256, 256), (200, 256)] {
                let make = || {
                    let x: Vec<T> = values(256, 3).into_iter().map(&to).collect();
                    (x, vec![T::default(); 64], vec![T::default()])
                };
                let (got, want) = both(&f, [1, 1, 1], make, |b: &mut (Vec<T>, Vec<T>, Vec<T>)| {
                    let mut args = KernelArgs::new();
                    args.ptr("x", &b.0[..]);
                    args.ptr("out", &mut b.1[..]);
                    args.ptr("s", &mut b.2[..]);
                    args.scalar("n", n);
                    args.scalar("hi", hi);
                    args
                });
                let what = format!(
                    "{}: {n} of {hi}, from zeros {from_zeros}, stored {keep}",
                    T::DTYPE
                );
                let f64s = |v: &[T]| v.iter().map(|x| back(*x)).collect::<Vec<_>>();
                assert_eq!(f64s(&got.1), f64s(&want.1), "{what}: acc");
                assert_close(&f64s(&got.2), &f64s(&want.2), 1e-3, &what);
            }
        }
    }
}

#[test]
fn sums_of_loop_carried_tiles_taken_in_the_last_write_match_interpreter() {
    check_carried_sum(|x| x as f32, |x: f32| x as f64);
    check_carried_sum(f16::from_f64, |x: f16| x.to_f64());
    check_carried_sum(|x| (x * 1000.0) as i32, |x: i32| x as f64);
}

/// Selects on `likely` hints (`x < 0` usually false, `1 ≤ x ≤ 40` usually true), one
/// stored, one reduced (`max`): the CPU versions both loops on the hints (a copy where
/// they hold at every lane, their rare cases folded away; the store's per chunk of its
/// lane loop, the reduction's per tile), and every tile, whichever copies it takes,
/// matches the interpreter bit for bit: all lanes usual, one lane negative, one below 1,
/// one past 40, all rare.
#[test]
fn likely_hints_version_loops_and_match_interpreter() {
    let n = 256;
    let f = trace("codegen_likely", || {
        let x = ptr_param("x", DType::F32);
        let out = ptr_param("out", DType::F32);
        let offs = arange(0, n);
        let v = load(x + offs, NoArg, NoArg);
        let neg = likely(compare(v, CmpPred::Lt, 0.0f32), false);
        // Known true, it makes `past` known false (the operand of a `not` in an `and`).
        let past = compare(v, CmpPred::Gt, 40.0f32);
        let big = likely(compare(v, CmpPred::Ge, 1.0f32) & !past, true);
        let usual = v * 2.0f32 + 1.0f32 + where_(past, 100.0f32, 0.0f32);
        let r = where_(neg, sqrt(-v) * 3.0f32, where_(big, usual, v - 5.0f32));
        store(out + offs, r, NoArg);
        store(out + n, where_(neg, -v, v * 3.0f32).max(0), NoArg);
    });
    type Row = (&'static str, fn(usize) -> f32);
    fn usual(i: usize) -> f32 {
        1.0 + i as f32 / 7.0
    }
    let rows: [Row; 5] = [
        ("usual", usual),
        ("one negative", |i| if i == 77 { -2.5 } else { usual(i) }),
        ("one below 1", |i| if i == 200 { 0.25 } else { usual(i) }),
        ("one past 40", |i| if i == 3 { 45.0 } else { usual(i) }),
        ("rare", |i| i as f32 / 100.0 - 1.3),
    ];
    for (name, x) in rows {
        let make = || {
            (
                (0..n as usize).map(x).collect::<Vec<f32>>(),
                vec![0f32; n as usize + 1],
            )
        };
        let (got, want) = both(&f, [1, 1, 1], make, |bufs| x_out(bufs, &[]));
        assert_eq!(bits(&got.1), bits(&want.1), "{name}");
    }
    let ll = unoptimized_ll(f, "codegen-likely-dump");
    let count = |label: &str| ll.lines().filter(|l| l.starts_with(label)).count();
    assert_eq!(count("likely.hold"), 2, "a likely copy per loop");
    assert_eq!(
        count("likely.chunk"),
        1,
        "the store's chunks test the hints"
    );
}

/// A store whose lanes read a `likely` hint at other lanes (through a flip, through a
/// reshape of a `[2, 128]` hint), or what follows from one (the operand of a true `and`):
/// its chunks may test only the hints each lane reads, with their consequences, at its own
/// index (the others are tested per tile), so a rare lane mirrored into a chunk whose own
/// lanes all hold still takes the rare case. Bits equal the interpreter's.
#[test]
fn likely_hints_read_at_other_lanes_are_tested_per_tile() {
    let n = 256;
    let flipped = trace("codegen_likely_flip", || {
        let x = ptr_param("x", DType::F32);
        let out = ptr_param("out", DType::F32);
        let offs = arange(0, n);
        let v = load(x + offs, NoArg, NoArg);
        let positive = likely(compare(v, CmpPred::Gt, 0.0f32), true);
        let own = likely(compare(v, CmpPred::Lt, 100.0f32), true);
        let r = where_(flip(positive, NoArg), v * 2.0f32, -v);
        store(out + offs, where_(own, r, v - 1000.0f32), NoArg);
    });
    let reshaped = trace("codegen_likely_reshape", || {
        let x = ptr_param("x", DType::F32);
        let out = ptr_param("out", DType::F32);
        let rows = expand_dims(arange(0, 2), 1) * (n / 2);
        let v2 = load(x + rows + expand_dims(arange(0, n / 2), 0), NoArg, NoArg);
        let positive = reshape(likely(compare(v2, CmpPred::Gt, 0.0f32), true), [n as usize]);
        let v = load(x + arange(0, n), NoArg, NoArg);
        store(out + arange(0, n), where_(positive, v * 2.0f32, -v), NoArg);
    });
    // The hint read at its own lanes, but what follows from it (`v > 0` true) at others.
    let consequence = trace("codegen_likely_consequence", || {
        let x = ptr_param("x", DType::F32);
        let out = ptr_param("out", DType::F32);
        let offs = arange(0, n);
        let v = load(x + offs, NoArg, NoArg);
        let positive = compare(v, CmpPred::Gt, 0.0f32);
        let usual = likely(positive & compare(v, CmpPred::Lt, 100.0f32), true);
        let r = where_(usual, v * 2.0f32, -v) + where_(flip(positive, NoArg), 1.0f32, 0.0f32);
        store(out + offs, r, NoArg);
    });
    // A gather whose source reads the hint, used by two stores (so materialized in a loop
    // of its own: the gather reads its source at other lanes).
    let gathered = trace("codegen_likely_gather", || {
        let x = ptr_param("x", DType::F32);
        let out = ptr_param("out", DType::F32);
        let offs = arange(0, n);
        let v = load(x + offs, NoArg, NoArg);
        let positive = likely(compare(v, CmpPred::Gt, 0.0f32), true);
        let src = where_(positive, sqrt(v), -v);
        let g = gather(src, (n - 1) - offs, 0);
        store(out + offs, g, NoArg);
        store(out + offs, g * 3.0f32, compare(offs, CmpPred::Lt, 0));
    });
    for f in [flipped, reshaped, consequence, gathered] {
        for rare in [None, Some(5), Some(250), Some(128)] {
            let make = || {
                let mut x: Vec<f32> = (0..n as usize).map(|i| 1.0 + i as f32 / 8.0).collect();
                if let Some(i) = rare {
                    x[i] = -3.0;
                }
                (x, vec![0f32; n as usize])
            };
            let (got, want) = both(&f, [1, 1, 1], make, |bufs| x_out(bufs, &[]));
            assert_eq!(
                bits(&got.1),
                bits(&want.1),
                "{}, rare lane {rare:?}",
                f.name
            );
        }
    }
}

/// A 2-D block copy masked by bounds on both axes (`rows < m & cols < n`, the edges of a
/// matrix): the masked copy, which only edge blocks run, keeps its loops one vector per
/// iteration; full, edge and empty blocks match the interpreter.
#[test]
fn edge_blocks_of_a_2d_bounds_mask_match_interpreter() {
    let (bm, bn) = (16, 32);
    let f = trace("codegen_edge_copy", || {
        let x = ptr_param("x", DType::F32);
        let out = ptr_param("out", DType::F32);
        let m = scalar_param("m", DType::I32, 2, &Specialization::default());
        let n = scalar_param("n", DType::I32, 3, &Specialization::default());
        let rows = expand_dims(program_id(0) * bm + arange(0, bm), 1);
        let cols = expand_dims(program_id(1) * bn + arange(0, bn), 0);
        let mask = compare(rows, CmpPred::Lt, m) & compare(cols, CmpPred::Lt, n);
        let offs = rows * n + cols;
        let v = load(x + offs, mask, -1.0f32);
        store(out + offs, v * 2.0f32 + 1.0f32, mask);
    });
    // (m, n): whole blocks, edges on both axes, an edge row of one element.
    for (m, n) in [(32, 64), (21, 45), (17, 1)] {
        let len = (m * n) as usize;
        let grid = [
            (m as u64).div_ceil(bm as u64),
            (n as u64).div_ceil(bn as u64),
            1,
        ];
        let make = || {
            let x: Vec<f32> = (0..len).map(|i| i as f32 - 7.0).collect();
            (x, vec![0.5f32; len])
        };
        let (got, want) = both(&f, grid, make, |bufs| x_out(bufs, &[("m", m), ("n", n)]));
        assert_eq!(got.1, want.1, "m {m}, n {n}");
        assert!(got
            .1
            .iter()
            .enumerate()
            .all(|(i, v)| *v == 2.0 * (i as f32 - 7.0) + 1.0));
    }
    let ll = unoptimized_ll(f, "codegen-edge-copy-dump");
    assert!(ll.contains("mask.full"), "no all-true copy");
    assert!(ll.contains(r#"!{!"llvm.loop.interleave.count", i32 1}"#));
}

/// A masked load and store of `x + 128 + i8(off + j)`: in the copy where the mask is all
/// true, the lanes are computed as one run from the first (plain vector accesses) when
/// the run-time check proves the narrow offset does not wrap, and lane by lane (reading
/// what they address) when it wraps inside the tile; a partial mask takes that copy too.
#[test]
fn masked_runs_match_interpreter_and_fall_back_when_offsets_wrap() {
    let f = trace("codegen_masked_run", || {
        let x = ptr_param("x", DType::F32);
        let out = ptr_param("out", DType::F32);
        let off = scalar_param("off", DType::I32, 2, &Specialization::default());
        let n = scalar_param("n", DType::I32, 3, &Specialization::default());
        let j = arange(0, 32);
        let mask = compare(j, CmpPred::Lt, n);
        let cols = cast(off + j, DType::I8);
        let v = load(x + 128 + cols, mask, 0);
        store(out + j, v, mask);
    });
    // (off, n): no wrap, all lanes in; the i8 offsets wrap at lane 8; a partial mask.
    for (off, n) in [(0, 32), (120, 32), (0, 20)] {
        let make = || {
            let x: Vec<f32> = (0..512).map(|i| i as f32).collect();
            (x, vec![-1.0f32; 32])
        };
        let (got, want) = both(&f, [1, 1, 1], make, |bufs| {
            x_out(bufs, &[("off", off), ("n", n)])
        });
        assert_eq!(got.1, want.1, "off {off}, n {n}");
    }
    let ll = unoptimized_ll(f, "codegen-run-dump");
    assert!(
        ll.contains("%lane.run"),
        "the all-true copy computes no lane as a run"
    );
}

/// An unmasked load and store of `x + 128 + r·ld + i8(off + j)` with a run-time row
/// stride `ld`: each row is a run of the first lane when the narrow offset does not wrap,
/// which the run-time check proves (the rows' `r·ld` is equal along the row and needs no
/// check); when it wraps inside a row, the lane-by-lane copy runs. Without the runs, an
/// unmasked row of `i32` offsets was read with gathers.
#[test]
fn unmasked_runs_with_a_run_time_row_stride_match_interpreter() {
    let (rows, cols) = (4, 32);
    let f = trace("codegen_unmasked_run", || {
        let x = ptr_param("x", DType::F32);
        let out = ptr_param("out", DType::F32);
        let off = scalar_param("off", DType::I32, 2, &Specialization::default());
        let ld = scalar_param("ld", DType::I32, 3, &Specialization::default());
        let r = expand_dims(arange(0, rows), 1);
        let j = expand_dims(cast(off + arange(0, cols), DType::I8), 0);
        let v = load(x + 128 + r * ld + j, NoArg, NoArg);
        store(out + offsets2(rows, cols, cols), v, NoArg);
    });
    // (off, ld): no wrap; the i8 offsets wrap at lane 8; rows that overlap.
    for (off, ld) in [(0, 40), (120, 100), (-16, 7)] {
        let make = || {
            let x: Vec<f32> = (0..1024).map(|i| i as f32).collect();
            (x, vec![-1.0f32; rows * cols])
        };
        let (got, want) = both(&f, [1, 1, 1], make, |bufs| {
            x_out(bufs, &[("off", off), ("ld", ld)])
        });
        assert_eq!(got.1, want.1, "off {off}, ld {ld}");
    }
    let ll = unoptimized_ll(f.clone(), "codegen-unmasked-run-dump");
    assert!(ll.contains("%lane.run"), "no lane computed as a run");
    assert!(ll.contains("runs.wrap"), "no copy for offsets that wrap");
    let ll = optimized_ll(f, "codegen-unmasked-run-opt-dump");
    assert!(!ll.contains("llvm.masked.gather"), "a gather is left");
}

/// An offset widened as a column (`[32, 1]`, equal along its own last axis) and then
/// transposed into a row varies along the pointer tile's last axis: where its `i8` lanes
/// wrap inside the row, the row is not a run, and the lane-by-lane copy must run.
#[test]
fn a_widened_column_transposed_into_a_row_is_checked() {
    let f = trace("codegen_transposed_widening", || {
        let x = ptr_param("x", DType::F32);
        let out = ptr_param("out", DType::F32);
        let off = scalar_param("off", DType::I32, 2, &Specialization::default());
        let column = expand_dims(cast(off + arange(0, 32), DType::I8), 1);
        let row = trans(cast(column, DType::I64));
        let v = load(x + 128 + row, NoArg, NoArg);
        store(out + expand_dims(arange(0, 32), 0), v, NoArg);
    });
    // No wrap; the i8 lanes wrap at lane 8.
    for off in [0, 120] {
        let make = || {
            let x: Vec<f32> = (0..512).map(|i| i as f32).collect();
            (x, vec![-1.0f32; 32])
        };
        let (got, want) = both(&f, [1, 1, 1], make, |bufs| x_out(bufs, &[("off", off)]));
        assert_eq!(got.1, want.1, "off {off}");
    }
}

/// Under the mask `j + c < n` with a constant `c`: a masked load (`other` 2) and store, an
/// unmasked store of `where(mask, v, -1)` and the sum of the loaded lanes. Past the mask's
/// true prefix its lanes are known false when no `j + c` wraps; they must still give
/// `other` to the sum and `-1` to the `where`. Near `i32::MAX` the lanes wrap, are true
/// again and must be read.
fn past_prefix_kernel(c: i32, masked_store_only: bool) -> Function {
    trace("codegen_past_prefix", || {
        let x = ptr_param("x", DType::F32);
        let out = ptr_param("out", DType::F32);
        let n = scalar_param("n", DType::I32, 2, &Specialization::default());
        let j = arange(0, 64);
        let mask = compare(j + c, CmpPred::Lt, n);
        let v = load(x + j, mask, 2.0f32);
        store(out + j, v * 3.0f32, mask);
        if !masked_store_only {
            store(out + 64 + j, where_(mask, v, -1.0f32), NoArg);
            store(out + 128, v.sum(0), NoArg);
        }
    })
}

#[test]
fn lanes_past_a_constant_index_prefix_are_false_unless_they_wrap() {
    let cases = [
        (0, [64, 40, 1, 0, -5, 100]),
        (7, [71, 40, 7, 0, 8, 1000]),
        (
            i32::MAX - 63,
            [i32::MAX, i32::MAX - 1, i32::MAX - 40, 0, i32::MIN, 5],
        ),
        // Lanes 11.. wrap to i32::MIN.. and compare true again below `n`.
        (
            i32::MAX - 10,
            [i32::MAX, i32::MAX - 5, 0, i32::MIN + 3, i32::MIN, -7],
        ),
        (
            i32::MIN,
            [i32::MIN + 64, i32::MIN + 3, i32::MIN, 0, i32::MAX, -100],
        ),
    ];
    for (c, ns) in cases {
        for masked_store_only in [false, true] {
            let f = past_prefix_kernel(c, masked_store_only);
            for n in ns {
                let make = || {
                    let x: Vec<f32> = (0..64).map(|i| i as f32 + 0.5).collect();
                    (x, vec![-9.0f32; 129])
                };
                let (got, want) = both(&f, [1, 1, 1], make, |bufs| x_out(bufs, &[("n", n)]));
                assert_eq!(
                    got.1, want.1,
                    "c {c}, n {n}, masked store only {masked_store_only}"
                );
            }
        }
    }
    // Where no lane wraps, nothing is stored past the prefix: no masked store is left.
    let ll = optimized_ll(past_prefix_kernel(0, true), "codegen-past-prefix-dump");
    assert!(
        !ll.contains("llvm.masked.store"),
        "a masked store past the prefix"
    );
    let ll = optimized_ll(past_prefix_kernel(i32::MAX - 10, true), "codegen-wrap-dump");
    assert!(
        ll.contains("llvm.masked.store") || ll.contains("mem.do"),
        "no store for the lanes that wrap"
    );
}

/// A masked load and store at `x - c + (c + j)` under the mask `c + j < n`, `c + j` in i32:
/// the lanes below `n - c` are exact, so the kernel has one copy of the region, whose loop
/// over them computes the pointers as a run without a run-time check, up to the i32 limits.
#[test]
fn prefix_lanes_are_runs_up_to_the_i32_limits() {
    let f = trace("codegen_prefix_run", || {
        let x = ptr_param("x", DType::F32);
        let out = ptr_param("out", DType::F32);
        let c = scalar_param("c", DType::I32, 2, &Specialization::default());
        let neg_c = scalar_param("neg_c", DType::I64, 3, &Specialization::default());
        let n = scalar_param("n", DType::I32, 4, &Specialization::default());
        let offs = c + arange(0, 64);
        let mask = compare(offs, CmpPred::Lt, n);
        let v = load(x + neg_c + offs, mask, -2.0f32);
        store(out + neg_c + offs, v + 1.0f32, mask);
    });
    // (c, n): all lanes in, a partial block, none, the top and the bottom of i32.
    let cases = [
        (0, 64),
        (0, 40),
        (5, 5),
        (i32::MAX - 63, i32::MAX),
        (i32::MIN, i32::MIN + 30),
    ];
    for (c, n) in cases {
        let make = || {
            let x: Vec<f32> = (0..64).map(|i| i as f32).collect();
            (x, vec![-1.0f32; 64])
        };
        let (got, want) = both(&f, [1, 1, 1], make, |bufs| {
            let mut args = KernelArgs::new();
            args.ptr("x", &bufs.0[..]);
            args.ptr("out", &mut bufs.1[..]);
            args.scalar("c", c);
            args.scalar("neg_c", -(c as i64));
            args.scalar("n", n);
            args
        });
        assert_eq!(got.1, want.1, "c {c}, n {n}");
        let written = (n as i64 - c as i64).clamp(0, 64) as usize;
        assert!(got.1[..written]
            .iter()
            .enumerate()
            .all(|(i, v)| *v == i as f32 + 1.0));
    }
    let ll = unoptimized_ll(f, "codegen-prefix-run-dump");
    assert!(!ll.contains("mask.full"), "an all-true copy");
    assert!(ll.contains("%lane.run"), "no lane computed as a run");
}

/// The max of a masked row (`other` -1.5) reads the row as masked vector loads; a mask of
/// aranges, splats and compares becomes one vector compare, and in any other mask only the
/// ops vector lanes do not know (`j % 3`) are built lane by lane, the compare and the `&`
/// on them staying vector ops. The index mask `j < n` is true on a prefix of the lanes: the
/// kernel has one copy of the row (no all-true copy), whose whole vectors below `n` are
/// plain loads. Either way the result is the interpreter's, for an empty, a partial, a
/// vector-aligned and a full mask.
#[test]
fn max_of_masked_rows_matches_interpreter() {
    for every_third in [false, true] {
        let f = trace("codegen_masked_row_max", || {
            let x = ptr_param("x", DType::F32);
            let out = ptr_param("out", DType::F32);
            let n = scalar_param("n", DType::I32, 2, &Specialization::default());
            let j = arange(0, 64);
            let mut mask = compare(j, CmpPred::Lt, n);
            if every_third {
                mask &= compare(j % 3, CmpPred::Ne, 0);
            }
            let v = load(x + j, mask, -1.5f32);
            store(out + arange(0, 1), reshape(v.max(0), [1]), NoArg);
        });
        for n in [0, 7, 32, 40, 64] {
            let make = || {
                let x: Vec<f32> = (0..64).map(|i| ((i * 37) % 64) as f32 - 20.0).collect();
                (x, vec![0.0f32; 1])
            };
            let (got, want) = both(&f, [1, 1, 1], make, |bufs| x_out(bufs, &[("n", n)]));
            assert_eq!(got.1, want.1, "n {n}, every third {every_third}");
        }
        let ll = unoptimized_ll(f, "codegen-masked-max-dump");
        assert!(
            ll.contains("@llvm.masked.load.v32f32"),
            "the partial rows are read lane by lane"
        );
        // The plain mask is one compare of an arange vector with a splat; in the other,
        // `j % 3`'s lanes are inserted one by one and compared as a vector.
        assert!(ll.contains("icmp slt <32 x i32>"), "no vector compare");
        // (A splat inserts into `poison`; lane by lane inserts into the vector so far.)
        assert!(
            !ll.contains("insertelement <32 x i1> %"),
            "mask lanes inserted"
        );
        let by_lane = ll.contains("insertelement <32 x i32> %");
        assert_eq!(by_lane, every_third, "j % 3 computed as a vector?");
        assert_eq!(ll.contains("icmp ne <32 x i32>"), every_third);
        assert_eq!(ll.contains("mask.full"), every_third, "an all-true copy?");
        if !every_third {
            assert!(
                ll.contains("load <32 x float>, ptr"),
                "the prefix's whole vectors are masked loads"
            );
            // The loops over the vectors before and after the prefix's end are not to be
            // unrolled (their steps are vectors already).
            assert!(ll.contains(r#"!{!"llvm.loop.unroll.disable"}"#));
        }
    }
}

/// The loops that pack a `dot`'s operands keep their rows rolled when they only copy (the
/// rows are vectorized already; unrolling them doubled matmul's compile time), and may
/// unroll when they convert (bf16 → f32, where unrolling pays).
#[test]
fn plain_operand_copies_keep_their_rows_rolled() {
    let loop_hints = |dtype: DType| {
        let f = trace("codegen_dot_packing", || {
            let a = ptr_param("a", dtype);
            let b = ptr_param("b", dtype);
            let out = ptr_param("out", DType::F32);
            let n = scalar_param("n", DType::I32, 3, &Specialization::default());
            let rows = expand_dims(arange(0, 32), 1);
            let mask = compare(rows, CmpPred::Lt, n);
            let ta = load(a + offsets2(32, 32, 32), mask, 0);
            let tb = load(b + offsets2(32, 32, 32), mask, 0);
            store(
                out + offsets2(32, 32, 32),
                dot(ta, tb, zeros([32, 32], DType::F32)),
                NoArg,
            );
        });
        let ll = unoptimized_ll(f, "codegen-packing-dump");
        ll.matches("!llvm.loop").count()
    };
    let (plain, converted) = (loop_hints(DType::F32), loop_hints(DType::BF16));
    // Two operands, each packed in a copy where the mask is all true and one where not;
    // the masked copy of this bounds mask keeps every loop rolled in both dtypes.
    assert!(
        plain >= converted + 2,
        "{plain} loop hints for f32 operands, {converted} for bf16"
    );
}

/// The same transposed column in tutorial 03's two-step form, `(x + r·ld) + (row + 128)`,
/// on lines a run-time stride apart: each line's offsets wrap at the same lane, so every
/// line must be checked (the fuzzer generates this shape; the broken rule misread it too).
#[test]
fn a_transposed_column_on_lines_a_stride_apart_is_checked() {
    for (rows, cols) in [(2, 2), (2, 32), (3, 16)] {
        let f = trace("codegen_transposed_widening_lines", || {
            let x = ptr_param("x", DType::F32);
            let out = ptr_param("out", DType::F32);
            let off = scalar_param("off", DType::I32, 2, &Specialization::default());
            let ld = scalar_param("ld", DType::I32, 3, &Specialization::default());
            let column = expand_dims(cast(off + arange(0, cols), DType::I8), 1);
            let row = broadcast_to(trans(cast(column, DType::I64)), [rows, cols]);
            let r = broadcast_to(expand_dims(arange(0, rows), 1) * ld, [rows, cols]);
            let v = load((x + r) + (row + 128), NoArg, NoArg);
            store(out + offsets2(rows, cols, cols), v, NoArg);
        });
        // No wrap; the last lane wraps; the lanes wrap at lane 8.
        for off in [0, 128 - cols as i32, 120] {
            let make = || {
                let x: Vec<f32> = (0..1024).map(|i| i as f32).collect();
                (x, vec![-1.0f32; rows * cols])
            };
            let (got, want) = both(&f, [1, 1, 1], make, |bufs| {
                x_out(bufs, &[("off", off), ("ld", 300)])
            });
            assert_eq!(got.1, want.1, "{rows}×{cols}, off {off}");
        }
    }
}

/// How [`kept_panels_kernel`]'s repeated K loop reads `b`.
#[derive(Clone, Copy, Debug)]
enum KeptPanels {
    /// The same rows every repetition: later repetitions find the packed tiles kept.
    SameRows,
    /// Rows one further each repetition: every kept tile's rows differ, so it is copied
    /// again.
    ShiftedRows,
    /// Rows shifted by the program id (`pid % 5`): a program after another on a worker
    /// finds kept tiles of other rows and copies them again.
    ShiftedByProgram,
    /// Memory is written before the loops (`out`, which may overlap `x` for all the code
    /// generator knows): nothing may be kept.
    WrittenFirst,
}

/// Per program, `acc += a_k @ b_k` over 2 K steps of 64, repeated 3 times, with `b` a
/// 64 × 128 f32 tile (copied in panels, the copy `panel_cache` keeps across iterations and
/// programs) and each program its own rows of `a` (`pid % 8`) and block of `out`.
fn kept_panels_kernel(how: KeptPanels) -> Function {
    trace("codegen_kept_panels", || {
        let x = ptr_param("x", DType::F32);
        let out = ptr_param("out", DType::F32);
        let ld = scalar_param("ld", DType::I32, 3, &Specialization::default());
        if let KeptPanels::WrittenFirst = how {
            store(out + arange(0, 8), full([8], 0.5f32, DType::F32), NoArg);
        }
        let pid = program_id(0);
        let a_offs = offsets2(16, 64, 128) + (pid % 8) * 16 * 128;
        let rk = expand_dims(arange(0, 64), 1);
        let rn = expand_dims(arange(0, 128), 0);
        let acc = full([16, 128], 0.0f32, DType::F32);
        let acc = for_range(0, 3, 1, acc, |rep, acc| {
            for_range(0, 2, 1, acc, |kb, acc| {
                let ta = load(x + a_offs + kb * 64, NoArg, NoArg);
                let rows = match how {
                    KeptPanels::ShiftedRows => rk + kb * 64 + rep,
                    KeptPanels::ShiftedByProgram => rk + kb * 64 + pid % 5,
                    _ => rk + kb * 64,
                };
                let tb = load(x + 20_000 + rows * ld + rn, NoArg, NoArg);
                dot(ta, tb, acc)
            })
        });
        store(out + offsets2(16, 128, 128) + pid * 16 * 128, acc, NoArg);
    })
}

/// [`kept_panels_kernel`]'s `x`, small integers (every sum is exact, in any order), and
/// `out` for `programs` programs.
fn kept_panels_buffers(programs: usize) -> (Vec<f32>, Vec<f32>) {
    let x = (0..40_000).map(|i| ((i * 7) % 13) as f32 - 6.0).collect();
    (x, vec![0.0f32; programs * 16 * 128])
}

/// Packed `b` tiles kept across a loop's repetitions give the interpreter's results, and
/// are kept only where nothing before may write memory.
#[test]
fn kept_dot_panels_match_interpreter() {
    for how in [
        KeptPanels::SameRows,
        KeptPanels::ShiftedRows,
        KeptPanels::WrittenFirst,
    ] {
        let f = kept_panels_kernel(how);
        let make = || kept_panels_buffers(1);
        let (got, want) = both(&f, [1, 1, 1], make, |bufs| x_out(bufs, &[("ld", 131)]));
        assert!(got.1 == want.1, "{how:?}: differs from the interpreter");
        let ll = unoptimized_ll(f, "codegen-kept-panels-dump");
        let kept = !matches!(how, KeptPanels::WrittenFirst);
        assert_eq!(ll.contains("panel.cached"), kept, "{how:?}");
    }
}

/// A cache entry re-digested with a smaller scratch size in its header (what a forger with
/// the format at hand writes) cannot shrink the kernel's scratch: the size comes from the
/// object, and the entry is used as it is.
#[test]
fn scratch_size_comes_from_the_object_not_the_cache_header() {
    use crate::compile_pipeline::{forged_entry, object_of};
    let f = kept_panels_kernel(KeptPanels::SameRows);
    let cache = TempDir::new("codegen-scratch-forged");
    let fresh = compile(&f, &cache);
    assert!(
        fresh.scratch_bytes() > 0,
        "the kernel keeps panels in scratch"
    );
    let path = tritium_backend::pipeline::cache::entry_path(cache.path(), &fresh.key_hash);
    let good = std::fs::read(&path).unwrap();
    let forged = forged_entry(&fresh.key_hash, 0, object_of(&good));
    std::fs::write(&path, &forged).unwrap();
    let loaded = compile(&f, &cache);
    assert_eq!(
        std::fs::read(&path).unwrap(),
        forged,
        "the entry was used, not replaced"
    );
    assert_eq!(loaded.scratch_bytes(), fresh.scratch_bytes());
    let mut got = kept_panels_buffers(1);
    let mut want = got.clone();
    let grid = Grid([1, 1, 1]);
    loaded
        .run(grid, &x_out(&mut got, &[("ld", 131)]).args, false)
        .unwrap();
    interpret(&f, grid, &x_out(&mut want, &[("ld", 131)]).args).unwrap();
    assert!(got.1 == want.1, "differs from the interpreter");
}

/// A launch starts with no kept `b` tiles: the next launch over the same memory, changed in
/// between, reads the new values (the worker's scratch outlives launches).
#[test]
fn kept_dot_panels_do_not_outlive_a_launch() {
    let f = kept_panels_kernel(KeptPanels::SameRows);
    let cache = TempDir::new("codegen-kept-panels");
    let compiled = compile(&f, &cache);
    // One buffer, at one address, for both launches.
    let mut got = kept_panels_buffers(1);
    for round in 0..2 {
        let mut want = got.clone();
        let args = x_out(&mut got, &[("ld", 131)]);
        compiled.run(Grid([1, 1, 1]), &args.args, false).unwrap();
        interpret(&f, Grid([1, 1, 1]), &x_out(&mut want, &[("ld", 131)]).args).unwrap();
        assert!(
            got.1 == want.1,
            "launch {round}: differs from the interpreter"
        );
        got.0.iter_mut().for_each(|v| *v = -*v + 1.0);
    }
}

/// Programs one after the other on a worker share kept `b` tiles when their rows are the
/// same (each program its own rows of `a`), and copy them again when they are not (rows
/// shifted by the program id). 128 programs make chunks of several programs per worker
/// on a machine of up to 32 threads.
#[test]
fn kept_dot_panels_across_programs_match_interpreter() {
    for how in [KeptPanels::SameRows, KeptPanels::ShiftedByProgram] {
        let f = kept_panels_kernel(how);
        let make = || kept_panels_buffers(128);
        let (got, want) = both(&f, [128, 1, 1], make, |bufs| x_out(bufs, &[("ld", 131)]));
        assert!(got.1 == want.1, "{how:?}: differs from the interpreter");
    }
}

/// `out = op(load(x), load(y))` over one 1024-lane tile per program.
fn streaming_kernel(name: &str, op: fn(Tile, Tile) -> Tile) -> Function {
    trace(name, || {
        let x = ptr_param("x", DType::F32);
        let y = ptr_param("y", DType::F32);
        let out = ptr_param("out", DType::F32);
        let offs = program_id(0) * 1024 + arange(0, 1024);
        store(
            out + offs,
            op(load(x + offs, NoArg, NoArg), load(y + offs, NoArg, NoArg)),
            NoArg,
        );
    })
}

#[test]
fn compute_bound_loops_prefetch_their_streamed_loads() {
    // A load read once is left to the hardware prefetcher where the loop is memory-bound
    // (a sum), and prefetched for the next program where it is compute-bound (an `exp`
    // per lane: the hardware prefetcher stops at each page and the loop's chains cannot
    // hide the misses). The store's tile is prefetched for writing either way.
    type Case = (&'static str, fn(Tile, Tile) -> Tile, bool);
    let cases: [Case; 3] = [
        ("codegen_stream_add", |a, b| a + b, false),
        ("codegen_stream_exp", |a, b| (a * b).exp(), true),
        ("codegen_stream_exp_sqrt", |a, b| a.exp() + b.sqrt(), true),
    ];
    for (name, op, read) in cases {
        let ll = unoptimized_ll(streaming_kernel(name, op), name);
        let prefetches = |rw: u32| {
            ll.lines()
                .filter(|l| l.contains("@llvm.prefetch") && l.contains(&format!("i32 {rw}, i32 3")))
                .count()
        };
        assert!(prefetches(1) > 0, "{name}: the output is not prefetched");
        assert_eq!(prefetches(0) > 0, read, "{name}: read prefetches");
    }
    // The prefetched copy computes what the interpreter does.
    let f = streaming_kernel("codegen_stream_exp", |a, b| (a * b).exp());
    let n = 3 * 1024;
    let make = || {
        let x: Vec<f32> = values(n, 5).iter().map(|v| (v * 8.0) as f32).collect();
        let y: Vec<f32> = values(n, 6).iter().map(|v| *v as f32).collect();
        (x, y, vec![0f32; n])
    };
    let (got, want) = both(&f, [3, 1, 1], make, |b| {
        let mut args = KernelArgs::new();
        args.ptr("x", &b.0[..]);
        args.ptr("y", &b.1[..]);
        args.ptr("out", &mut b.2[..]);
        args
    });
    let f64s = |v: &[f32]| v.iter().map(|x| *x as f64).collect::<Vec<_>>();
    assert_close(&f64s(&got.2), &f64s(&want.2), 1e-6, "exp(x·y), prefetched");
}

/// A lane loop whose lanes compute long dependency chains runs software-pipelined (chunk
/// `c`'s stage `s` beside chunk `c + 1`'s stage `s − 1`, values crossing stages kept in
/// scratch rings); a short one does not. Staged, every lane still matches the interpreter
/// bit for bit: a full grid and a partial last tile (masked: the chunks below its split run
/// staged, the rest as before), `pow` with its `likely` hint holding in some chunks and not
/// in others (a chunk's copy is chosen at its first stage and kept at its later ones), a
/// reduction of a staged value fused into the loop (never staged), and tiles of fewer
/// chunks than stages.
#[test]
fn deep_lane_chains_run_in_stages_and_match_interpreter() {
    type Op2 = fn(Tile, Tile) -> Tile;
    struct Case {
        name: &'static str,
        op: Op2,
        lanes: i64,
        staged: bool,
        /// Bits equal the interpreter's (made of IEEE operations only; `exp` and `log`
        /// are within an ulp or two).
        exact: bool,
    }
    let deep: Op2 = |a, b| (log((a * b).exp()) + b).exp() * a;
    let cases = [
        Case {
            name: "codegen_stage_deep",
            op: deep,
            lanes: 1024,
            staged: true,
            exact: false,
        },
        Case {
            name: "codegen_stage_pow",
            op: pow,
            lanes: 1024,
            staged: true,
            exact: true,
        },
        Case {
            name: "codegen_stage_short",
            op: |a, b| a * b + a,
            lanes: 1024,
            staged: false,
            exact: true,
        },
        Case {
            name: "codegen_stage_few_chunks",
            op: deep,
            lanes: 96,
            staged: false,
            exact: false,
        },
    ];
    for case in cases {
        let (op, lanes) = (case.op, case.lanes);
        let f = trace(case.name, || {
            let x = ptr_param("x", DType::F32);
            let y = ptr_param("y", DType::F32);
            let out = ptr_param("out", DType::F32);
            let n = scalar_param("n", DType::I32, 3, &Specialization::default());
            let offs = program_id(0) * lanes + arange(0, lanes);
            let mask = compare(offs, CmpPred::Lt, n);
            let r = op(load(x + offs, mask, NoArg), load(y + offs, mask, NoArg));
            store(out + offs, r, mask);
        });
        let ll = unoptimized_ll(f.clone(), case.name);
        let staged = ll.lines().any(|l| l.starts_with("stage.chunk"));
        assert_eq!(staged, case.staged, "{}: staged", case.name);
        let tiles = 3;
        for n in [tiles * lanes as usize, tiles * lanes as usize - 100] {
            let make = || {
                // Bases and exponents of every sign and size: `pow`'s rare lanes (zero,
                // negative, subnormal, infinite bases) fall in some chunks only.
                let x: Vec<f32> = (0..tiles * lanes as usize)
                    .map(|i| match i % 97 {
                        0 => 0.0,
                        13 => -2.0,
                        29 => 1e-40,
                        41 => f32::INFINITY,
                        k if i % 300 < 150 => 0.5 + k as f32 / 50.0,
                        k => 0.9 + k as f32 / 400.0,
                    })
                    .collect();
                let y: Vec<f32> = (0..x.len()).map(|i| (i % 23) as f32 / 7.0 - 1.5).collect();
                let out = vec![0f32; x.len()];
                (x, y, out)
            };
            let (got, want) = both(&f, [tiles as u64, 1, 1], make, |b| {
                let mut args = KernelArgs::new();
                args.ptr("x", &b.0[..]);
                args.ptr("y", &b.1[..]);
                args.ptr("out", &mut b.2[..]);
                args.scalar("n", n as i32);
                args
            });
            // Any NaN is any other (`0 · inf` lanes of `deep`).
            let same = |a: f32, b: f32| {
                a.to_bits() == b.to_bits()
                    || (a.is_nan() && b.is_nan())
                    || (!case.exact && (a - b).abs() <= 1e-5 * b.abs())
            };
            let (got, want) = (&got.2, &want.2);
            let wrong: Vec<usize> = (0..got.len())
                .filter(|i| !same(got[*i], want[*i]))
                .collect();
            assert!(
                wrong.is_empty(),
                "{}, n = {n}: {} lanes differ from the interpreter's, the first {:?}",
                case.name,
                wrong.len(),
                &wrong[..wrong.len().min(8)]
            );
        }
    }
    // A sum fused into the loop keeps the plain chunked loop.
    let f = trace("codegen_stage_sum", || {
        let x = ptr_param("x", DType::F32);
        let out = ptr_param("out", DType::F32);
        let v = load(x + arange(0, 1024), NoArg, NoArg);
        let r = (log((v * v).exp()) + v).exp() * v;
        store(out + arange(0, 1024), r, NoArg);
        store(out + 1024, sum(r, 0, NoArg), NoArg);
    });
    let make = || {
        let x: Vec<f32> = (0..1024).map(|i| (i % 31) as f32 / 40.0).collect();
        (x, vec![0f32; 1025])
    };
    let (got, want) = both(&f, [1, 1, 1], make, |bufs| x_out(bufs, &[]));
    let f64s = |v: &[f32]| v.iter().map(|x| *x as f64).collect::<Vec<_>>();
    assert_close(
        &f64s(&got.1),
        &f64s(&want.1),
        1e-5,
        "staged values and their sum",
    );
}

/// A tile materialized by an op that reads other lanes (a flip of `pow`'s lanes, used
/// twice) is not staged through its operand: the flip reads the lanes of the chunk at the
/// other end, which the rings do not hold. Bits equal the interpreter's.
#[test]
fn a_materialized_flip_of_a_deep_chain_matches_interpreter() {
    let f = trace("codegen_stage_flip", || {
        let x = ptr_param("x", DType::F32);
        let y = ptr_param("y", DType::F32);
        let out = ptr_param("out", DType::F32);
        let offs = arange(0, 1024);
        let v = pow(load(x + offs, NoArg, NoArg), load(y + offs, NoArg, NoArg));
        let f = flip(v, 0);
        store(out + offs, f, NoArg);
        store(out + 1024 + offs, f * 2.0f32, NoArg);
    });
    let make = || {
        let x: Vec<f32> = (0..1024).map(|i| 0.5 + (i % 97) as f32 / 40.0).collect();
        let y: Vec<f32> = (0..1024).map(|i| (i % 23) as f32 / 7.0 - 1.5).collect();
        (x, y, vec![0f32; 2048])
    };
    let (got, want) = both(&f, [1, 1, 1], make, |b| {
        let mut args = KernelArgs::new();
        args.ptr("x", &b.0[..]);
        args.ptr("y", &b.1[..]);
        args.ptr("out", &mut b.2[..]);
        args
    });
    assert!(
        bits(&got.2) == bits(&want.2),
        "the flipped lanes differ from the interpreter's"
    );
}
