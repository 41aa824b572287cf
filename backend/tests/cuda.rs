//! The CUDA lowering of ops the kernels in `tritium-kernels` do not reach, executed on the
//! CUDA emulator (host threads) and compared with the interpreter, with 1, 2 and 4 warps.

use ndarray::{Array1, Array2};
use rstest::rstest;
use tritium_backend::cuda::run_emulated;
use tritium_backend::interp::interpret;
use tritium_backend::launch::{Grid, KernelArgs};
use tritium_dsl::ir::{DType, Function};
use tritium_dsl::trace::lang::*;
use tritium_dsl::trace::{ptr_param, Tracer};

fn trace(name: &str, body: impl FnOnce()) -> Function {
    let t = Tracer::begin(name).unwrap();
    body();
    t.finish().unwrap()
}

/// Runs `f` on the emulator and on the interpreter, each on fresh buffers from `make`.
fn emulated_and_interpreted<B>(
    f: &Function,
    num_warps: u32,
    make: impl Fn() -> B,
    args: impl for<'a> Fn(&'a mut B) -> KernelArgs<'a>,
) -> (B, B) {
    let mut got = make();
    run_emulated(f, Grid([1, 1, 1]), &args(&mut got), num_warps).unwrap();
    let mut want = make();
    interpret(f, Grid([1, 1, 1]), &args(&mut want).args).unwrap();
    (got, want)
}

fn close(got: &[f32], want: &[f32], rtol: f32, what: &str) {
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let ok = g == w || (g - w).abs() <= rtol * (1.0 + w.abs()) || (g.is_nan() && w.is_nan());
        assert!(ok, "{what}[{i}]: emulated {g}, interpreted {w}");
    }
}

/// A `[R, C]` matrix with ties and one NaN.
fn matrix(r: usize, c: usize) -> Array2<f32> {
    let mut x = Array2::from_shape_fn((r, c), |(i, j)| ((i * 7 + j * 3) % 5) as f32 - 2.0);
    x[[r / 2, c / 2]] = f32::NAN;
    x
}

#[rstest]
fn transposes_broadcasts_and_reductions_along_axes(
    #[values(1, 2, 4)] num_warps: u32,
    #[values((3, 5), (16, 40), (33, 17))] shape: (usize, usize),
) {
    let (r, c) = shape;
    let f = trace("layout_ops", || {
        let x = ptr_param("x", DType::F32);
        let outs: Vec<_> = ["t", "s", "m", "amin", "amax", "centered"]
            .iter()
            .map(|n| {
                ptr_param(
                    n,
                    if n.starts_with('a') {
                        DType::I32
                    } else {
                        DType::F32
                    },
                )
            })
            .collect();
        let rows = arange(0, r);
        let cols = arange(0, c);
        let offs = expand_dims(rows, 1) * c as i32 + expand_dims(cols, 0);
        let v = load(x + offs, NoArg, NoArg);
        let t_offs = expand_dims(arange(0, c), 1) * r as i32 + expand_dims(arange(0, r), 0);
        store(outs[0] + t_offs, trans(v), NoArg);
        store(outs[1] + arange(0, c), sum(v, 0, NoArg), NoArg);
        let m = max(v, 1, NoArg);
        store(outs[2] + arange(0, r), m, NoArg);
        store(outs[3] + arange(0, c), argmin(v, 0, NoArg), NoArg);
        store(outs[4] + arange(0, r), argmax(v, 1, NoArg), NoArg);
        let centered = v - broadcast_to(expand_dims(m, 1), [r, c]);
        store(
            outs[5] + arange(0, r * c),
            reshape(centered, [r * c]),
            NoArg,
        );
    });
    type Bufs = (
        Array2<f32>,
        Vec<f32>,
        Vec<f32>,
        Vec<f32>,
        Vec<i32>,
        Vec<i32>,
        Vec<f32>,
    );
    let make = || -> Bufs {
        (
            matrix(r, c),
            vec![0.0; r * c],
            vec![0.0; c],
            vec![0.0; r],
            vec![0; c],
            vec![0; r],
            vec![0.0; r * c],
        )
    };
    let (got, want) = emulated_and_interpreted(&f, num_warps, make, |b: &mut Bufs| {
        let mut a = KernelArgs::new();
        a.ptr("x", &b.0);
        a.ptr("t", &mut b.1);
        a.ptr("s", &mut b.2);
        a.ptr("m", &mut b.3);
        a.ptr("amin", &mut b.4);
        a.ptr("amax", &mut b.5);
        a.ptr("centered", &mut b.6);
        a
    });
    close(&got.1, &want.1, 0.0, "trans");
    close(&got.2, &want.2, 1e-6, "sum along 0");
    close(&got.3, &want.3, 0.0, "max along 1");
    assert_eq!(got.4, want.4, "argmin along 0");
    assert_eq!(got.5, want.5, "argmax along 1");
    close(&got.6, &want.6, 0.0, "broadcast and reshape");
}

#[rstest]
fn math_functions(#[values(1, 4)] num_warps: u32) {
    let n = 300;
    let names = [
        "exp", "exp2", "log", "log2", "sqrt", "rsqrt", "sin", "cos", "floor", "ceil", "abs",
    ];
    let f = trace("math", || {
        let x = ptr_param("x", DType::F32);
        let i = arange(0, n);
        let v = load(x + i, NoArg, NoArg);
        for (k, name) in names.iter().enumerate() {
            let out = ptr_param(name, DType::F32);
            let y = match k {
                0 => exp(v),
                1 => exp2(v),
                2 => log(abs(v)),
                3 => log2(abs(v)),
                4 => sqrt(abs(v)),
                5 => rsqrt(abs(v)),
                6 => sin(v),
                7 => cos(v),
                8 => floor(v),
                9 => ceil(v),
                _ => abs(v),
            };
            store(out + i, y, NoArg);
        }
    });
    let make = || -> Vec<Vec<f32>> {
        let mut b = vec![(0..n)
            .map(|i| (i as f32 - 150.0) * 0.07)
            .collect::<Vec<f32>>()];
        b.extend(names.iter().map(|_| vec![0.0f32; n]));
        b
    };
    let (got, want) = emulated_and_interpreted(&f, num_warps, make, |b: &mut Vec<Vec<f32>>| {
        let mut a = KernelArgs::new();
        let (x, outs) = b.split_first_mut().unwrap();
        a.ptr("x", &*x);
        for (name, o) in names.iter().zip(outs) {
            a.ptr(name, o);
        }
        a
    });
    for (k, name) in names.iter().enumerate() {
        close(&got[k + 1], &want[k + 1], 2e-6, name);
    }
}

#[rstest]
fn in_place_reverse_waits_for_every_load(#[values(1, 4)] num_warps: u32) {
    let n = 1000;
    let f = trace("reverse", || {
        let p = ptr_param("p", DType::F32);
        let i = arange(0, n);
        let v = load(p + i, NoArg, NoArg);
        store(p + (scalar(n - 1, DType::I32) - i), v, NoArg);
    });
    let make = || Array1::from_iter((0..n).map(|i| i as f32));
    let (got, want) = emulated_and_interpreted(&f, num_warps, make, |b: &mut Array1<f32>| {
        let mut a = KernelArgs::new();
        a.ptr("p", b);
        a
    });
    assert_eq!(got, want);
}

#[rstest]
fn integer_ops_casts_and_halves(#[values(1, 4)] num_warps: u32) {
    let n = 200;
    let f = trace("ints", || {
        let (x, y) = (ptr_param("x", DType::I32), ptr_param("y", DType::I32));
        let (q, s8, h) = (
            ptr_param("q", DType::I32),
            ptr_param("s8", DType::I8),
            ptr_param("h", DType::BF16),
        );
        let i = arange(0, n);
        let a = load(x + i, NoArg, NoArg);
        let b = load(y + i, NoArg, NoArg);
        store(q + i, a / b + a % b + (a << b), NoArg);
        let f = cast(a, DType::F32) * 1.7f32;
        store(s8 + i, cast(f, DType::I8), NoArg);
        store(h + i, cast(f, DType::BF16), NoArg);
    });
    type Bufs = (Vec<i32>, Vec<i32>, Vec<i32>, Vec<i8>, Vec<half::bf16>);
    let make = || -> Bufs {
        (
            (0..n as i32).map(|i| i * 37 - 3000).collect(),
            (0..n as i32).map(|i| (i % 7) - 3).collect(),
            vec![0; n],
            vec![0; n],
            vec![half::bf16::ZERO; n],
        )
    };
    let (got, want) = emulated_and_interpreted(&f, num_warps, make, |b: &mut Bufs| {
        let mut a = KernelArgs::new();
        a.ptr("x", &b.0);
        a.ptr("y", &b.1);
        a.ptr("q", &mut b.2);
        a.ptr("s8", &mut b.3);
        a.ptr("h", &mut b.4);
        a
    });
    assert_eq!(got.2, want.2, "div, rem, shl");
    assert_eq!(got.3, want.3, "saturating cast");
    assert_eq!(got.4, want.4, "bf16 rounding");
}

/// A tensor-core `dot` whose accumulator differs per column but holds one value in each
/// thread's slots (a broadcast `arange` along the columns, a scan along them): it must
/// go through the exchange into fragment registers, not be taken for a splat (fuzzer
/// seed 3631150 got column 0's accumulator in column 1).
#[rstest]
fn mma_accumulator_that_varies_by_column(#[values(1, 4)] num_warps: u32) {
    for scanned in [false, true] {
        let f = trace("mma_acc_columns", || {
            let out = ptr_param("out", DType::F32);
            let a = full([16, 16], 1.0, DType::F16);
            let b = full([16, 8], 0.5, DType::F16);
            let acc = match scanned {
                false => expand_dims(arange(0, 8), 0).to(DType::F32) + zeros([16, 8], DType::F32),
                true => cumsum(full([16, 8], -13.0, DType::F32), 1, false),
            };
            let offs = expand_dims(arange(0, 16), 1) * 8 + expand_dims(arange(0, 8), 0);
            store(out + offs, dot(a, b, acc), NoArg);
        });
        let (got, want) = emulated_and_interpreted(
            &f,
            num_warps,
            || vec![0f32; 128],
            |o| {
                let mut args = KernelArgs::new();
                args.ptr("out", &mut o[..]);
                args
            },
        );
        assert_eq!(
            got, want,
            "{num_warps} warps, scanned accumulator: {scanned}"
        );
    }
}
