//! The 8-bit float formats (Triton's `float8e4nv` and `float8e5`, OCP's E4M3FN and E5M2):
//! their bits and values, and the one rounding every backend implements.
//!
//! Conversions to fp8 round to nearest even; finite values beyond the largest one saturate
//! to it (as Triton's `cvt.rn.satfinite` on GPUs), so does infinity in E4M3 (which has
//! none), while E5M2 keeps infinities; every NaN becomes the format's canonical, positive
//! NaN (a NaN's sign and payload are not kept: a bitcast of a NaN byte reads the canonical
//! one, as for f16 and bf16 every fp8 computes in f32). These functions are the reference: the interpreter calls them, and the LLVM code
//! of `backend::llvm::fp8` computes the same bits.

/// An 8-bit float format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fp8Format {
    /// Exponent bits.
    pub exp_bits: u32,
    /// Mantissa bits.
    pub man_bits: u32,
    /// Exponent bias.
    pub bias: i32,
    /// True when the all-ones exponent holds infinities and NaNs (E5M2); false when only
    /// the all-ones pattern is NaN (E4M3FN).
    pub ieee: bool,
}

/// E4M3FN: 4 exponent bits (bias 7), 3 mantissa bits, no infinities, NaN `S.1111.111`,
/// largest value 448.
pub const E4M3: Fp8Format = Fp8Format {
    exp_bits: 4,
    man_bits: 3,
    bias: 7,
    ieee: false,
};

/// E5M2: 5 exponent bits (bias 15), 2 mantissa bits, IEEE infinities and NaNs, largest
/// value 57344.
pub const E5M2: Fp8Format = Fp8Format {
    exp_bits: 5,
    man_bits: 2,
    bias: 15,
    ieee: true,
};

/// E4M3 with bias 15 (Triton's `float8e4b15`, cheap to convert from f16 in software): no
/// infinities, NaN `S.1111.111`, largest value 1.75.
pub const E4B15: Fp8Format = Fp8Format {
    exp_bits: 4,
    man_bits: 3,
    bias: 15,
    ieee: false,
};

impl Fp8Format {
    /// The largest finite value's bits (without sign).
    pub fn max_bits(self) -> u8 {
        if self.ieee {
            // Exponent all ones is special: the one below, mantissa all ones.
            (((1u32 << self.exp_bits) - 2) << self.man_bits | ((1 << self.man_bits) - 1)) as u8
        } else {
            0x7e
        }
    }

    /// The largest finite value.
    pub fn max(self) -> f64 {
        self.decode(self.max_bits())
    }

    /// The canonical NaN's bits (without sign).
    pub fn nan_bits(self) -> u8 {
        if self.ieee {
            // Quiet: the mantissa's top bit set.
            (0x7f >> self.man_bits << self.man_bits) as u8 | (1 << (self.man_bits - 1))
        } else {
            0x7f
        }
    }

    /// Infinity's bits (without sign), where the format has one.
    pub fn inf_bits(self) -> Option<u8> {
        self.ieee
            .then_some((0x7f >> self.man_bits << self.man_bits) as u8)
    }

    /// The distance between subnormals: `2^(1 − bias − man_bits)`.
    pub fn subnormal_step(self) -> f64 {
        2f64.powi(1 - self.bias - self.man_bits as i32)
    }

    /// The value of `bits` (exact in f32 and f64).
    pub fn decode(self, bits: u8) -> f64 {
        let sign = if bits & 0x80 != 0 { -1.0 } else { 1.0 };
        let mag = bits & 0x7f;
        let e = i32::from(mag >> self.man_bits);
        let m = f64::from(mag & ((1 << self.man_bits) - 1));
        let all_ones = (1 << self.exp_bits) - 1;
        if self.ieee && e == all_ones {
            return if m == 0.0 {
                sign * f64::INFINITY
            } else {
                f64::NAN
            };
        }
        if !self.ieee && mag == 0x7f {
            return f64::NAN;
        }
        if e == 0 {
            return sign * m * self.subnormal_step();
        }
        let scale = f64::from(1u32 << self.man_bits);
        sign * (1.0 + m / scale) * 2f64.powi(e - self.bias)
    }

    /// `x` rounded to this format, as bits (see the module docs).
    pub fn encode(self, x: f64) -> u8 {
        if x.is_nan() {
            return self.nan_bits();
        }
        let sign = if x.is_sign_negative() { 0x80u8 } else { 0 };
        let a = x.abs();
        if a.is_infinite() {
            return sign | self.inf_bits().unwrap_or(self.max_bits());
        }
        if a >= self.max() {
            return sign | self.max_bits();
        }
        let min_normal = 2f64.powi(1 - self.bias);
        if a < min_normal {
            // A multiple of the subnormal step; 2^man_bits steps is the smallest normal,
            // whose bits are the same number.
            let q = (a / self.subnormal_step()).round_ties_even();
            return sign | q as u8;
        }
        let e = a.log2().floor() as i32;
        // log2 may be off by one next to powers of two.
        let e = if 2f64.powi(e) > a {
            e - 1
        } else if 2f64.powi(e + 1) <= a {
            e + 1
        } else {
            e
        };
        let scale = f64::from(1u32 << self.man_bits);
        let mut q = (a / 2f64.powi(e) * scale).round_ties_even() as u32;
        let mut e = e;
        if q == 2 * (1 << self.man_bits) {
            q = 1 << self.man_bits;
            e += 1;
        }
        let bits = (((e + self.bias) as u32) << self.man_bits) | (q - (1 << self.man_bits));
        sign | (bits as u8).min(self.max_bits())
    }

    /// `x` rounded to this format (its value).
    pub fn round(self, x: f64) -> f64 {
        self.decode(self.encode(x))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_values() {
        let table: &[(Fp8Format, u8, f64)] = &[
            (E4M3, 0x00, 0.0),
            (E4M3, 0x38, 1.0),
            (E4M3, 0x7e, 448.0),
            (E4M3, 0xfe, -448.0),
            (E4M3, 0x01, 2f64.powi(-9)),
            (E4M3, 0x08, 2f64.powi(-6)),
            (E5M2, 0x3c, 1.0),
            (E5M2, 0x7b, 57344.0),
            (E5M2, 0x01, 2f64.powi(-16)),
            (E5M2, 0x7c, f64::INFINITY),
            (E5M2, 0xfc, f64::NEG_INFINITY),
            (E4B15, 0x78, 1.0),
            (E4B15, 0x7e, 1.75),
            (E4B15, 0x01, 2f64.powi(-17)),
        ];
        for &(f, bits, v) in table {
            assert_eq!(f.decode(bits), v, "{f:?} {bits:#x}");
            assert_eq!(f.encode(v), bits, "{f:?} {v}");
        }
        assert!(E4M3.decode(0x7f).is_nan() && E4M3.decode(0xff).is_nan());
        assert!(E5M2.decode(0x7d).is_nan() && E5M2.decode(0x7e).is_nan());
        assert_eq!(E4M3.encode(f64::NAN), 0x7f);
        assert_eq!(E5M2.encode(-f64::NAN), 0x7e);
    }

    #[test]
    fn rounding_ties_to_even_and_saturation() {
        // 1.0625 is halfway between 1.0 and 1.125 in E4M3: even is 1.0.
        assert_eq!(E4M3.round(1.0625), 1.0);
        assert_eq!(E4M3.round(1.0625 + 1e-9), 1.125);
        assert_eq!(E4M3.round(1.1875), 1.25);
        // Past the largest value, and infinity in E4M3, saturate; E5M2 keeps infinity.
        assert_eq!(E4M3.round(500.0), 448.0);
        assert_eq!(E4M3.round(f64::NEG_INFINITY), -448.0);
        assert_eq!(E5M2.round(1e6), 57344.0);
        assert_eq!(E5M2.round(f64::INFINITY), f64::INFINITY);
        // Subnormals, and the carry from the largest subnormal into the smallest normal.
        assert_eq!(E4M3.round(2f64.powi(-10)), 0.0);
        assert_eq!(E4M3.round(3.0 * 2f64.powi(-10)), 2f64.powi(-8));
        assert_eq!(E4M3.round(2f64.powi(-6) - 2f64.powi(-11)), 2f64.powi(-6));
        assert_eq!(E4M3.encode(-0.0), 0x80);
    }

    /// Every value decodes and encodes back to its bits (NaNs to the canonical NaN), and
    /// every value between two neighbours rounds to the nearer (ties to the even one).
    #[test]
    fn round_trips_and_midpoints() {
        for f in [E4M3, E5M2, E4B15] {
            for bits in 0..=255u8 {
                let v = f.decode(bits);
                let back = f.encode(v);
                if v.is_nan() {
                    assert_eq!(back, f.nan_bits(), "{f:?} {bits:#x}");
                } else {
                    assert_eq!(back, bits, "{f:?} {bits:#x} = {v}");
                }
            }
            for bits in 0..f.max_bits() {
                let (lo, hi) = (f.decode(bits), f.decode(bits + 1));
                let mid = 0.5 * (lo + hi);
                let even = if bits % 2 == 0 { lo } else { hi };
                assert_eq!(f.round(mid), even, "{f:?} tie between {lo} and {hi}");
                assert_eq!(f.round(mid * (1.0 - 1e-12)), lo, "{f:?} below {mid}");
                assert_eq!(f.round(mid * (1.0 + 1e-12)), hi, "{f:?} above {mid}");
            }
        }
    }
}
