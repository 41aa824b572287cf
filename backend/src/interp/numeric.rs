//! Dtype semantics on the wide representations: rounding floats to their dtype and
//! wrapping integers to their width.

use half::{bf16, f16};
use ndarray::ArrayD;
use tritium_dsl::ir::DType;

/// Rounds the results of an arithmetic op to dtype `d`, in place.
///
/// f16, bf16 and the fp8s are computed in f32 and rounded after every op, as the compiled code does:
/// the exact result is first rounded to f32, then to the half type. For `+ - * /` and
/// `sqrt` of f32 operands, computing in f64 and rounding once to f32 gives the correctly
/// rounded f32 result (f64 has more than `2 * 24 + 2` bits), so f64 arithmetic followed by
/// this rounding reproduces f32 arithmetic exactly.
pub(crate) fn round_arith(d: DType, a: &mut ArrayD<f64>) {
    if d.is_float() && d != DType::F64 {
        a.mapv_inplace(|x| round_from_f32(d, x as f32));
    }
}

/// Rounds one f32 result to dtype `d` (identity for f32; f16, bf16 and fp8 round to nearest even).
pub(crate) fn round_from_f32(d: DType, x: f32) -> f64 {
    match d {
        DType::F16 => f16::from_f32(x).to_f64(),
        DType::BF16 => bf16::from_f32(x).to_f64(),
        d => d.fp8_format().map_or(x as f64, |f| f.round(x as f64)),
    }
}

/// Converts an f64 to dtype `d` with one correct rounding (a cast, as LLVM's `fptrunc`).
///
/// `half`'s own f64 conversions ignore the low mantissa bits when rounding, so f16/bf16
/// go through f32 with round-to-odd, which makes the second rounding exact.
pub(crate) fn cast_f64(d: DType, x: f64) -> f64 {
    match d {
        DType::F32 => x as f32 as f64,
        DType::F16 => f16::from_f32(f64_to_f32_odd(x)).to_f64(),
        DType::BF16 => bf16::from_f32(f64_to_f32_odd(x)).to_f64(),
        d => d.fp8_format().map_or(x, |f| f.round(x)),
    }
}

/// Converts an integer to float dtype `d` with one correct rounding (as Rust `as`).
pub(crate) fn cast_int(d: DType, v: i128) -> f64 {
    match d {
        DType::F64 => v as f64,
        DType::F32 => v as f32 as f64,
        DType::F16 => f16::from_f32(int_to_f32_odd(v)).to_f64(),
        DType::BF16 => bf16::from_f32(int_to_f32_odd(v)).to_f64(),
        d => d.fp8_format().map_or(v as f64, |f| f.round(v as f64)),
    }
}

/// `x` rounded to f32 with round-to-odd: when inexact, the neighbour with an odd last bit.
fn f64_to_f32_odd(x: f64) -> f32 {
    let r = x as f32;
    if !r.is_finite() || r as f64 == x || r.to_bits() & 1 == 1 {
        return r;
    }
    // `r` is even and inexact, so the odd neighbour on `x`'s side is one step away.
    let up = (r as f64).abs() < x.abs();
    f32::from_bits(if up { r.to_bits() + 1 } else { r.to_bits() - 1 })
}

/// An integer rounded to f32 with round-to-odd.
fn int_to_f32_odd(v: i128) -> f32 {
    let r = v as f32;
    if r as i128 == v || r.to_bits() & 1 == 1 {
        return r;
    }
    let up = (r as i128).unsigned_abs() < v.unsigned_abs();
    f32::from_bits(if up { r.to_bits() + 1 } else { r.to_bits() - 1 })
}

/// Sign-extends the low `bits` of `v` (the value of a signed integer of that width).
pub(crate) fn wrap_signed(v: i64, bits: u32) -> i64 {
    if bits >= 64 {
        v
    } else {
        let s = 64 - bits;
        (v << s) >> s
    }
}

/// The low `bits` of `v` (the value of an unsigned integer of that width).
pub(crate) fn wrap_unsigned(v: u64, bits: u32) -> u64 {
    if bits >= 64 {
        v
    } else {
        v & ((1u64 << bits) - 1)
    }
}

/// Wraps every element of a signed integer array to the width of `d`.
pub(crate) fn wrap_signed_all(d: DType, a: &mut ArrayD<i64>) {
    let bits = d.bits();
    if bits < 64 {
        a.mapv_inplace(|v| wrap_signed(v, bits));
    }
}

/// Wraps every element of an unsigned integer array to the width of `d`.
pub(crate) fn wrap_unsigned_all(d: DType, a: &mut ArrayD<u64>) {
    let bits = d.bits();
    if bits < 64 {
        a.mapv_inplace(|v| wrap_unsigned(v, bits));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn casts_round_once() {
        // Halfway between two f16 values in the top bits, but above it in the low bits of
        // the f64 mantissa: a correct rounding goes up.
        let x = 1.0 + 2f64.powi(-11) + 2f64.powi(-40);
        assert_eq!(cast_f64(DType::F16, x), 1.0 + 2f64.powi(-10));
        assert_eq!(cast_f64(DType::F16, 1.0 + 2f64.powi(-11)), 1.0);
        assert_eq!(cast_int(DType::F16, 70000), f64::INFINITY);
        assert_eq!(
            cast_int(DType::BF16, (1 << 40) + (1 << 32) + 1),
            ((1i64 << 40) + (1 << 33)) as f64
        );
        assert_eq!(wrap_signed(0x80, 8), -128);
        assert_eq!(wrap_unsigned(u64::MAX, 16), 0xffff);
    }
}
