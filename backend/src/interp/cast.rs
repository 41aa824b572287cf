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
