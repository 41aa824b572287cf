//! Reductions along one axis (the axis is removed).
//!
//! - Float sums: f64 sums sequentially in f64; **f32 sums accumulate in f64** and round to
//!   f32 once (a more accurate reference than the compiled code's reassociated f32 sum,
//!   which tests compare within a tolerance); f16/bf16 sums accumulate in f32, in index
//!   order, and round to the half type once at the end. Every float sum folds from -0,
//!   addition's identity (`-0 + x` is `x` for every `x`, +0 included), so a lane of -0s
//!   sums to -0, as Triton's folds from the lane's first element give.
//! - Integer sums wrap at the dtype's width; a bool sum is the one-bit wrapping sum (xor).
//! - Xor folds integers (sign- or zero-extended in the i64/u64 lanes, so the fold stays
//!   extended) and bools from 0.
//! - Float max/min are maximumNumber/minimumNumber folds (-0 < +0): NaN is ignored
//!   unless the whole lane is NaN, which gives NaN. Bool max is "any", min is "all".
//! - argmax/argmin give the i32 index of the **first** maximum/minimum; NaN lanes are
//!   ignored, and a lane that is all NaN gives index 0.

use super::numeric::{round_from_f32, wrap_signed, wrap_unsigned};
use super::value::Data;
use crate::float_order::MaxNumber;
use ndarray::{ArrayD, ArrayView1, Axis};
use tritium_dsl::ir::{DType, ReduceOp};

/// Reduces `x` (of dtype `d`) along `axis` with `op`.
pub(crate) fn reduce(op: ReduceOp, d: DType, x: &Data, axis: usize) -> Result<Data, String> {
    if axis >= x.shape().len() {
        return Err(format!(
            "reduce axis {axis} out of range for shape {:?}",
            x.shape()
        ));
    }
    let ax = Axis(axis);
    if let ReduceOp::ArgMax | ReduceOp::ArgMin = op {
        let max = op == ReduceOp::ArgMax;
        return Ok(Data::Int(match x {
            Data::Float(a) => arg(a, ax, max, |v: &f64| v.is_nan()),
            Data::Int(a) => arg(a, ax, max, |_| false),
            Data::UInt(a) => arg(a, ax, max, |_| false),
            Data::Bool(a) => arg(a, ax, max, |_| false),
            Data::Ptr(_) => return Err("cannot reduce pointers".into()),
        }));
    }
    Ok(match x {
        Data::Float(_) if op == ReduceOp::Xor => return Err("xor of floats".into()),
        Data::Float(a) => Data::Float(match op {
            ReduceOp::Sum => float_sum(a, ax, d),
            ReduceOp::Max => a.map_axis(ax, |l| l.fold(f64::NAN, |m, &v| m.max_number(v))),
            _ => a.map_axis(ax, |l| l.fold(f64::NAN, |m, &v| m.min_number(v))),
        }),
        Data::Int(a) => Data::Int(match op {
            ReduceOp::Sum => {
                let bits = d.bits();
                a.map_axis(ax, |l| {
                    wrap_signed(l.fold(0i64, |s, &v| s.wrapping_add(v)), bits)
                })
            }
            ReduceOp::Max => a.map_axis(ax, |l| l.fold(i64::MIN, |m, &v| m.max(v))),
            ReduceOp::Xor => a.map_axis(ax, |l| l.fold(0, |s, &v| s ^ v)),
            _ => a.map_axis(ax, |l| l.fold(i64::MAX, |m, &v| m.min(v))),
        }),
        Data::UInt(a) => Data::UInt(match op {
            ReduceOp::Sum => {
                let bits = d.bits();
                a.map_axis(ax, |l| {
                    wrap_unsigned(l.fold(0u64, |s, &v| s.wrapping_add(v)), bits)
                })
            }
            ReduceOp::Max => a.map_axis(ax, |l| l.fold(0, |m, &v| m.max(v))),
            ReduceOp::Xor => a.map_axis(ax, |l| l.fold(0, |s, &v| s ^ v)),
            _ => a.map_axis(ax, |l| l.fold(u64::MAX, |m, &v| m.min(v))),
        }),
        Data::Bool(a) => Data::Bool(match op {
            ReduceOp::Sum | ReduceOp::Xor => a.map_axis(ax, |l| l.fold(false, |s, &v| s ^ v)),
            ReduceOp::Max => a.map_axis(ax, |l| l.iter().any(|&v| v)),
            _ => a.map_axis(ax, |l| l.iter().all(|&v| v)),
        }),
        Data::Ptr(_) => return Err("cannot reduce pointers".into()),
    })
}

fn float_sum(a: &ArrayD<f64>, ax: Axis, d: DType) -> ArrayD<f64> {
    match d {
        d if d.is_narrow_float() => a.map_axis(ax, |l| {
            round_from_f32(d, l.fold(-0f32, |s, &v| s + v as f32))
        }),
        DType::F32 => a.map_axis(ax, |l| l.fold(-0f64, |s, &v| s + v) as f32 as f64),
        _ => a.map_axis(ax, |l| l.fold(-0f64, |s, &v| s + v)),
    }
}

/// Index of the first best element of every lane, skipping `skip`ped ones (0 if none).
fn arg<T: Copy + PartialOrd>(
    a: &ArrayD<T>,
    ax: Axis,
    max: bool,
    skip: impl Fn(&T) -> bool,
) -> ArrayD<i64> {
    a.map_axis(ax, |lane: ArrayView1<T>| {
        let mut best: Option<(usize, T)> = None;
        for (i, v) in lane.iter().enumerate() {
            if skip(v) {
                continue;
            }
            let better = match best {
                None => true,
                Some((_, b)) => (max && *v > b) || (!max && *v < b),
            };
            if better {
                best = Some((i, *v));
            }
        }
        // Lanes are tile dims, far below 2^31: the index fits the i32 result.
        best.map_or(0, |(i, _)| i as i64)
    })
}
