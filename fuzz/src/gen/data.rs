//! Edge values: the constants and buffer contents the generator draws, per dtype.

use crate::Rng;
use half::{bf16, f16};
use tritium_dsl::ir::{Const, DType};

/// A float of `d`'s precision: the edges (±0, ±inf, NaN, the extremes, subnormals,
/// halves and integers near the precision limit) or an ordinary value.
pub fn float_value(d: DType, rng: &mut Rng) -> f64 {
    let (max, min_normal, min_sub) = match d {
        DType::F16 => (65504.0, 6.103515625e-5, 5.960464477539063e-8),
        DType::BF16 => (
            3.3895313892515355e38,
            1.1754943508222875e-38,
            9.183549615799121e-41,
        ),
        DType::F32 => (
            f32::MAX as f64,
            f32::MIN_POSITIVE as f64,
            f32::from_bits(1) as f64,
        ),
        DType::F8E4M3 | DType::F8E5M2 | DType::F8E4B15 => {
            let f = d.fp8_format().expect("fp8");
            (f.max(), f.decode(1 << f.man_bits), f.subnormal_step())
        }
        _ => (f64::MAX, f64::MIN_POSITIVE, f64::from_bits(1)),
    };
    let limit = crate::info::exact_int_limit(d);
    let v = match rng.below(20) {
        0 => 0.0,
        1 => -0.0,
        2 => f64::NAN,
        3 => f64::INFINITY,
        4 => f64::NEG_INFINITY,
        5 => max,
        6 => -max,
        7 => min_normal,
        8 => min_sub,
        9 => -min_sub * 3.0,
        10 => limit + 1.0,
        11 => 0.5,
        12 => -1.0,
        13 => 1.0,
        14 => rng.range(-8, 8) as f64 + 0.5,
        _ => {
            let m = (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
            let e = rng.range(-12, 12) as i32;
            let v = (m * 2.0 - 1.0) * 2f64.powi(e);
            if rng.chance(0.5) {
                v.round()
            } else {
                v
            }
        }
    };
    round_to(d, v)
}

/// `v` rounded to the precision of the float dtype `d` (NaN stays NaN).
pub fn round_to(d: DType, v: f64) -> f64 {
    match d {
        DType::F16 => f16::from_f64(v).to_f64(),
        DType::BF16 => bf16::from_f64(v).to_f64(),
        DType::F32 => v as f32 as f64,
        d => d.fp8_format().map_or(v, |f| f.round(v)),
    }
}

/// An integer of `d`'s range: the edges (0, ±1, the extremes, shift widths and just past
/// them) or an ordinary value.
pub fn int_value(d: DType, rng: &mut Rng) -> i128 {
    let bits = d.bits();
    let (lo, hi): (i128, i128) = if d.is_bool() {
        (0, 1)
    } else if d.is_signed_int() {
        (-(1i128 << (bits - 1)), (1i128 << (bits - 1)) - 1)
    } else {
        (0, (1i128 << bits) - 1)
    };
    let v = match rng.below(14) {
        0 => 0,
        1 => 1,
        2 => -1,
        3 => lo,
        4 => hi,
        5 => lo + 1,
        6 => hi - 1,
        7 => bits as i128,
        8 => bits as i128 + 1,
        9 => bits as i128 - 1,
        10 => 2,
        11 => rng.range(-16, 16) as i128,
        _ => {
            let raw = rng.next_u64() as i128;
            lo + raw.rem_euclid(hi - lo + 1)
        }
    };
    v.clamp(lo, hi)
}

/// A constant of dtype `d`: integers for integer dtypes and bools, floats for floats.
pub fn constant(d: DType, rng: &mut Rng) -> Const {
    if d.is_float() {
        Const::Float(float_value(d, rng))
    } else {
        Const::Int(int_value(d, rng))
    }
}

/// The little-endian bytes of one element of `d` holding `v` (an integer or a float).
pub fn element_bytes(d: DType, c: Const) -> Vec<u8> {
    match (d, c) {
        (DType::F16, Const::Float(v)) => f16::from_f64(v).to_bits().to_le_bytes().to_vec(),
        (DType::BF16, Const::Float(v)) => bf16::from_f64(v).to_bits().to_le_bytes().to_vec(),
        (DType::F32, Const::Float(v)) => (v as f32).to_le_bytes().to_vec(),
        (DType::F64, Const::Float(v)) => v.to_le_bytes().to_vec(),
        (DType::F8E4M3 | DType::F8E5M2 | DType::F8E4B15, Const::Float(v)) => {
            vec![d.fp8_format().expect("fp8").encode(v)]
        }
        (d, Const::Int(i)) => (i as u128).to_le_bytes()[..d.size_bytes()].to_vec(),
        (d, Const::Float(v)) => element_bytes(d, Const::Int(v as i128)),
    }
}

/// `len` elements of `d`: edge values, or integers of magnitude at most `bound` (floats).
/// A bounded float zero takes the sign of the last nonzero value before it (no draw of its
/// own), so that runs of -0 come up and exact sums of them are compared with their sign.
pub fn buffer(d: DType, len: usize, bound: Option<f64>, rng: &mut Rng) -> Vec<u8> {
    let mut out = Vec::with_capacity(len * d.size_bytes());
    let mut negative = false;
    for _ in 0..len {
        let c = match bound {
            Some(b) if d.is_float() => {
                let v = rng.range(-(b as i64), b as i64) as f64;
                if v != 0.0 {
                    negative = v < 0.0;
                }
                Const::Float(if v == 0.0 && negative { -0.0 } else { v })
            }
            _ => constant(d, rng),
        };
        out.extend(element_bytes(d, c));
    }
    out
}
