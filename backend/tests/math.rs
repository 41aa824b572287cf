//! The math functions the CUDA generator emits (no libdevice): f64 `exp`, `exp2`, `log`,
//! `log2`, `sin`, `cos` and f32 `log`, `log2`, `sin`, `cos`, run on the host by the CUDA
//! emulator (the same IR as the PTX) and measured in ulps: f64 against the host's libm over
//! many inputs and against correctly rounded values (computed with 3000-bit arithmetic)
//! where the reduction is hardest, f32 against the host's f64 libm (exact for f32), both
//! exactly on the special values. The PTX must call nothing.

use rstest::rstest;
use tritium_backend::cuda::{compile_ptx, run_emulated, CudaCompileOptions};
use tritium_backend::launch::{Grid, KernelArgs};
use tritium_dsl::ir::{DType, Function};
use tritium_dsl::trace::lang::*;
use tritium_dsl::trace::{ptr_param, Element, Tile, Tracer};

/// Lanes per program.
const BLOCK: usize = 1024;

/// One function under test.
struct Case {
    name: &'static str,
    op: fn(Tile) -> Tile,
    reference: fn(f64) -> f64,
    /// The largest difference allowed from the host libm (glibc: within 0.52 ulp), in ulps
    /// of its result: the two round differently at most.
    max_ulp: f64,
    /// The largest error allowed against the exact value (`reference.txt`), in ulps of the
    /// correctly rounded result; subnormal results are measured in subnormal steps and
    /// allowed one (the result is rounded once in f64, then again by the scale).
    max_exact_ulp: f64,
}

const CASES: [Case; 6] = [
    Case {
        name: "exp",
        op: exp,
        reference: f64::exp,
        max_ulp: 1.0,
        max_exact_ulp: 0.55,
    },
    Case {
        name: "exp2",
        op: exp2,
        reference: f64::exp2,
        max_ulp: 1.0,
        max_exact_ulp: 0.55,
    },
    Case {
        name: "log",
        op: log,
        reference: f64::ln,
        max_ulp: 1.0,
        max_exact_ulp: 0.55,
    },
    Case {
        name: "log2",
        op: log2,
        reference: f64::log2,
        max_ulp: 1.0,
        max_exact_ulp: 0.55,
    },
    Case {
        name: "sin",
        op: sin,
        reference: f64::sin,
        max_ulp: 1.0,
        max_exact_ulp: 0.7,
    },
    Case {
        name: "cos",
        op: cos,
        reference: f64::cos,
        max_ulp: 1.0,
        max_exact_ulp: 0.7,
    },
];

fn case(name: &str) -> &'static Case {
    CASES.iter().find(|c| c.name == name).unwrap()
}

/// `out[i] = op(x[i])` over `BLOCK` lanes per program, in `dtype`.
fn kernel(name: &str, op: fn(Tile) -> Tile, dtype: DType) -> Function {
    let t = Tracer::begin(&format!("math_{dtype}_{name}")).unwrap();
    let x = ptr_param("x", dtype);
    let out = ptr_param("out", dtype);
    let offs = program_id(0) * BLOCK as i32 + arange(0, BLOCK);
    store(out + offs, op(load(x + offs, NoArg, NoArg)), NoArg);
    t.finish().unwrap()
}

/// `op` over `xs` on the CUDA emulator.
fn emulated_in<T: Element + Copy + Default>(name: &str, op: fn(Tile) -> Tile, xs: &[T]) -> Vec<T> {
    let mut x = xs.to_vec();
    x.resize(xs.len().next_multiple_of(BLOCK), T::default());
    let mut out = vec![T::default(); x.len()];
    let mut args = KernelArgs::new();
    args.ptr("x", &x[..]);
    args.ptr("out", &mut out[..]);
    let grid = Grid([(x.len() / BLOCK) as u64, 1, 1]);
    run_emulated(&kernel(name, op, T::DTYPE), grid, &args, 4).unwrap();
    out.truncate(xs.len());
    out
}

/// The f64 function `c` over `xs` on the CUDA emulator.
fn emulated(c: &Case, xs: &[f64]) -> Vec<f64> {
    emulated_in(c.name, c.op, xs)
}

/// A float dtype as the special-value tables compare it: bit for bit, any NaN for NaN.
trait Special: Element + Copy + Default + std::fmt::LowerExp {
    fn same(self, want: Self) -> bool;
}

impl Special for f64 {
    fn same(self, want: f64) -> bool {
        if want.is_nan() {
            self.is_nan()
        } else {
            self.to_bits() == want.to_bits()
        }
    }
}

impl Special for f32 {
    fn same(self, want: f32) -> bool {
        if want.is_nan() {
            self.is_nan()
        } else {
            self.to_bits() == want.to_bits()
        }
    }
}

/// `op(x)` is `want` for every `(x, want)` of `pairs`, on the CUDA emulator.
fn assert_special_values<T: Special>(name: &str, op: fn(Tile) -> Tile, pairs: &[(T, T)]) {
    let xs: Vec<T> = pairs.iter().map(|p| p.0).collect();
    let got = emulated_in(name, op, &xs);
    for (&(x, want), g) in pairs.iter().zip(got) {
        assert!(
            g.same(want),
            "{} {name}({x:e}) = {g:e}, not {want:e}",
            T::DTYPE
        );
    }
}

/// A function under test by name.
type NamedOp = (&'static str, fn(Tile) -> Tile);

/// PTX for `sm` of one kernel storing every function of `ops` of a `dtype` input.
fn all_functions_ptx(dtype: DType, ops: &[NamedOp], sm: u32) -> String {
    let t = Tracer::begin(&format!("math_{dtype}_all")).unwrap();
    let x = ptr_param("x", dtype);
    let offs = program_id(0) * 256 + arange(0, 256);
    let v = load(x + offs, NoArg, NoArg);
    for (name, op) in ops {
        let out = ptr_param(name, dtype);
        store(out + offs, op(v), NoArg);
    }
    let f = t.finish().unwrap();
    compile_ptx(
        &f,
        "k",
        &CudaCompileOptions {
            sm,
            num_warps: 4,
            ..Default::default()
        },
    )
    .unwrap()
    .text
}

/// `|got - want|` in units of the last place of `want` (subnormal steps below 2^-1022);
/// 0 when both are the same infinity or both NaN, inf when only one is.
fn ulps(got: f64, want: f64) -> f64 {
    if got == want || (got.is_nan() && want.is_nan()) {
        return 0.0;
    }
    if !got.is_finite() || !want.is_finite() {
        return f64::INFINITY;
    }
    let w = want.abs();
    let ulp = if w < f64::MIN_POSITIVE {
        f64::from_bits(1)
    } else {
        f64::from_bits(w.to_bits() & 0x7ff0_0000_0000_0000) * f64::EPSILON
    };
    (got - want).abs() / ulp
}

/// Deterministic pseudo-random numbers (xorshift), so failures reproduce.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// Uniform in [0, 1).
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform in [lo, hi).
    fn uniform(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * self.unit()
    }

    /// ± a random mantissa times 2^e, e uniform in [lo, hi].
    fn binades(&mut self, lo: i32, hi: i32) -> f64 {
        let e = lo + (self.next() % (hi - lo + 1) as u64) as i32;
        let m = 1.0 + self.unit();
        let sign = if self.next() & 1 == 0 { 1.0 } else { -1.0 };
        sign * m * 2f64.powi(e.min(1023)) * if e > 1023 { 2f64.powi(e - 1023) } else { 1.0 }
    }

    /// A random f64 with positive sign and finite exponent (every binade equally likely,
    /// subnormals included).
    fn positive_bits(&mut self) -> f64 {
        loop {
            let v = f64::from_bits(self.next() & 0x7fff_ffff_ffff_ffff);
            if v.is_finite() {
                return v;
            }
        }
    }
}

/// The random inputs of one function: each generator contributes `n` values.
fn inputs(name: &str, n: usize) -> Vec<f64> {
    let mut r = Rng(0x9E37_79B9_7F4A_7C15 ^ name.len() as u64);
    let mut xs = Vec::new();
    let mut add = |xs: &mut Vec<f64>, f: &mut dyn FnMut(&mut Rng) -> f64| {
        xs.extend((0..n).map(|_| f(&mut r)));
    };
    match name {
        "exp" => {
            add(&mut xs, &mut |r| r.uniform(-745.2, 709.8));
            add(&mut xs, &mut |r| r.binades(-60, 9));
            // Subnormal results.
            add(&mut xs, &mut |r| r.uniform(-745.2, -708.3));
        }
        "exp2" => {
            add(&mut xs, &mut |r| r.uniform(-1075.0, 1024.0));
            add(&mut xs, &mut |r| r.binades(-60, 10));
            add(&mut xs, &mut |r| r.uniform(-1075.0, -1022.0));
            // Just off integers, where r is tiny.
            add(&mut xs, &mut |r| {
                (r.next() % 2000) as f64 - 1000.0 + r.binades(-50, -20)
            });
        }
        "log" | "log2" => {
            add(&mut xs, &mut |r| r.positive_bits());
            // Near 1, where the result is small.
            add(&mut xs, &mut |r| 1.0 + r.binades(-52, -1));
            add(&mut xs, &mut |r| {
                f64::from_bits(r.next() & 0x000f_ffff_ffff_ffff)
            });
            add(&mut xs, &mut |r| r.uniform(0.5, 2.0));
        }
        _ => {
            add(&mut xs, &mut |r| r.uniform(-10.0, 10.0));
            add(&mut xs, &mut |r| r.binades(-30, 1023));
            // The Cody-Waite range, up to the Payne-Hanek threshold.
            add(&mut xs, &mut |r| r.binades(0, 29));
            // Near multiples of π/2: k·π/2 rounded, a few ulps either way, through the
            // Cody-Waite range and into Payne-Hanek's.
            add(&mut xs, &mut |r| {
                let k = (r.next() % (1 << (r.next() % 34))) as f64;
                let x = k * std::f64::consts::FRAC_PI_2;
                f64::from_bits(x.to_bits().wrapping_add(r.next() % 9).wrapping_sub(4))
            });
        }
    }
    xs
}

/// Each function within its bound of the host libm over random inputs in every range.
#[rstest]
fn matches_libm_within_the_bound(#[values("exp", "exp2", "log", "log2", "sin", "cos")] name: &str) {
    let c = case(name);
    let xs = inputs(name, 50_000);
    let got = emulated(c, &xs);
    let mut worst = (0.0, 0.0);
    for (&x, &g) in xs.iter().zip(&got) {
        let e = ulps(g, (c.reference)(x));
        if e > worst.0 {
            worst = (e, x);
        }
    }
    eprintln!(
        "{name}: worst {:.3} ulp at {:e} over {} inputs",
        worst.0,
        worst.1,
        xs.len()
    );
    assert!(
        worst.0 <= c.max_ulp,
        "{name}({:e}) is {} ulp off libm",
        worst.1,
        worst.0
    );
}

/// `(x, hi, lo)` of `name` from `reference.txt`: the exact value of `name(x)` is `hi` (the
/// correctly rounded f64) plus `lo` ulps of `hi`.
fn reference(name: &str) -> Vec<(f64, f64, f64)> {
    let f = |h: &str| f64::from_bits(u64::from_str_radix(h, 16).unwrap());
    include_str!("data/math_f64/reference.txt")
        .lines()
        .filter_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            (w[0] == name).then(|| (f(w[1]), f(w[2]), f(w[3])))
        })
        .collect()
}

/// The ulp of `hi`: subnormal steps below 2^-1022.
fn ulp_of(hi: f64) -> f64 {
    if hi.abs() < f64::MIN_POSITIVE {
        f64::from_bits(1)
    } else {
        f64::from_bits(hi.abs().to_bits() & 0x7ff0_0000_0000_0000) * f64::EPSILON
    }
}

/// Each function within its bound of the exact value where it is hardest: arguments near
/// the overflow and underflow thresholds, subnormal results and inputs, results near 0,
/// and sin/cos arguments just off multiples of π/2 up to 2^1023 (the closest any f64 comes,
/// 6381956970095103 · 2^797, included).
#[rstest]
fn within_the_bound_of_the_exact_value(
    #[values("exp", "exp2", "log", "log2", "sin", "cos")] name: &str,
) {
    let c = case(name);
    let cases = reference(name);
    assert!(cases.len() > 400, "{name}: {} reference cases", cases.len());
    let xs: Vec<f64> = cases.iter().map(|c| c.0).collect();
    let got = emulated(c, &xs);
    let (mut worst, mut worst_subnormal) = ((0.0, 0.0), (0.0, 0.0));
    for (&(x, hi, lo), &g) in cases.iter().zip(&got) {
        if hi.is_infinite() || hi == 0.0 {
            assert_eq!(g, hi, "{name}({x:e})");
            continue;
        }
        let e = ((g - hi) / ulp_of(hi) - lo).abs();
        let w = if hi.abs() < f64::MIN_POSITIVE {
            &mut worst_subnormal
        } else {
            &mut worst
        };
        if e > w.0 || e.is_nan() {
            *w = (e, x);
        }
    }
    eprintln!(
        "{name}: worst {:.3} ulp at {:e}, {:.3} subnormal steps at {:e}, over {} cases",
        worst.0,
        worst.1,
        worst_subnormal.0,
        worst_subnormal.1,
        cases.len()
    );
    assert!(
        worst.0 <= c.max_exact_ulp,
        "{name}({:e}) is {} ulp off",
        worst.1,
        worst.0
    );
    assert!(
        worst_subnormal.0 <= 1.0,
        "{name}({:e}) is {} subnormal steps off",
        worst_subnormal.1,
        worst_subnormal.0
    );
}

/// The special values, bit for bit (any NaN for NaN).
#[test]
fn special_values() {
    let (inf, nan, tiny) = (f64::INFINITY, f64::NAN, f64::from_bits(1));
    let table: &[(&str, &[(f64, f64)])] = &[
        (
            "exp",
            &[
                (0.0, 1.0),
                (-0.0, 1.0),
                (inf, inf),
                (-inf, 0.0),
                (nan, nan),
                (709.8, inf),
                (1e308, inf),
                (-745.2, 0.0),
                (-1e308, 0.0),
                (-745.13, tiny),
                (1e-300, 1.0),
            ],
        ),
        (
            "exp2",
            &[
                (0.0, 1.0),
                (inf, inf),
                (-inf, 0.0),
                (nan, nan),
                (1024.0, inf),
                (1023.0, 2f64.powi(1023)),
                (-1022.0, f64::MIN_POSITIVE),
                (-1074.0, tiny),
                (-1075.0, 0.0),
                (-1074.9, tiny),
                (-3.0, 0.125),
                (52.0, 2f64.powi(52)),
            ],
        ),
        (
            "log",
            &[
                (1.0, 0.0),
                (0.0, -inf),
                (-0.0, -inf),
                (-1.0, nan),
                (-tiny, nan),
                (-inf, nan),
                (inf, inf),
                (nan, nan),
            ],
        ),
        (
            "log2",
            &[
                (1.0, 0.0),
                (0.0, -inf),
                (-0.0, -inf),
                (-2.0, nan),
                (-inf, nan),
                (inf, inf),
                (nan, nan),
                (tiny, -1074.0),
                (f64::MIN_POSITIVE, -1022.0),
                (0.5, -1.0),
                (2f64.powi(1023), 1023.0),
                (1024.0, 10.0),
            ],
        ),
        (
            "sin",
            &[
                (0.0, 0.0),
                (-0.0, -0.0),
                (tiny, tiny),
                (-tiny, -tiny),
                (1e-300, 1e-300),
                (-1e-20, -1e-20),
                (inf, nan),
                (-inf, nan),
                (nan, nan),
            ],
        ),
        (
            "cos",
            &[
                (0.0, 1.0),
                (-0.0, 1.0),
                (tiny, 1.0),
                (1e-20, 1.0),
                (inf, nan),
                (-inf, nan),
                (nan, nan),
            ],
        ),
    ];
    for (name, pairs) in table {
        let c = case(name);
        assert_special_values(c.name, c.op, pairs);
    }
}

/// The six functions in one kernel compile to PTX that calls nothing (no libdevice, no
/// libm, no `__multi3` for the 128-bit products: `mul.hi.u64`) and reads the 2/π table
/// from global memory. Every f64 add and multiply carries `.rn`, which keeps ptxas from
/// fusing them into FMAs behind the error-free transformations' back (and the GPU's
/// results equal to the emulator's).
#[rstest]
fn ptx_calls_no_function(#[values(80, 90)] sm: u32) {
    let ops: Vec<_> = CASES.iter().map(|c| (c.name, c.op)).collect();
    let text = all_functions_ptx(DType::F64, &ops, sm);
    for absent in [".extern", ".func", "call", "add.f64", "sub.f64", "mul.f64"] {
        assert!(!text.contains(absent), "`{absent}` in\n{text}");
    }
    for present in [
        "fma.rn.f64",
        "rcp.rn.f64",
        "mul.hi.u64",
        "two_over_pi",
        "ld.global.nc.u64",
    ] {
        assert!(text.contains(present), "no `{present}` in\n{text}");
    }
}

// f32: `log`, `log2`, `sin`, `cos` (`exp` is the CPU's polynomial, measured in
// `cpu_codegen.rs`; `exp2` is PTX `ex2.approx`, the host's `exp2` in the emulator).

/// One f32 function under test.
struct Case32 {
    name: &'static str,
    op: fn(Tile) -> Tile,
    /// The same function in f64 (the host libm): its result, rounded or not, is exact to
    /// far below an f32 ulp.
    reference: fn(f64) -> f64,
    /// The largest error allowed, in ulps of the exact result (2^-149 below 2^-126).
    max_ulp: f64,
}

const CASES32: [Case32; 4] = [
    Case32 {
        name: "log",
        op: log,
        reference: f64::ln,
        max_ulp: 0.6,
    },
    Case32 {
        name: "log2",
        op: log2,
        reference: f64::log2,
        max_ulp: 0.6,
    },
    Case32 {
        name: "sin",
        op: sin,
        reference: f64::sin,
        max_ulp: 0.75,
    },
    Case32 {
        name: "cos",
        op: cos,
        reference: f64::cos,
        max_ulp: 0.75,
    },
];

/// `|got - exact|` in ulps of the f32 nearest `exact`.
fn ulps32(got: f32, exact: f64) -> f64 {
    if (got as f64 == exact) || (got.is_nan() && exact.is_nan()) {
        return 0.0;
    }
    if !got.is_finite() || !exact.is_finite() {
        return f64::INFINITY;
    }
    let w = (exact as f32).abs();
    let ulp = if w < f32::MIN_POSITIVE {
        2f64.powi(-149)
    } else {
        f32::from_bits(w.to_bits() & 0x7f80_0000) as f64 * f32::EPSILON as f64
    };
    (got as f64 - exact).abs() / ulp
}

/// For each binade 2^0 … 2^23, the f32 closest to a multiple of π/2 (down to 2^-27.8
/// away, found by trying every f32).
const CLOSEST_TO_PIO2_F32: [u32; 24] = [
    0x3fc9_0fdb,
    0x4049_0fdb,
    0x4096_cbe4,
    0x4116_cbe4,
    0x4196_cbe4,
    0x4216_cbe4,
    0x4296_cbe4,
    0x437c_e5f1,
    0x43fc_e5f1,
    0x447c_e5f1,
    0x44fc_e5f1,
    0x450b_e628,
    0x458b_e628,
    0x460b_e628,
    0x468b_e628,
    0x474d_246f,
    0x47cd_246f,
    0x484d_246f,
    0x4882_665e,
    0x4902_665e,
    0x4982_665e,
    0x4a25_62ae,
    0x4aa5_62ae,
    0x4b25_62ae,
];

/// The random f32 inputs of one function: each generator contributes `n` values.
fn inputs32(name: &str, n: usize) -> Vec<f32> {
    let mut r = Rng(0x2545_F491_4F6C_DD1D ^ name.len() as u64);
    let mut xs = Vec::new();
    let mut add = |xs: &mut Vec<f32>, f: &mut dyn FnMut(&mut Rng) -> f32| {
        xs.extend((0..n).map(|_| f(&mut r)));
    };
    if name.starts_with("log") {
        add(&mut xs, &mut |r| {
            f32::from_bits((r.next() as u32) & 0x7f7f_ffff).max(f32::from_bits(1))
        });
        add(&mut xs, &mut |r| 1.0 + r.binades(-23, -1) as f32);
        add(&mut xs, &mut |r| {
            f32::from_bits((r.next() as u32) & 0x007f_ffff | 1)
        });
        add(&mut xs, &mut |r| r.uniform(0.5, 2.0) as f32);
    } else {
        add(&mut xs, &mut |r| r.uniform(-10.0, 10.0) as f32);
        add(&mut xs, &mut |r| r.binades(-20, 127) as f32);
        // Both sides of the Payne-Hanek threshold, 2^17.
        add(&mut xs, &mut |r| r.binades(10, 24) as f32);
        // Near multiples of π/2: k·π/2 rounded to f32, a few ulps either way.
        add(&mut xs, &mut |r| {
            let k = (r.next() % (1 << (r.next() % 30))) as f64;
            let x = (k * std::f64::consts::FRAC_PI_2) as f32;
            f32::from_bits(
                x.to_bits()
                    .wrapping_add(r.next() as u32 % 9)
                    .wrapping_sub(4),
            )
        });
        xs.extend(CLOSEST_TO_PIO2_F32.iter().map(|b| f32::from_bits(*b)));
        xs.extend(CLOSEST_TO_PIO2_F32.iter().map(|b| -f32::from_bits(*b)));
        xs.extend([
            f32::MAX,
            -f32::MAX,
            1e38,
            3e37,
            16_777_216.0,
            131_072.0,
            131_071.99,
        ]);
    }
    xs
}

/// Each f32 function within its bound of the exact value over inputs in every range; PTX
/// `sin.approx` is off by thousands of ulps past ±100π and `lg2.approx` near 1.
#[rstest]
fn f32_within_the_bound_of_the_exact_value(#[values("log", "log2", "sin", "cos")] name: &str) {
    let c = CASES32.iter().find(|c| c.name == name).unwrap();
    let xs = inputs32(name, 50_000);
    let got = emulated_in(c.name, c.op, &xs);
    let mut worst = (0.0, 0.0f32);
    for (&x, &g) in xs.iter().zip(&got) {
        let e = ulps32(g, (c.reference)(x as f64));
        if e > worst.0 || e.is_nan() {
            worst = (e, x);
        }
    }
    eprintln!(
        "f32 {name}: worst {:.3} ulp at {:e} ({:#010x}) over {} inputs",
        worst.0,
        worst.1,
        worst.1.to_bits(),
        xs.len()
    );
    assert!(
        worst.0 <= c.max_ulp,
        "f32 {name}({:e}) is {} ulp off",
        worst.1,
        worst.0
    );
}

/// The f32 special values, bit for bit (any NaN for NaN).
#[test]
fn f32_special_values() {
    let (inf, nan, tiny) = (f32::INFINITY, f32::NAN, f32::from_bits(1));
    let table: &[(&str, &[(f32, f32)])] = &[
        (
            "log",
            &[
                (1.0, 0.0),
                (0.0, -inf),
                (-0.0, -inf),
                (-1.0, nan),
                (-inf, nan),
                (inf, inf),
                (nan, nan),
            ],
        ),
        (
            "log2",
            &[
                (1.0, 0.0),
                (0.0, -inf),
                (-2.0, nan),
                (inf, inf),
                (nan, nan),
                (tiny, -149.0),
                (f32::MIN_POSITIVE, -126.0),
                (0.25, -2.0),
                (2f32.powi(127), 127.0),
            ],
        ),
        (
            "sin",
            &[
                (0.0, 0.0),
                (-0.0, -0.0),
                (tiny, tiny),
                (-1e-30, -1e-30),
                (inf, nan),
                (-inf, nan),
                (nan, nan),
            ],
        ),
        (
            "cos",
            &[(0.0, 1.0), (-0.0, 1.0), (tiny, 1.0), (inf, nan), (nan, nan)],
        ),
    ];
    for (name, pairs) in table {
        let c = CASES32.iter().find(|c| c.name == *name).unwrap();
        assert_special_values(c.name, c.op, pairs);
    }
}

/// f32 `log`, `log2`, `sin`, `cos` use no `.approx` instruction and call nothing; every f32
/// add and multiply carries `.rn`. (`exp2` is `ex2.approx`.)
#[rstest]
fn f32_ptx_has_no_approx_and_calls_no_function(#[values(80, 90)] sm: u32) {
    let ops: Vec<_> = CASES32.iter().map(|c| (c.name, c.op)).collect();
    let text = all_functions_ptx(DType::F32, &ops, sm);
    for absent in [".approx", ".extern", ".func", "call", "add.f32", "mul.f32"] {
        assert!(!text.contains(absent), "`{absent}` in\n{text}");
    }
    for present in ["fma.rn.f32", "rcp.rn.f32", "two_over_pi"] {
        assert!(text.contains(present), "no `{present}` in\n{text}");
    }
}
