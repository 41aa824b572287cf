//! The 8-bit floats in LLVM IR: fp8 values compute in f32 (as f16 and bf16 do) and are
//! stored as bytes. Encoding rounds an f32 to nearest even, saturates finite overflow (and
//! E4M3's infinities), keeps E5M2's infinities and turns NaN into the canonical NaN, bit
//! for bit as `tritium_dsl::ir::fp8` (the reference the interpreter uses): by integer and
//! f32 ops on every target, or on Hopper by PTX's conversion instruction and a fix-up of
//! what it does otherwise (see [`Fp8Cvt`]).

use super::Emit;
use crate::llvm::Result;
use inkwell::values::{FloatValue, IntValue};
use inkwell::{FloatPredicate, IntPredicate};
use tritium_dsl::ir::fp8::{Fp8Format, E4M3, E5M2};

/// How an f32 becomes an E4M3 or E5M2 byte (E4B15 has no instruction: always software).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Fp8Cvt {
    /// Integer and f32 ops ([`Emit::fp8_encode_software`]).
    Software,
    /// `cvt.rn.satfinite.{e4m3x2,e5m2x2}.f32` (sm_89 on; inline PTX, as LLVM 19 has no
    /// intrinsic), which rounds to nearest even and saturates every value past the
    /// largest, infinities included, to it; its NaN's bits are not Tritium's. Fixed up:
    /// NaN to the canonical NaN, E5M2's infinities kept.
    Satfinite,
    /// [`Fp8Cvt::Satfinite`] in the emulator: the instruction's model (the software
    /// encoding with infinities saturated and NaN as `0x7f`), then the same fix-up, so that
    /// the emulator runs what the GPU does.
    SatfiniteModel,
}

/// What a caller of [`Emit::fp8_pair_for_products`] knows of its values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Fp8Inputs {
    Any,
    /// Neither is ±inf (the caller checked): no fix-up of E5M2's infinities.
    NoInfinity,
}

/// Whether Hopper converts f32 to `f` by an instruction (E4M3 and E5M2; not E4B15).
fn hardware(f: Fp8Format) -> bool {
    f == E4M3 || f == E5M2
}

impl<'ctx> Emit<'_, 'ctx> {
    /// The byte of the fp8 nearest to the f32 `v`.
    pub(crate) fn fp8_encode(&self, v: FloatValue<'ctx>, f: Fp8Format) -> Result<IntValue<'ctx>> {
        let b = self.b;
        // A constant folds in software (LLVM cannot fold the asm).
        if self.fp8_cvt == Fp8Cvt::Software || !hardware(f) || v.is_const() {
            return self.fp8_encode_software(v, f);
        }
        let zero = self.ctx.f32_type().const_zero();
        let pair = self.fp8_satfinite_pair(v, zero, f)?;
        let raw = b.build_int_truncate(pair, self.ctx.i8_type(), "")?;
        let byte = self.fp8_keep_infinity(raw, 0, v, f)?;
        let is_nan = b.build_float_compare(FloatPredicate::UNO, v, v, "")?;
        let nan = self.ctx.i8_type().const_int(u64::from(f.nan_bits()), false);
        Ok(b.build_select(is_nan, nan, byte, "")?.into_int_value())
    }

    /// `lo` and `hi` as the fp8 bytes a tensor-core product reads (an i16, `lo` in its low
    /// byte): [`Emit::fp8_encode`]'s bytes, but that a NaN may be any NaN byte (a product
    /// of NaN is NaN whatever its bits), so that on Hopper one conversion packs the pair
    /// (and only E5M2's infinities need fixing up, unless `inputs` has none).
    pub(crate) fn fp8_pair_for_products(
        &self,
        lo: FloatValue<'ctx>,
        hi: FloatValue<'ctx>,
        f: Fp8Format,
        inputs: Fp8Inputs,
    ) -> Result<IntValue<'ctx>> {
        let software = self.fp8_cvt == Fp8Cvt::Software || !hardware(f);
        if software || (lo.is_const() && hi.is_const()) {
            let (lo, hi) = (
                self.fp8_encode_software(lo, f)?,
                self.fp8_encode_software(hi, f)?,
            );
            return self.byte_pair(lo, hi);
        }
        let pair = self.fp8_satfinite_pair(lo, hi, f)?;
        if inputs == Fp8Inputs::NoInfinity {
            return Ok(pair);
        }
        let pair = self.fp8_keep_infinity(pair, 0, lo, f)?;
        self.fp8_keep_infinity(pair, 8, hi, f)
    }

    /// Whether [`Emit::fp8_pair_for_products`] fixes up infinities of `f` (E5M2 by the
    /// conversion instruction): a caller may then check for them once and skip it.
    pub(crate) fn fp8_fixes_infinities(&self, f: Fp8Format) -> bool {
        self.fp8_cvt != Fp8Cvt::Software && hardware(f) && f.inf_bits().is_some()
    }

    /// `cvt.rn.satfinite.{e4m3x2,e5m2x2}.f32` of `lo` and `hi` (an i16, `lo` in its low
    /// byte; see [`Fp8Cvt::Satfinite`]), or the emulator's model of it.
    fn fp8_satfinite_pair(
        &self,
        lo: FloatValue<'ctx>,
        hi: FloatValue<'ctx>,
        f: Fp8Format,
    ) -> Result<IntValue<'ctx>> {
        let (b, i8t, i16t, f32t) = (
            self.b,
            self.ctx.i8_type(),
            self.ctx.i16_type(),
            self.ctx.f32_type(),
        );
        if self.fp8_cvt == Fp8Cvt::SatfiniteModel {
            // The reference's byte, infinities saturated, NaN as 0x7f.
            let k = |x: u64| i8t.const_int(x, false);
            let model = |v: FloatValue<'ctx>| -> Result<IntValue<'ctx>> {
                let exact = self.fp8_encode_software(v, f)?;
                let sign = b.build_and(exact, k(0x80), "")?;
                let max = b.build_or(sign, k(u64::from(f.max_bits())), "")?;
                let byte = match f.inf_bits() {
                    Some(inf) => {
                        let low = b.build_and(exact, k(0x7f), "")?;
                        let is_inf =
                            b.build_int_compare(IntPredicate::EQ, low, k(inf.into()), "")?;
                        b.build_select(is_inf, max, exact, "")?.into_int_value()
                    }
                    None => exact,
                };
                let is_nan = b.build_float_compare(FloatPredicate::UNO, v, v, "")?;
                Ok(b.build_select(is_nan, k(0x7f), byte, "")?.into_int_value())
            };
            return self.byte_pair(model(lo)?, model(hi)?);
        }
        // `d = {cvt(a), cvt(b)}`, `a` in the high byte.
        let kind = if f.inf_bits().is_some() {
            "e5m2x2"
        } else {
            "e4m3x2"
        };
        let ty = i16t.fn_type(&[f32t.into(), f32t.into()], false);
        let asm = format!("cvt.rn.satfinite.{kind}.f32 $0, $1, $2;");
        let cvt = self
            .ctx
            .create_inline_asm(ty, asm, "=h,f,f".into(), false, false, None, false);
        let call = b.build_indirect_call(ty, cvt, &[hi.into(), lo.into()], "")?;
        let inkwell::values::ValueKind::Basic(pair) = call.try_as_basic_value() else {
            unreachable!("the conversion gives a value")
        };
        Ok(pair.into_int_value())
    }

    /// `word` (an integer of any width) with its byte at bit `at` made E5M2's infinity,
    /// keeping that byte's sign, where `v` is ±inf (the instruction saturates it); `word`
    /// itself for a format without infinities.
    pub(crate) fn fp8_keep_infinity(
        &self,
        word: IntValue<'ctx>,
        at: u32,
        v: FloatValue<'ctx>,
        f: Fp8Format,
    ) -> Result<IntValue<'ctx>> {
        let Some(inf) = f.inf_bits() else {
            return Ok(word);
        };
        let (b, f32t, ty) = (self.b, self.ctx.f32_type(), word.get_type());
        let k = |x: u64| ty.const_int(x << at, false);
        let abs = self.intrinsic("llvm.fabs", &[f32t.into()], &[v.into()])?;
        let inf_f = f32t.const_float(f64::INFINITY);
        let is_inf =
            b.build_float_compare(FloatPredicate::OEQ, abs.into_float_value(), inf_f, "")?;
        let sign = b.build_and(word, k(0x80), "")?;
        let others = b.build_and(word, b.build_not(k(0xff), "")?, "")?;
        let patched = b.build_or(others, b.build_or(sign, k(inf.into()), "")?, "")?;
        Ok(b.build_select(is_inf, patched, word, "")?.into_int_value())
    }

    /// [`Emit::fp8_encode`] by integer and f32 ops (every target runs the same code).
    fn fp8_encode_software(&self, v: FloatValue<'ctx>, f: Fp8Format) -> Result<IntValue<'ctx>> {
        let (b, i32t, f32t) = (self.b, self.ctx.i32_type(), self.ctx.f32_type());
        let k = |x: u64| i32t.const_int(x, false);
        let bits = b.build_bit_cast(v, i32t, "")?.into_int_value();
        let sign = b.build_right_shift(bits, k(24), false, "")?;
        let sign = b.build_and(sign, k(0x80), "")?;
        let abs_bits = b.build_and(bits, k(0x7fff_ffff), "")?;
        let a = b.build_bit_cast(abs_bits, f32t, "")?.into_float_value();
        let max = f32t.const_float(f.max());
        // Saturate first (NaN compares false and is replaced at the end).
        let over = b.build_float_compare(FloatPredicate::OGT, a, max, "")?;
        let a = b.build_select(over, max, a, "")?.into_float_value();
        // Normal: round the f32 mantissa to `man_bits` (nearest even; a carry moves into
        // the exponent), then rebias the exponent.
        let shift = 23 - u64::from(f.man_bits);
        let ab = b.build_bit_cast(a, i32t, "")?.into_int_value();
        let lsb = b.build_right_shift(ab, k(shift), false, "")?;
        let lsb = b.build_and(lsb, k(1), "")?;
        let half = b.build_int_add(lsb, k((1 << (shift - 1)) - 1), "")?;
        let rounded = b.build_int_add(ab, half, "")?;
        let exp = b.build_right_shift(rounded, k(23), false, "")?;
        let exp = b.build_int_sub(exp, k((127 - f.bias) as u64), "")?;
        let exp = b.build_left_shift(exp, k(u64::from(f.man_bits)), "")?;
        let man = b.build_right_shift(rounded, k(shift), false, "")?;
        let man = b.build_and(man, k((1 << f.man_bits) - 1), "")?;
        let normal = b.build_or(exp, man, "")?;
        // Subnormal: a multiple of the step, rounded to nearest even.
        let steps = b.build_float_mul(a, f32t.const_float(1.0 / f.subnormal_step()), "")?;
        let steps = self
            .intrinsic("llvm.roundeven", &[f32t.into()], &[steps.into()])?
            .into_float_value();
        let sub = b.build_float_to_unsigned_int(steps, i32t, "")?;
        let min_normal = f32t.const_float(2f64.powi(1 - f.bias));
        let is_sub = b.build_float_compare(FloatPredicate::OLT, a, min_normal, "")?;
        let mut mag = b.build_select(is_sub, sub, normal, "")?.into_int_value();
        if let Some(inf) = f.inf_bits() {
            let is_inf = b.build_int_compare(IntPredicate::EQ, abs_bits, k(0x7f80_0000), "")?;
            mag = b
                .build_select(is_inf, k(u64::from(inf)), mag, "")?
                .into_int_value();
        }
        let is_nan = b.build_float_compare(FloatPredicate::UNO, v, v, "")?;
        let byte = b.build_or(sign, mag, "")?;
        let byte = b
            .build_select(is_nan, k(u64::from(f.nan_bits())), byte, "")?
            .into_int_value();
        Ok(b.build_int_truncate(byte, self.ctx.i8_type(), "")?)
    }

    /// The f32 value of the fp8 byte `v` (exact).
    pub(crate) fn fp8_decode(&self, v: IntValue<'ctx>, f: Fp8Format) -> Result<FloatValue<'ctx>> {
        let (b, i32t, f32t) = (self.b, self.ctx.i32_type(), self.ctx.f32_type());
        let k = |x: u64| i32t.const_int(x, false);
        let w = b.build_int_z_extend(v, i32t, "")?;
        let sign = b.build_and(w, k(0x80), "")?;
        let sign = b.build_left_shift(sign, k(24), "")?;
        let exp = b.build_right_shift(w, k(u64::from(f.man_bits)), false, "")?;
        let exp = b.build_and(exp, k((1 << f.exp_bits) - 1), "")?;
        let man = b.build_and(w, k((1 << f.man_bits) - 1), "")?;
        // Normal: rebias the exponent, widen the mantissa.
        let e32 = b.build_int_add(exp, k((127 - f.bias) as u64), "")?;
        let e32 = b.build_left_shift(e32, k(23), "")?;
        let m32 = b.build_left_shift(man, k(23 - u64::from(f.man_bits)), "")?;
        let normal = b.build_or(e32, m32, "")?;
        // Subnormal: mantissa × step, exactly.
        let sub = b.build_unsigned_int_to_float(man, f32t, "")?;
        let sub = b.build_float_mul(sub, f32t.const_float(f.subnormal_step()), "")?;
        let sub = b.build_bit_cast(sub, i32t, "")?.into_int_value();
        let is_sub = b.build_int_compare(IntPredicate::EQ, exp, k(0), "")?;
        let mag = b.build_select(is_sub, sub, normal, "")?.into_int_value();
        let nan = k(0x7fc0_0000);
        let mag = if f.ieee {
            let special =
                b.build_int_compare(IntPredicate::EQ, exp, k((1 << f.exp_bits) - 1), "")?;
            let is_inf = b.build_int_compare(IntPredicate::EQ, man, k(0), "")?;
            let s = b
                .build_select(is_inf, k(0x7f80_0000), nan, "")?
                .into_int_value();
            b.build_select(special, s, mag, "")?.into_int_value()
        } else {
            let low = b.build_and(w, k(0x7f), "")?;
            let is_nan = b.build_int_compare(IntPredicate::EQ, low, k(0x7f), "")?;
            b.build_select(is_nan, nan, mag, "")?.into_int_value()
        };
        let bits = b.build_or(sign, mag, "")?;
        Ok(b.build_bit_cast(bits, f32t, "")?.into_float_value())
    }

    /// `v` (f64) rounded to f32 with round-to-odd: when inexact, the neighbour whose last
    /// bit is odd, so that rounding it again to a narrower float (f16, bf16, fp8) gives
    /// the correctly rounded result of `v`.
    pub(crate) fn f64_to_f32_odd(&self, v: FloatValue<'ctx>) -> Result<FloatValue<'ctx>> {
        let (b, i32t, f32t) = (self.b, self.ctx.i32_type(), self.ctx.f32_type());
        let f64t = self.ctx.f64_type();
        let r = b.build_float_trunc(v, f32t, "")?;
        let back = b.build_float_ext(r, f64t, "")?;
        let inexact = b.build_float_compare(FloatPredicate::ONE, back, v, "")?;
        let rb = b.build_bit_cast(r, i32t, "")?.into_int_value();
        let last = b.build_and(rb, i32t.const_int(1, false), "")?;
        let even = b.build_int_compare(IntPredicate::EQ, last, i32t.const_zero(), "")?;
        let adjust = b.build_and(inexact, even, "")?;
        let fabs = |x: FloatValue<'ctx>| -> Result<_> {
            Ok(self
                .intrinsic("llvm.fabs", &[f64t.into()], &[x.into()])?
                .into_float_value())
        };
        let away = b.build_float_compare(FloatPredicate::OLT, fabs(back)?, fabs(v)?, "")?;
        let up = b.build_int_add(rb, i32t.const_int(1, false), "")?;
        let down = b.build_int_sub(rb, i32t.const_int(1, false), "")?;
        let step = b.build_select(away, up, down, "")?.into_int_value();
        let bits = b.build_select(adjust, step, rb, "")?;
        Ok(b.build_bit_cast(bits, f32t, "")?.into_float_value())
    }
}
