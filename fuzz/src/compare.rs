//! Comparing a device's buffers with the interpreter's.
//!
//! Every buffer is compared element by element in its dtype: bit for bit (all NaNs equal,
//! +0 and -0 different) unless what the kernel stores into it is approximate (see
//! [`crate::info`]), then within that many ulps. Buffers an unreliable value was stored
//! into are not compared (the generator never does that; a shrunk case may).

use crate::case::Case;
use crate::info::{analyze, Tol};
use half::{bf16, f16};
use tritium_dsl::ir::DType;

/// How each parameter's contents are compared (`None` for scalars).
pub fn tolerances(case: &Case) -> Vec<Option<Tol>> {
    let facts = analyze(&case.function, &case.memory());
    case.args
        .iter()
        .enumerate()
        .map(|(p, a)| match a {
            crate::case::Arg::Buffer { .. } => {
                Some(facts.stored.get(&p).map_or(Tol::Exact, |i| i.tol))
            }
            crate::case::Arg::Scalar(_) => None,
        })
        .collect()
}

/// The first difference between `got` and `want` (per parameter), described.
pub fn compare(
    case: &Case,
    tols: &[Option<Tol>],
    got: &[Vec<u8>],
    want: &[Vec<u8>],
) -> Result<(), String> {
    for (p, ((g, w), tol)) in got.iter().zip(want).zip(tols).enumerate() {
        let Some(tol) = tol else { continue };
        if *tol == Tol::Unreliable {
            continue;
        }
        let d = case
            .function
            .ty(case.function.params[p].value)
            .elem
            .pointee();
        let d = d.expect("a buffer parameter");
        let size = d.size_bytes();
        for (i, (a, b)) in g.chunks(size).zip(w.chunks(size)).enumerate() {
            if a == b {
                continue;
            }
            let (x, y) = (decode(d, a), decode(d, b));
            if !close(d, *tol, x, y) {
                return Err(format!(
                    "parameter {} ({d}) element {i}: got {}, want {} ({tol:?})",
                    case.function.params[p].name,
                    show(d, a),
                    show(d, b)
                ));
            }
        }
    }
    Ok(())
}

/// A float element as f64 (`None` for integers, which compare by bits).
fn decode(d: DType, b: &[u8]) -> Option<f64> {
    Some(match d {
        DType::F16 => f16::from_bits(u16::from_le_bytes([b[0], b[1]])).to_f64(),
        DType::BF16 => bf16::from_bits(u16::from_le_bytes([b[0], b[1]])).to_f64(),
        DType::F32 => f32::from_le_bytes(b.try_into().ok()?) as f64,
        DType::F64 => f64::from_le_bytes(b.try_into().ok()?),
        DType::F8E4M3 | DType::F8E5M2 | DType::F8E4B15 => d.fp8_format()?.decode(*b.first()?),
        _ => return None,
    })
}

fn show(d: DType, b: &[u8]) -> String {
    match decode(d, b) {
        Some(v) => format!("{v:e} ({})", hex(b)),
        None => {
            let mut w = [0u8; 16];
            w[..b.len()].copy_from_slice(b);
            let u = u128::from_le_bytes(w);
            if d.is_signed_int() {
                let shift = 128 - 8 * b.len() as u32;
                format!("{}", ((u << shift) as i128) >> shift)
            } else {
                format!("{u}")
            }
        }
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().rev().map(|x| format!("{x:02x}")).collect()
}

/// One unit in the last place of `d` at magnitude `x` (the smallest subnormal near 0).
fn ulp(d: DType, x: f64) -> f64 {
    let (mant, min_exp) = match d {
        DType::F16 => (10, -14),
        DType::BF16 => (7, -126),
        DType::F32 => (23, -126),
        DType::F8E4M3 | DType::F8E5M2 | DType::F8E4B15 => {
            let f = d.fp8_format().expect("fp8");
            (f.man_bits as i32, 1 - f.bias)
        }
        _ => (52, -1022),
    };
    let e = if x == 0.0 || !x.is_finite() {
        min_exp
    } else {
        (x.abs().log2().floor() as i32).max(min_exp)
    };
    2f64.powi(e - mant)
}

fn close(d: DType, tol: Tol, x: Option<f64>, y: Option<f64>) -> bool {
    let (Some(x), Some(y)) = (x, y) else {
        return false;
    };
    if x.is_nan() || y.is_nan() {
        return x.is_nan() && y.is_nan();
    }
    match tol {
        // Zeros of different signs differ: max/min order -0 below +0 on every target.
        Tol::Exact => x == y && x.is_sign_negative() == y.is_sign_negative(),
        Tol::Unreliable => true,
        Tol::Ulps(u) => {
            // f32 `exp2` on CUDA flushes results below f32's smallest normal to zero, as
            // Triton's `ex2.approx.ftz` (approximate values are compared only where stored
            // or rounded, never after arithmetic that could scale them back up).
            let flushed = |v: f64| v.abs() < f64::from(f32::MIN_POSITIVE);
            if x == y || (flushed(x) && flushed(y)) {
                return true;
            }
            let max = match d {
                DType::F16 => 65504.0,
                DType::BF16 => 3.3895313892515355e38,
                DType::F32 => f32::MAX as f64,
                DType::F8E4M3 | DType::F8E5M2 | DType::F8E4B15 => {
                    d.fp8_format().expect("fp8").max()
                }
                _ => f64::MAX,
            };
            // Near the largest finite value one device may round to infinity.
            if x.is_infinite() || y.is_infinite() {
                let finite = if x.is_infinite() { y } else { x };
                let inf = if x.is_infinite() { x } else { y };
                return finite.signum() == inf.signum()
                    && finite.abs() >= max - u as f64 * ulp(d, max);
            }
            (x - y).abs() <= u as f64 * ulp(d, x.abs().max(y.abs()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Approximate values agree within their ulps, and below f32's smallest normal with
    /// zero (CUDA's `exp2` flushes there); exact ones bit for bit.
    #[test]
    fn approximate_values_may_be_flushed_below_the_smallest_normal() {
        let normal = f64::from(f32::MIN_POSITIVE);
        let sub = normal / 8.0;
        let near = |x: f64, y: f64| close(DType::F32, Tol::Ulps(4), Some(x), Some(y));
        assert!(near(sub, 0.0));
        assert!(near(0.0, sub));
        assert!(!near(normal * 4.0, 0.0));
        assert!(near(1.0, 1.0 + f64::from(f32::EPSILON)));
        assert!(!near(1.0, 1.0 + 8.0 * f64::from(f32::EPSILON)));
        assert!(!close(DType::F32, Tol::Exact, Some(sub), Some(0.0)));
    }
}
