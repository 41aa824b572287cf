//! Elementwise ops over whole arrays: each op picks its kernel once, then runs it with
//! `Zip`/`mapv` over all lanes.

use super::numeric::{round_arith, round_from_f32, wrap_signed_all, wrap_unsigned_all};
use super::value::Data;
use crate::float_order::MaxNumber;
use ndarray::{ArrayD, Zip};
use tritium_dsl::ir::{BinOp, CmpPred, DType, UnOp};

/// Why an op could not be evaluated on the values it got (the verifier rules this out).
pub(crate) type OpResult = Result<Data, String>;

fn zip2<A: Copy, B: Copy, R>(x: &ArrayD<A>, y: &ArrayD<B>, f: impl Fn(A, B) -> R) -> ArrayD<R> {
    Zip::from(x).and(y).map_collect(|&a, &b| f(a, b))
}

fn mismatch(what: &str, d: DType) -> String {
    format!("`{what}` got operands that do not fit dtype {d}")
}

/// `a op b` for operands of dtype `d` and equal shapes.
pub(crate) fn binary(op: BinOp, d: DType, a: &Data, b: &Data) -> OpResult {
    if a.shape() != b.shape() {
        return Err(format!(
            "`{}` operands have shapes {:?} and {:?}",
            op.name(),
            a.shape(),
            b.shape()
        ));
    }
    match (a, b) {
        (Data::Float(x), Data::Float(y)) => float_binary(op, d, x, y),
        (Data::Int(x), Data::Int(y)) => int_binary(op, d, x, y),
        (Data::UInt(x), Data::UInt(y)) => uint_binary(op, d, x, y),
        (Data::Bool(x), Data::Bool(y)) => bool_binary(op, x, y),
        _ => Err(mismatch(op.name(), d)),
    }
}

fn float_binary(op: BinOp, d: DType, x: &ArrayD<f64>, y: &ArrayD<f64>) -> OpResult {
    let mut r = match op {
        BinOp::Add => zip2(x, y, |a, b| a + b),
        BinOp::Sub => zip2(x, y, |a, b| a - b),
        BinOp::Mul => zip2(x, y, |a, b| a * b),
        BinOp::Div => zip2(x, y, |a, b| a / b),
        // fmod is exact, so computing it on the wide values equals computing it in `d`.
        BinOp::Rem => zip2(x, y, |a, b| a % b),
        // maximumNumber/minimumNumber: a NaN operand is ignored, -0 < +0.
        BinOp::Max => zip2(x, y, f64::max_number),
        BinOp::Min => zip2(x, y, f64::min_number),
        _ => return Err(mismatch(op.name(), d)),
    };
    round_arith(d, &mut r);
    Ok(Data::Float(r))
}

/// The shift amount: taken modulo the bit width (as two's complement, so `-1` is `bits-1`).
fn shift_amount(v: u64, bits: u32) -> u32 {
    (v & (bits as u64 - 1)) as u32
}

fn int_binary(op: BinOp, d: DType, x: &ArrayD<i64>, y: &ArrayD<i64>) -> OpResult {
    let bits = d.bits();
    // The values are sign-extended, so i64 arithmetic followed by wrapping to `bits` is
    // exact for every op below (`MIN / -1` overflows the width and wraps back to MIN).
    let mut r = match op {
        BinOp::Add => zip2(x, y, i64::wrapping_add),
        BinOp::Sub => zip2(x, y, i64::wrapping_sub),
        BinOp::Mul => zip2(x, y, i64::wrapping_mul),
        BinOp::Div => zip2(x, y, |a, b| if b == 0 { 0 } else { a.wrapping_div(b) }),
        BinOp::Rem => zip2(x, y, |a, b| if b == 0 { 0 } else { a.wrapping_rem(b) }),
        BinOp::And => zip2(x, y, |a, b| a & b),
        BinOp::Or => zip2(x, y, |a, b| a | b),
        BinOp::Xor => zip2(x, y, |a, b| a ^ b),
        BinOp::Shl => zip2(x, y, |a, b| a.wrapping_shl(shift_amount(b as u64, bits))),
        // Arithmetic: the sign-extended value shifts in copies of the sign bit.
        BinOp::Shr => zip2(x, y, |a, b| a >> shift_amount(b as u64, bits)),
        BinOp::Max => zip2(x, y, i64::max),
        BinOp::Min => zip2(x, y, i64::min),
    };
    wrap_signed_all(d, &mut r);
    Ok(Data::Int(r))
}

fn uint_binary(op: BinOp, d: DType, x: &ArrayD<u64>, y: &ArrayD<u64>) -> OpResult {
    let bits = d.bits();
    let mut r = match op {
        BinOp::Add => zip2(x, y, u64::wrapping_add),
        BinOp::Sub => zip2(x, y, u64::wrapping_sub),
        BinOp::Mul => zip2(x, y, u64::wrapping_mul),
        BinOp::Div => zip2(x, y, |a, b| a.checked_div(b).unwrap_or(0)),
        BinOp::Rem => zip2(x, y, |a, b| a.checked_rem(b).unwrap_or(0)),
        BinOp::And => zip2(x, y, |a, b| a & b),
        BinOp::Or => zip2(x, y, |a, b| a | b),
        BinOp::Xor => zip2(x, y, |a, b| a ^ b),
        BinOp::Shl => zip2(x, y, |a, b| a.wrapping_shl(shift_amount(b, bits))),
        BinOp::Shr => zip2(x, y, |a, b| a >> shift_amount(b, bits)),
        BinOp::Max => zip2(x, y, u64::max),
        BinOp::Min => zip2(x, y, u64::min),
    };
    wrap_unsigned_all(d, &mut r);
    Ok(Data::UInt(r))
}

fn bool_binary(op: BinOp, x: &ArrayD<bool>, y: &ArrayD<bool>) -> OpResult {
    Ok(Data::Bool(match op {
        BinOp::And => zip2(x, y, |a, b| a & b),
        BinOp::Or => zip2(x, y, |a, b| a | b),
        BinOp::Xor => zip2(x, y, |a, b| a ^ b),
        _ => return Err(mismatch(op.name(), DType::Bool)),
    }))
}

/// `op x` for `x` of dtype `d`.
pub(crate) fn unary(op: UnOp, d: DType, x: &Data) -> OpResult {
    match x {
        Data::Float(a) => float_unary(op, d, a),
        Data::Int(a) => {
            let mut r = match op {
                UnOp::Neg => a.mapv(i64::wrapping_neg),
                UnOp::Not => a.mapv(|v| !v),
                UnOp::Abs => a.mapv(i64::wrapping_abs),
                _ => return Err(mismatch(op.name(), d)),
            };
            wrap_signed_all(d, &mut r);
            Ok(Data::Int(r))
        }
        Data::UInt(a) => {
            let mut r = match op {
                UnOp::Neg => a.mapv(u64::wrapping_neg),
                UnOp::Not => a.mapv(|v| !v),
                UnOp::Abs => a.clone(),
                _ => return Err(mismatch(op.name(), d)),
            };
            wrap_unsigned_all(d, &mut r);
            Ok(Data::UInt(r))
        }
        // On one bit, `-x == x` and `|x| == x`.
        Data::Bool(a) => match op {
            UnOp::Not => Ok(Data::Bool(a.mapv(|v| !v))),
            UnOp::Neg | UnOp::Abs => Ok(Data::Bool(a.clone())),
            _ => Err(mismatch(op.name(), d)),
        },
        Data::Ptr(_) => Err(format!("`{}` applied to pointers", op.name())),
    }
}

fn float_unary(op: UnOp, d: DType, a: &ArrayD<f64>) -> OpResult {
    // Exact ops need no rounding.
    match op {
        UnOp::Neg => return Ok(Data::Float(a.mapv(|v| -v))),
        UnOp::Abs => return Ok(Data::Float(a.mapv(f64::abs))),
        UnOp::Trunc => return Ok(Data::Float(a.mapv(f64::trunc))),
        UnOp::Not => return Err(mismatch("not", d)),
        _ => {}
    }
    // Exact too, except that an integer past the largest value of a format whose largest
    // value is not an integer (fp8e4b15's 1.75 rounds to 2) saturates back to it.
    let to_integer: Option<fn(f64) -> f64> = match op {
        UnOp::Floor => Some(f64::floor),
        UnOp::Ceil => Some(f64::ceil),
        UnOp::Round => Some(f64::round),
        UnOp::Rint => Some(f64::round_ties_even),
        _ => None,
    };
    if let Some(f) = to_integer {
        let mut r = a.mapv(f);
        round_arith(d, &mut r);
        return Ok(Data::Float(r));
    }
    if d == DType::F64 {
        let f: fn(f64) -> f64 = match op {
            UnOp::Exp => f64::exp,
            UnOp::Exp2 => f64::exp2,
            UnOp::Log => f64::ln,
            UnOp::Log2 => f64::log2,
            UnOp::Sqrt => f64::sqrt,
            UnOp::Rsqrt => |v| 1.0 / v.sqrt(),
            UnOp::Sin => f64::sin,
            UnOp::Cos => f64::cos,
            _ => return Err(mismatch(op.name(), d)),
        };
        return Ok(Data::Float(a.mapv(f)));
    }
    // f32, and f16/bf16 which are computed in f32: use the f32 functions, then round.
    let f: fn(f32) -> f32 = match op {
        UnOp::Exp => f32::exp,
        UnOp::Exp2 => f32::exp2,
        UnOp::Log => f32::ln,
        UnOp::Log2 => f32::log2,
        UnOp::Sqrt => f32::sqrt,
        UnOp::Rsqrt => |v| 1.0 / v.sqrt(),
        UnOp::Sin => f32::sin,
        UnOp::Cos => f32::cos,
        _ => return Err(mismatch(op.name(), d)),
    };
    Ok(Data::Float(a.mapv(|v| round_from_f32(d, f(v as f32)))))
}

fn compare<T: PartialOrd + Copy>(p: CmpPred, x: &ArrayD<T>, y: &ArrayD<T>) -> ArrayD<bool> {
    match p {
        CmpPred::Eq => zip2(x, y, |a, b| a == b),
        CmpPred::Ne => zip2(x, y, |a, b| a != b),
        CmpPred::Lt => zip2(x, y, |a, b| a < b),
        CmpPred::Le => zip2(x, y, |a, b| a <= b),
        CmpPred::Gt => zip2(x, y, |a, b| a > b),
        CmpPred::Ge => zip2(x, y, |a, b| a >= b),
    }
}

/// Elementwise comparison (IEEE for floats: NaN compares unequal to everything).
pub(crate) fn cmp(p: CmpPred, a: &Data, b: &Data) -> OpResult {
    if a.shape() != b.shape() {
        return Err(format!(
            "comparison operands have shapes {:?} and {:?}",
            a.shape(),
            b.shape()
        ));
    }
    Ok(Data::Bool(match (a, b) {
        (Data::Float(x), Data::Float(y)) => compare(p, x, y),
        (Data::Int(x), Data::Int(y)) => compare(p, x, y),
        (Data::UInt(x), Data::UInt(y)) => compare(p, x, y),
        (Data::Bool(x), Data::Bool(y)) => compare(p, x, y),
        (Data::Ptr(x), Data::Ptr(y)) => compare(p, x, y),
        _ => return Err("comparison operands have different dtypes".into()),
    }))
}

fn pick<T: Copy>(c: &ArrayD<bool>, x: &ArrayD<T>, y: &ArrayD<T>) -> ArrayD<T> {
    Zip::from(c)
        .and(x)
        .and(y)
        .map_collect(|&c, &a, &b| if c { a } else { b })
}

/// `c ? a : b` elementwise.
pub(crate) fn select(c: &Data, a: &Data, b: &Data) -> OpResult {
    let Data::Bool(c) = c else {
        return Err("select condition is not bool".into());
    };
    if c.shape() != a.shape() || a.shape() != b.shape() {
        return Err("select operands have different shapes".into());
    }
    Ok(match (a, b) {
        (Data::Float(x), Data::Float(y)) => Data::Float(pick(c, x, y)),
        (Data::Int(x), Data::Int(y)) => Data::Int(pick(c, x, y)),
        (Data::UInt(x), Data::UInt(y)) => Data::UInt(pick(c, x, y)),
        (Data::Bool(x), Data::Bool(y)) => Data::Bool(pick(c, x, y)),
        (Data::Ptr(x), Data::Ptr(y)) => Data::Ptr(pick(c, x, y)),
        _ => return Err("select operands have different dtypes".into()),
    })
}

/// `a * b + c` with one rounding for f32 and f64; f16/bf16 are fused in f32, then rounded.
pub(crate) fn fma(d: DType, a: &Data, b: &Data, c: &Data) -> OpResult {
    let (Data::Float(x), Data::Float(y), Data::Float(z)) = (a, b, c) else {
        return Err(mismatch("fma", d));
    };
    if x.shape() != y.shape() || y.shape() != z.shape() {
        return Err("fma operands have different shapes".into());
    }
    let r = if d == DType::F64 {
        Zip::from(x)
            .and(y)
            .and(z)
            .map_collect(|&a, &b, &c| a.mul_add(b, c))
    } else {
        Zip::from(x)
            .and(y)
            .and(z)
            .map_collect(|&a, &b, &c| round_from_f32(d, (a as f32).mul_add(b as f32, c as f32)))
    };
    Ok(Data::Float(r))
}

/// Pointers plus element offsets: `p + off * size` bytes, wrapping (an address that wraps
/// is caught when it is accessed).
pub(crate) fn add_ptr(p: &Data, off: &Data, size: usize) -> OpResult {
    let Data::Ptr(p) = p else {
        return Err("addptr needs pointers".into());
    };
    if p.shape() != off.shape() {
        return Err("addptr operands have different shapes".into());
    }
    Ok(Data::Ptr(match off {
        Data::Int(o) => zip2(p, o, |p, o| offset_address(p, o, size)),
        // The offset's 64 bits as the compiled code reads them.
        Data::UInt(o) => zip2(p, o, |p, o| offset_address(p, o as i64, size)),
        _ => return Err("addptr offsets must be integers".into()),
    }))
}

/// An address no buffer holds: where an `addptr` that would wrap around the address space
/// goes, and stays (as `llvm::Emit::checked_offset` computes in checked mode).
pub(crate) const WRAPPED_ADDRESS: usize = 1 << 63;

/// `p + off` elements of `size` bytes, or [`WRAPPED_ADDRESS`] when the byte offset or the
/// sum leaves i64, or `p` is already past 2^63.
fn offset_address(p: usize, off: i64, size: usize) -> usize {
    let sum = off
        .checked_mul(size as i64)
        .and_then(|bytes| (p as i64).checked_add(bytes));
    match sum {
        Some(a) if a >= 0 && (p as i64) >= 0 => a as usize,
        _ => WRAPPED_ADDRESS,
    }
}
