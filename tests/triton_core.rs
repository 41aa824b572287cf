//! Triton's typing and arithmetic rules, as its own unit tests define them
//! (`python/test/unit/language/test_core.py`: `test_bin_op`, `test_bitwise_op`,
//! `test_shift_op`, `test_floordiv`, `test_cast`, and `maximum`'s `propagate_nan`).
//!
//! The dtype each operator computes in is checked for every pair of Triton's dtypes against
//! a transcription of Triton's `computation_type_impl` / `integer_promote_impl`; the values
//! are checked on every device. The one deliberate difference: `/` on two integers is
//! Rust's truncating division (Triton's `//`), not Triton's float division — and a quotient
//! that reaches float arithmetic is an error (`tests/porting.rs`).

use crate::common::all_devices;
use half::{bf16, f16};
use ndarray::Array1;
use tritium::dsl::trace::lang::{self, NoArg};
use tritium::dsl::trace::{ptr_param, Tile, Tracer};
use tritium::prelude::*;

/// Triton's `dtypes_with_bfloat16`: every dtype but bool and the fp8s.
fn dtypes() -> Vec<DType> {
    DType::ALL
        .into_iter()
        .filter(|d| *d != DType::Bool && d.bits() >= 8 && !(d.is_float() && d.bits() == 8))
        .collect()
}

const OPS: [&str; 11] = ["+", "-", "*", "/", "%", "&", "|", "^", "<<", ">>", "//"];

/// Triton's `integer_promote_impl`: C's usual arithmetic conversions.
fn integer_promote(a: DType, b: DType) -> DType {
    // The same signedness: the wider. Different: the unsigned one, unless it is narrower.
    let a_wins = if a.is_signed_int() && b.is_unsigned_int() {
        a.bits() > b.bits()
    } else {
        a.bits() >= b.bits()
    };
    if a_wins {
        a
    } else {
        b
    }
}

/// Triton's `computation_type_impl` for two tensors (no Python scalars).
fn computation_type(a: DType, b: DType, div_or_mod: bool) -> Result<DType, &'static str> {
    use DType::*;
    let either = |d: DType| a == d || b == d;
    Ok(if either(F64) {
        F64
    } else if either(F32) {
        F32
    } else if either(F16) {
        if div_or_mod {
            F32
        } else {
            F16
        }
    } else if a == BF16 && b == BF16 {
        if div_or_mod {
            F32
        } else {
            BF16
        }
    } else if either(BF16) {
        F32
    } else if div_or_mod && a.is_signed_int() != b.is_signed_int() {
        return Err("different signedness");
    } else {
        integer_promote(a, b)
    })
}

/// What Triton gives for `a op b`: the result dtype, or the start of its error.
fn triton_result(op: &str, a: DType, b: DType) -> Result<DType, &'static str> {
    let ints = a.is_int() && b.is_int();
    match op {
        "&" | "|" | "^" if !ints => Err("is not defined on"),
        "&" | "|" | "^" => Ok(integer_promote(a, b)),
        "<<" | ">>" if !ints => Err("is not defined on"),
        // test_shift_op: the wider width, with the left operand's signedness.
        "<<" | ">>" => Ok(DType::promote_for_shift(a, b)),
        "//" if !ints => Err("needs integers"),
        "//" => computation_type(a, b, true),
        // Integer `/` truncates here (Triton's `//`), in Triton's integer dtype.
        "/" | "%" => computation_type(a, b, true),
        _ => computation_type(a, b, false),
    }
}

/// Traces `x op y` on two tiles of `a` and `b`: the result's dtype, or the trace error.
fn traced_result(op: &str, a: DType, b: DType) -> Result<DType, String> {
    let t = Tracer::begin("bin_op").unwrap();
    let offs = lang::arange(0, 4);
    let x = lang::load(ptr_param("x", a) + offs, NoArg, NoArg);
    let y = lang::load(ptr_param("y", b) + offs, NoArg, NoArg);
    let r: Tile = match op {
        "+" => x + y,
        "-" => x - y,
        "*" => x * y,
        "/" => x / y,
        "%" => x % y,
        "&" => x & y,
        "|" => x | y,
        "^" => x ^ y,
        "<<" => x << y,
        ">>" => x >> y,
        _ => lang::floordiv(x, y),
    };
    let d = r.dtype();
    t.finish().map(|_| d).map_err(|e| e.to_string())
}

#[test]
fn every_operator_computes_in_tritons_dtype() {
    let mut checked = 0;
    let dtypes = dtypes();
    assert_eq!(dtypes.len(), 12);
    for op in OPS {
        for &a in &dtypes {
            for &b in &dtypes {
                let got = traced_result(op, a, b);
                match (triton_result(op, a, b), &got) {
                    (Ok(want), Ok(d)) => assert_eq!(*d, want, "{a} {op} {b}"),
                    (Err(want), Err(e)) => assert!(e.contains(want), "{a} {op} {b}: {e}"),
                    (want, got) => panic!("{a} {op} {b}: Triton {want:?}, here {got:?}"),
                }
                checked += 1;
            }
        }
    }
    assert_eq!(checked, 11 * 12 * 12);
    // The rows the issue names, spelled out.
    let named: &[(&str, DType, DType, Result<DType, &str>)] = &[
        ("/", DType::F16, DType::F16, Ok(DType::F32)),
        ("%", DType::F16, DType::F16, Ok(DType::F32)),
        ("/", DType::BF16, DType::BF16, Ok(DType::F32)),
        ("+", DType::BF16, DType::I32, Ok(DType::F32)),
        ("+", DType::BF16, DType::F16, Ok(DType::F16)),
        ("+", DType::BF16, DType::BF16, Ok(DType::BF16)),
        ("/", DType::I8, DType::U8, Err("different signedness")),
        ("%", DType::U32, DType::I64, Err("different signedness")),
        (">>", DType::I8, DType::U8, Ok(DType::I8)),
        (">>", DType::I16, DType::U64, Ok(DType::I64)),
        (">>", DType::U8, DType::U32, Ok(DType::U32)),
    ];
    for (op, a, b, want) in named {
        assert_eq!(triton_result(op, *a, *b), *want, "{a} {op} {b}");
    }
}

/// Elements the value tests read and write.
trait Num: Element + Copy + std::fmt::Debug {
    fn from_f64(v: f64) -> Self;
    fn to_f64(self) -> f64;
}

macro_rules! num_as {
    ($($t:ty),*) => {$(
        impl Num for $t {
            fn from_f64(v: f64) -> Self { v as $t }
            fn to_f64(self) -> f64 { self as f64 }
        }
    )*};
}
num_as!(i8, i16, i32, i64, u8, u16, u32, u64, f32, f64);

impl Num for f16 {
    fn from_f64(v: f64) -> Self {
        f16::from_f64(v)
    }
    fn to_f64(self) -> f64 {
        f64::from(self)
    }
}

impl Num for bf16 {
    fn from_f64(v: f64) -> Self {
        bf16::from_f64(v)
    }
    fn to_f64(self) -> f64 {
        f64::from(self)
    }
}

#[kernel]
fn bin_values<X: Element, Y: Element>(z: Ptr<f64>, x: Ptr<X>, y: Ptr<Y>, #[constexpr] OP: u8) {
    let offs = arange(0, 4);
    let (a, b) = (load(x + offs), load(y + offs));
    let r = match OP {
        0 => a + b,
        1 => a / b,
        2 => a % b,
        3 => a >> b,
        4 => a << b,
        5 => floordiv(a, b),
        6 => maximum(a, b, propagate_nan = true),
        _ => minimum(a, b),
    };
    store(z + offs, r.to(DType::F64));
}

/// `x OP y` on every device, as f64.
fn run<X: Num, Y: Num>(op: u8, x: [f64; 4], y: [f64; 4]) -> Vec<Vec<f64>> {
    let xs: Array1<X> = x.iter().map(|v| X::from_f64(*v)).collect();
    let ys: Array1<Y> = y.iter().map(|v| Y::from_f64(*v)).collect();
    all_devices()
        .iter()
        .map(|d| {
            let mut z = Array1::<f64>::zeros(4);
            bin_values::launch::<X, Y>(d, 1, &mut z, &xs, &ys, op).unwrap();
            z.to_vec()
        })
        .collect()
}

fn same(got: &[Vec<f64>], want: &[f64], what: &str) {
    for (d, g) in got.iter().enumerate() {
        let ok = g
            .iter()
            .zip(want)
            .all(|(g, w)| g == w || (g.is_nan() && w.is_nan()));
        assert!(ok, "{what} on device {d}: got {g:?}, want {want:?}");
    }
}

#[test]
fn values_follow_tritons_rules_on_every_device() {
    let f32_of = |v: f64| v as f32;
    // f16 / f16 divides in f32 (test_bin_op's promote_to_fp32).
    let (x, y) = ([1.0, 2.0, 1.0, 5.0], [3.0, 3.0, 7.0, 9.0]);
    let want: Vec<f64> = x
        .iter()
        .zip(&y)
        .map(|(a, b)| (f32_of(*a) / f32_of(*b)) as f64)
        .collect();
    same(&run::<f16, f16>(1, x, y), &want, "f16 / f16");
    // f16 % f16 in f32, of the f16 inputs.
    let (x, y) = ([5.5, -7.0, 1.0, 3.0], [2.0, 3.0, 0.3, 1.5]);
    let h = |v: f64| f16::from_f64(v).to_f32();
    let want: Vec<f64> = x
        .iter()
        .zip(&y)
        .map(|(a, b)| (h(*a) % h(*b)) as f64)
        .collect();
    same(&run::<f16, f16>(2, x, y), &want, "f16 % f16");
    // bf16 + i32 is f32: 0.5 + 257 is 257.5 (bf16 has 8 significant bits).
    same(
        &run::<bf16, i32>(0, [0.5; 4], [257.0, 1025.0, 3.0, -257.0]),
        &[257.5, 1025.5, 3.5, -256.5],
        "bf16 + i32",
    );
    // bf16 + f16 is f16: 1 + 2^-11 rounds to 1 (ties to even).
    same(
        &run::<bf16, f16>(
            0,
            [1.0; 4],
            [2f64.powi(-11), 2f64.powi(-10), 0.5, -(2f64.powi(-11))],
        ),
        &[1.0, 1.0 + 2f64.powi(-10), 1.5, 1.0 - 2f64.powi(-11)],
        "bf16 + f16",
    );
    // i8 >> u8 shifts arithmetically (the left operand's signedness).
    same(
        &run::<i8, u8>(3, [-52.0, -128.0, 127.0, -1.0], [2.0, 7.0, 3.0, 0.0]),
        &[-13.0, -1.0, 15.0, -1.0],
        "i8 >> u8",
    );
    same(
        &run::<i16, u64>(3, [-1000.0, 1000.0, -1.0, 7.0], [3.0, 3.0, 40.0, 1.0]),
        &[-125.0, 125.0, -1.0, 3.0],
        "i16 >> u64",
    );
    same(
        &run::<u16, u8>(3, [65535.0, 256.0, 1.0, 40000.0], [15.0, 8.0, 1.0, 2.0]),
        &[1.0, 1.0, 0.0, 10000.0],
        "u16 >> u8",
    );
    same(
        &run::<i32, u32>(4, [1.0, -3.0, 5.0, 1.0], [4.0, 2.0, 0.0, 31.0]),
        &[16.0, -12.0, 5.0, i32::MIN as f64],
        "i32 << u32",
    );
    // `//` truncates toward zero (Triton's IEEE-style remainder carried to `//`).
    same(
        &run::<i32, i32>(5, [-7.0, 7.0, -8.0, 9.0], [2.0, -2.0, 3.0, 3.0]),
        &[-3.0, -3.0, -2.0, 3.0],
        "i32 // i32",
    );
    // maximum with propagate_nan: a NaN in either gives NaN; minimum without: the other.
    let nan = f64::NAN;
    same(
        &run::<f32, f32>(6, [nan, 1.0, 2.0, nan], [1.0, nan, 3.0, nan]),
        &[nan, nan, 3.0, nan],
        "maximum(propagate_nan = true)",
    );
    same(
        &run::<f32, f32>(7, [nan, 1.0, 2.0, nan], [1.0, nan, 3.0, nan]),
        &[1.0, 1.0, 2.0, nan],
        "minimum",
    );
}

#[test]
fn mixed_signedness_division_is_refused() {
    let (x, y) = (Array1::<i8>::ones(4), Array1::<u8>::ones(4));
    for d in all_devices() {
        let mut z = Array1::<f64>::zeros(4);
        let e = bin_values::launch::<i8, u8>(&d, 1, &mut z, &x, &y, 1).unwrap_err();
        assert!(e.to_string().contains("different signedness"), "{e}");
    }
}

#[kernel]
fn cast_values<X: Element, Z: Element>(z: Ptr<Z>, x: Ptr<X>) {
    let offs = arange(0, 16);
    store(z + offs, load(x + offs).to(Z::DTYPE));
}

/// The values test_cast converts from `a` to `b`: exact in `a`, in range for `b` (Triton
/// leaves out-of-range float-to-integer conversions undefined).
fn cast_inputs(a: DType, b: DType) -> Vec<f64> {
    let mut v = vec![0.0, 1.0, 3.0, 7.0, 100.0, 127.0];
    let signed = |d: DType| d.is_signed_int() || d.is_float();
    if signed(a) && signed(b) {
        v.extend([-1.0, -5.0, -100.0]);
    }
    if a.is_float() && b.is_int() {
        v.push(2.75);
        if b.is_signed_int() {
            v.push(-2.75);
        }
    }
    if a.is_float() && b.is_float() {
        v.extend([1.0 / 3.0, 1e-3, -2.5e4]);
    }
    if a.is_int() && b.is_int() && a.bits() > b.bits() {
        // Integer narrowing wraps.
        v.push(300.0);
        if a.is_signed_int() {
            v.push(-1.0);
        }
    }
    v.resize(16, 0.0);
    v
}

/// `v` (exact in `a`) converted to `b` as Triton converts: integers wrap, floats to
/// integers truncate toward zero, floats round to nearest even.
fn cast_reference(v: f64, b: DType) -> f64 {
    if b.is_int() {
        let t = v.trunc() as i128;
        let bits = b.bits();
        let wrapped = t.rem_euclid(1i128 << bits);
        let wrapped = if b.is_signed_int() && wrapped >= 1i128 << (bits - 1) {
            wrapped - (1i128 << bits)
        } else {
            wrapped
        };
        return wrapped as f64;
    }
    match b {
        DType::F16 => f16::from_f64(v).to_f64(),
        DType::BF16 => bf16::from_f64(v).to_f64(),
        DType::F32 => v as f32 as f64,
        _ => v,
    }
}

fn check_cast<X: Num, Z: Num>() {
    let (a, b) = (X::DTYPE, Z::DTYPE);
    let inputs = cast_inputs(a, b);
    let xs: Array1<X> = inputs.iter().map(|v| X::from_f64(*v)).collect();
    let want: Vec<f64> = xs.iter().map(|x| cast_reference(x.to_f64(), b)).collect();
    for d in all_devices() {
        let mut z = Array1::from_elem(16, Z::from_f64(0.0));
        cast_values::launch::<X, Z>(&d, 1, &mut z, &xs).unwrap();
        let got: Vec<f64> = z.iter().map(|v| v.to_f64()).collect();
        assert_eq!(got, want, "{a} -> {b} on {d:?} of {xs:?}");
    }
}

macro_rules! each_pair {
    ($($t:ty),*) => { each_pair!(@outer [$($t),*] $($t),*); };
    (@outer $all:tt $($a:ty),*) => { $( each_pair!(@inner $a $all); )* };
    (@inner $a:ty [$($b:ty),*]) => { $( check_cast::<$a, $b>(); )* };
}

#[test]
fn casts_between_every_pair_of_dtypes() {
    each_pair!(i8, i16, i32, i64, u8, u16, u32, u64, f16, bf16, f32, f64);
}
