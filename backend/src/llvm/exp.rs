//! `e^x` in f32 from basic arithmetic (no libm call, no PTX `.approx`), so that CPU loops
//! containing it vectorize and NVPTX needs no libdevice.

use super::Emit;
use inkwell::FloatPredicate;

impl<'ctx> Emit<'_, 'ctx> {
    /// `e^x` in f32 without a libm call, so that loops containing it vectorize: Cody-Waite
    /// range reduction to r in [-ln2/2, ln2/2] and a degree-6 near-minimax polynomial
    /// (Chebyshev fit of (e^r - 1)/r, one multiply fewer than the Cephes `expf` polynomial;
    /// below 0.93 ulp against the exact value over the normal range, as the codegen tests
    /// measure). From 127.5 ln2
    /// (88.38) up the result is +inf (the last half binade of f32 is not reached), NaN stays
    /// NaN; results below 2^-126.5 (x < -87.68) flush to 0, those between are subnormal. The argument is clamped with min/max and the underflow comes from an
    /// integer max on the scale's bits, so no compare mask lives through the polynomial:
    /// 16 vector operations, 12 of them on the multiply pipes.
    pub(crate) fn exp_f32(
        &self,
        x: inkwell::values::FloatValue<'ctx>,
    ) -> inkwell::values::FloatValue<'ctx> {
        let (b, f32t, i32t) = (self.b, self.ctx.f32_type(), self.ctx.i32_type());
        let c = |v: f64| f32t.const_float(v);
        let hi = c(88.722_83);
        // Any x below -126.5 ln2 gives n <= -127, a zero scale: -88 is the clamp.
        let lo = c(-88.0);
        // `x > hi ? hi : x` and `x < lo ? lo : x` keep a NaN (maxps/minps operand order).
        let too_big = b
            .build_float_compare(FloatPredicate::OGT, x, hi, "")
            .unwrap();
        let xc = b
            .build_select(too_big, hi, x, "")
            .unwrap()
            .into_float_value();
        let too_small = b
            .build_float_compare(FloatPredicate::OLT, xc, lo, "")
            .unwrap();
        let xc = b
            .build_select(too_small, lo, xc, "")
            .unwrap()
            .into_float_value();
        let fma =
            |x: inkwell::values::FloatValue<'ctx>, y: inkwell::values::FloatValue<'ctx>, z| {
                self.intrinsic("llvm.fmuladd", &[f32t.into()], &[x.into(), y.into(), z])
                    .into_float_value()
            };
        // n = round(x / ln2) by adding 1.5 * 2^23, whose ulp is 1: fxm's low mantissa bits
        // hold n (|n| <= 128), and fxm - magic is n exactly.
        let magic = c(12_582_912.0);
        let fxm = fma(xc, c(std::f64::consts::LOG2_E), magic.into());
        let fx = b.build_float_sub(fxm, magic, "").unwrap();
        // fx * C1 is exact (C1 has 9 significant bits).
        let r = fma(fx, c(-0.693_359_375), xc.into());
        let r = fma(fx, c(2.121_944_4e-4), r.into());
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
            p = fma(p, r, c(*k).into());
        }
        let y = fma(p, r, c(1.0).into());
        // 2^n without a float→int conversion (which AVX2 does not vectorize): shifted into
        // the exponent field, fxm's bits are n << 23 (the magic number's own bits fall off
        // the top); add the bias. n <= -127 gives a biased exponent <= 0: the integer max
        // makes the scale +0, and the result 0. For NaN, y is NaN and the scale does not
        // matter.
        let bits = b.build_bit_cast(fxm, i32t, "").unwrap().into_int_value();
        let e = b
            .build_left_shift(bits, i32t.const_int(23, false), "")
            .unwrap();
        let e = b
            .build_int_add(e, i32t.const_int(127 << 23, false), "")
            .unwrap();
        let e = self
            .intrinsic(
                "llvm.smax",
                &[i32t.into()],
                &[e.into(), i32t.const_zero().into()],
            )
            .into_int_value();
        let scale = b.build_bit_cast(e, f32t, "").unwrap().into_float_value();
        b.build_float_mul(y, scale, "").unwrap()
    }
}
