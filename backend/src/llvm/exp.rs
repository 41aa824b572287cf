//! `e^x` in f32 from basic arithmetic (no libm call, no PTX `.approx`), so that CPU loops
//! containing it vectorize and NVPTX needs no libdevice.

use super::Emit;
use crate::llvm::Result;
use inkwell::FloatPredicate;

impl<'ctx> Emit<'_, 'ctx> {
    /// `e^x` in f32 without a libm call, so that loops containing it vectorize: Cody-Waite
    /// range reduction to r in [-ln2/2, ln2/2] and a degree-6 near-minimax polynomial
    /// (Chebyshev fit of (e^r - 1)/r, one multiply fewer than the Cephes `expf` polynomial;
    /// below 0.93 ulp against the exact value, as the codegen tests measure), scaled by
    /// 2^n in two halves so that the whole f32 range comes out right with one rounding:
    /// finite up to ln(f32::MAX) (88.72), +inf above, subnormal results down to the
    /// smallest subnormal (x ≈ -103.97), 0 below; NaN stays NaN. The argument is clamped
    /// with min/max and the scales are built with integer ops, so no compare mask lives
    /// through the polynomial.
    pub(crate) fn exp_f32(
        &self,
        x: inkwell::values::FloatValue<'ctx>,
    ) -> Result<inkwell::values::FloatValue<'ctx>> {
        let (b, f32t, i32t) = (self.b, self.ctx.f32_type(), self.ctx.i32_type());
        let c = |v: f64| f32t.const_float(v);
        // e^89 and e^-104 are beyond f32 (+inf and 0 after rounding); clamping there keeps
        // n in [-150, 129], where both half scales are normal numbers.
        let hi = c(89.0);
        let lo = c(-104.0);
        // `x > hi ? hi : x` and `x < lo ? lo : x` keep a NaN (maxps/minps operand order).
        let too_big = b.build_float_compare(FloatPredicate::OGT, x, hi, "")?;
        let xc = b.build_select(too_big, hi, x, "")?.into_float_value();
        let too_small = b.build_float_compare(FloatPredicate::OLT, xc, lo, "")?;
        let xc = b.build_select(too_small, lo, xc, "")?.into_float_value();
        let fma = |x: inkwell::values::FloatValue<'ctx>,
                   y: inkwell::values::FloatValue<'ctx>,
                   z|
         -> Result<_> {
            Ok(self
                .intrinsic("llvm.fmuladd", &[f32t.into()], &[x.into(), y.into(), z])?
                .into_float_value())
        };
        // n = round(x / ln2) by adding 1.5 * 2^23, whose ulp is 1: fxm's low mantissa bits
        // hold n (|n| <= 128), and fxm - magic is n exactly.
        let magic = c(12_582_912.0);
        let fxm = fma(xc, c(std::f64::consts::LOG2_E), magic.into())?;
        let fx = b.build_float_sub(fxm, magic, "")?;
        // fx * C1 is exact (C1 has 9 significant bits).
        let r = fma(fx, c(-0.693_359_375), xc.into())?;
        let r = fma(fx, c(2.121_944_4e-4), r.into())?;
        let coeffs = [
            0.001_393_545_186_147_093_8,
            0.008_370_597_846_806_05,
            0.041_666_448_116_302_49,
            0.166_664_913_296_699_52,
            0.5,
            1.0,
        ];
        let mut p = c(coeffs[0]);
        for k in &coeffs[1..] {
            p = fma(p, r, c(*k).into())?;
        }
        let y = fma(p, r, c(1.0).into())?;
        // 2^n without a float→int conversion (which AVX2 does not vectorize): fxm's low
        // bits hold n; shifted to the top and back (arithmetically), they are n. It is
        // applied as 2^(n/2) · 2^(n - n/2): both halves are normal scales for n in
        // [-150, 129], the first product is exact and the second rounds once (to +inf
        // beyond f32::MAX, gradually to a subnormal or 0 below f32::MIN_POSITIVE). For
        // NaN, y is NaN and the scales do not matter.
        let bits = b.build_bit_cast(fxm, i32t, "")?.into_int_value();
        let top = b.build_left_shift(bits, i32t.const_int(23, false), "")?;
        let n = b.build_right_shift(top, i32t.const_int(23, false), true, "n")?;
        let n1 = b.build_right_shift(n, i32t.const_int(1, false), true, "")?;
        let n2 = b.build_int_sub(n, n1, "")?;
        let scale = |k: inkwell::values::IntValue<'ctx>| -> Result<_> {
            let biased = b.build_int_add(k, i32t.const_int(127, false), "")?;
            let e = b.build_left_shift(biased, i32t.const_int(23, false), "")?;
            Ok(b.build_bit_cast(e, f32t, "")?.into_float_value())
        };
        let y = b.build_float_mul(y, scale(n1)?, "")?;
        let scale = scale(n2)?;
        Ok(b.build_float_mul(y, scale, "")?)
    }
}
