//! Conversions between dtypes, as Rust `as` (float→int saturates, NaN→0), `!= 0` for
//! bool results and 0/1 from bools; constants take their result dtype the same way.

use super::numeric::{cast_f64, cast_int, wrap_signed, wrap_unsigned};
use super::value::Data;
use ndarray::{ArrayD, IxDyn};
use tritium_dsl::ir::{Const, DType};

/// Converts `x` (of any number dtype) to dtype `to`; `None` for pointers.
pub(crate) fn cast(x: &Data, to: DType) -> Option<Data> {
    Some(match x {
        Data::Float(a) => from_float(a, to),
        Data::Int(a) => from_int(a, to, |v| v as i128),
        Data::UInt(a) => from_int(a, to, |v| v as i128),
        Data::Bool(a) => from_int(a, to, |v| v as i128),
        Data::Ptr(_) => return None,
    })
}

/// Reads the bits of `x` (of dtype `from`) as dtype `to` of the same width. Floats are held
/// as f64: f32, f16 and bf16 values convert exactly, NaNs keep their payload as far as the
/// narrower format holds it (a signaling NaN comes back quiet, as hardware conversions make
/// it). `None` for pointers and bools.
pub(crate) fn bitcast(x: &Data, from: DType, to: DType) -> Option<Data> {
    let bits: ArrayD<u64> = match x {
        Data::Float(a) => a.mapv(|v| float_bits(from, v)),
        Data::Int(a) => a.mapv(|v| wrap_unsigned(v as u64, from.bits())),
        Data::UInt(a) => a.clone(),
        Data::Bool(_) | Data::Ptr(_) => return None,
    };
    Some(if to.is_float() {
        Data::Float(bits.mapv(|b| float_from_bits(to, b)))
    } else if to.is_signed_int() {
        Data::Int(bits.mapv(|b| wrap_signed(b as i64, to.bits())))
    } else if to.is_unsigned_int() {
        Data::UInt(bits)
    } else {
        return None;
    })
}

/// The IEEE bits of `v` in float dtype `d`.
pub(crate) fn float_bits(d: DType, v: f64) -> u64 {
    match d {
        DType::F64 => v.to_bits(),
        DType::F32 => (v as f32).to_bits() as u64,
        DType::F16 => half::f16::from_f64(v).to_bits() as u64,
        DType::BF16 => half::bf16::from_f64(v).to_bits() as u64,
        d => d.fp8_format().expect("a float dtype").encode(v) as u64,
    }
}

/// The value of the IEEE bits `b` of float dtype `d`.
pub(crate) fn float_from_bits(d: DType, b: u64) -> f64 {
    match d {
        DType::F64 => f64::from_bits(b),
        DType::F32 => f32::from_bits(b as u32) as f64,
        DType::F16 => half::f16::from_bits(b as u16).to_f64(),
        DType::BF16 => half::bf16::from_bits(b as u16).to_f64(),
        d => d.fp8_format().expect("a float dtype").decode(b as u8),
    }
}

fn from_float(a: &ArrayD<f64>, to: DType) -> Data {
    match to {
        DType::Bool => Data::Bool(a.mapv(|x| x != 0.0)),
        DType::I8 => Data::Int(a.mapv(|x| x as i8 as i64)),
        DType::I16 => Data::Int(a.mapv(|x| x as i16 as i64)),
        DType::I32 => Data::Int(a.mapv(|x| x as i32 as i64)),
        DType::I64 => Data::Int(a.mapv(|x| x as i64)),
        DType::U8 => Data::UInt(a.mapv(|x| x as u8 as u64)),
        DType::U16 => Data::UInt(a.mapv(|x| x as u16 as u64)),
        DType::U32 => Data::UInt(a.mapv(|x| x as u32 as u64)),
        DType::U64 => Data::UInt(a.mapv(|x| x as u64)),
        // Floats are held exactly, so widening is the identity and narrowing rounds once.
        DType::F64 => Data::Float(a.clone()),
        d => Data::Float(a.mapv(|x| cast_f64(d, x))),
    }
}

fn from_int<T: Copy>(a: &ArrayD<T>, to: DType, wide: impl Fn(T) -> i128) -> Data {
    let bits = to.bits();
    if to.is_float() {
        Data::Float(a.mapv(|v| cast_int(to, wide(v))))
    } else if to.is_signed_int() {
        // Two's-complement truncation of the exact value, then sign extension.
        Data::Int(a.mapv(|v| wrap_signed(wide(v) as i64, bits)))
    } else if to.is_unsigned_int() {
        Data::UInt(a.mapv(|v| wrap_unsigned(wide(v) as u64, bits)))
    } else {
        Data::Bool(a.mapv(|v| wide(v) != 0))
    }
}

/// A constant of dtype `d` splatted to `shape`. An integer constant wraps to the dtype;
/// a float constant meeting an integer dtype converts as a cast.
pub(crate) fn constant(c: Const, d: DType, shape: &[usize]) -> Data {
    let scalar = match c {
        Const::Int(i) => {
            let wide = ArrayD::from_elem(IxDyn(&[]), i as i64);
            // `as i64` keeps the low 64 bits, which is all any dtype keeps.
            if d.is_float() {
                Data::Float(ArrayD::from_elem(IxDyn(&[]), cast_int(d, i)))
            } else if d.is_bool() {
                Data::Bool(ArrayD::from_elem(IxDyn(&[]), i != 0))
            } else {
                from_int(&wide, d, |v| v as i128)
            }
        }
        Const::Float(f) => from_float(&ArrayD::from_elem(IxDyn(&[]), f), d),
    };
    scalar.splat(shape).unwrap_or(scalar)
}
