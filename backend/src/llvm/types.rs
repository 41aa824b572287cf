//! LLVM types of IR dtypes: the *compute* form values have in registers and the *storage*
//! form they have in memory. f16/bf16 compute in f32 and are rounded after every op, so
//! no half-precision runtime library is ever needed.

use super::Emit;
use crate::llvm::Result;
use inkwell::types::BasicTypeEnum;
use inkwell::values::{BasicValueEnum, FloatValue, IntValue};
use inkwell::{FloatPredicate, IntPredicate};
use tritium_dsl::ir::{DType, Elem};

/// What a target's f32 ↔ f16 conversions (`fptrunc`, `fpext`) do with a NaN. The
/// interpreter (the `half` crate) keeps its sign and top payload bits, made quiet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum HalfNans {
    /// As the interpreter: x86's `vcvtps2ph`/`vcvtph2ps`, ARM's `fcvt`.
    Kept,
    /// Replaced by a canonical NaN, as PTX's `cvt` does on an H100 (`0x7fffffff` from f16,
    /// `0x7fff` with the sign from f32): the emitted code builds NaN bits itself.
    Canonicalized,
}

impl<'ctx> Emit<'_, 'ctx> {
    /// The i16 of bytes `lo` (low, at the lower address) and `hi`. Two bytes travel as
    /// one: LLVM 19's NVPTX backend keeps no `<2 x i8>` in registers, and put each one
    /// (a phi of one, a bitcast to or from `i16`) through local memory.
    pub(crate) fn byte_pair(
        &self,
        lo: IntValue<'ctx>,
        hi: IntValue<'ctx>,
    ) -> Result<IntValue<'ctx>> {
        let (b, i16t) = (self.b, self.ctx.i16_type());
        let lo = b.build_int_z_extend(lo, i16t, "")?;
        let hi = b.build_int_z_extend(hi, i16t, "")?;
        let hi = b.build_left_shift(hi, i16t.const_int(8, false), "")?;
        Ok(b.build_or(lo, hi, "")?)
    }

    /// The bytes (low, high) of the i16 `pair` ([`Emit::byte_pair`]'s inverse).
    pub(crate) fn pair_bytes(&self, pair: IntValue<'ctx>) -> Result<[IntValue<'ctx>; 2]> {
        let (b, i8t) = (self.b, self.ctx.i8_type());
        let high = b.build_right_shift(pair, pair.get_type().const_int(8, false), false, "")?;
        Ok([
            b.build_int_truncate(pair, i8t, "")?,
            b.build_int_truncate(high, i8t, "")?,
        ])
    }

    /// The register form of `d`.
    pub(crate) fn compute_ty(&self, d: DType) -> BasicTypeEnum<'ctx> {
        let c = self.ctx;
        match d {
            DType::Bool => c.bool_type().into(),
            DType::I8 | DType::U8 => c.i8_type().into(),
            DType::I16 | DType::U16 => c.i16_type().into(),
            DType::I32 | DType::U32 => c.i32_type().into(),
            DType::I64 | DType::U64 => c.i64_type().into(),
            DType::F16
            | DType::BF16
            | DType::F32
            | DType::F8E4M3
            | DType::F8E5M2
            | DType::F8E4B15 => c.f32_type().into(),
            DType::F64 => c.f64_type().into(),
        }
    }

    /// The memory form of `d` (bools as bytes, halves as 16 bits).
    pub(crate) fn storage_ty(&self, d: DType) -> BasicTypeEnum<'ctx> {
        let c = self.ctx;
        match d {
            DType::Bool | DType::F8E4M3 | DType::F8E5M2 | DType::F8E4B15 => c.i8_type().into(),
            DType::F16 | DType::BF16 => c.i16_type().into(),
            d => self.compute_ty(d),
        }
    }

    /// Converts a compute value to its memory form.
    pub(crate) fn to_storage(
        &self,
        v: BasicValueEnum<'ctx>,
        e: Elem,
    ) -> Result<BasicValueEnum<'ctx>> {
        let b = self.b;
        match e {
            Elem::Scalar(DType::Bool) => Ok(b
                .build_int_z_extend(v.into_int_value(), self.ctx.i8_type(), "")?
                .into()),
            Elem::Scalar(DType::F16) => {
                if let Some(bits) = self.decoded_f16_bits(v) {
                    return Ok(bits);
                }
                let h = b.build_float_trunc(v.into_float_value(), self.ctx.f16_type(), "")?;
                let h = b.build_bit_cast(h, self.ctx.i16_type(), "")?;
                match self.half_nans {
                    HalfNans::Kept => Ok(h),
                    HalfNans::Canonicalized => self.f16_nan_kept(v.into_float_value(), h),
                }
            }
            Elem::Scalar(DType::BF16) => Ok(self.f32_to_bf16_bits(v.into_float_value())?.into()),
            Elem::Scalar(d) if d.fp8_format().is_some() => {
                let f = d.fp8_format().expect("fp8");
                Ok(self.fp8_encode(v.into_float_value(), f)?.into())
            }
            _ => Ok(v),
        }
    }

    /// Converts a memory value to its compute form.
    pub(crate) fn decode_storage(
        &self,
        v: BasicValueEnum<'ctx>,
        e: Elem,
    ) -> Result<BasicValueEnum<'ctx>> {
        let b = self.b;
        match e {
            Elem::Scalar(DType::Bool) => Ok(b
                .build_int_compare(
                    IntPredicate::NE,
                    v.into_int_value(),
                    self.ctx.i8_type().const_zero(),
                    "",
                )?
                .into()),
            Elem::Scalar(DType::F16) => {
                let h = b
                    .build_bit_cast(v, self.ctx.f16_type(), "")?
                    .into_float_value();
                let f = b.build_float_ext(h, self.ctx.f32_type(), "")?.into();
                match self.half_nans {
                    HalfNans::Kept => Ok(f),
                    HalfNans::Canonicalized => self.f32_nan_kept(v.into_int_value(), f),
                }
            }
            Elem::Scalar(DType::BF16) => {
                let w = b.build_int_z_extend(v.into_int_value(), self.ctx.i32_type(), "")?;
                let w = b.build_left_shift(w, self.ctx.i32_type().const_int(16, false), "")?;
                Ok(b.build_bit_cast(w, self.ctx.f32_type(), "")?)
            }
            Elem::Scalar(d) if d.fp8_format().is_some() => {
                let f = d.fp8_format().expect("fp8");
                Ok(self.fp8_decode(v.into_int_value(), f)?.into())
            }
            _ => Ok(v),
        }
    }

    /// Rounds an f32 compute value to the precision of `d` (identity unless f16, bf16 or
    /// an fp8).
    pub(crate) fn round_to(
        &self,
        v: BasicValueEnum<'ctx>,
        d: DType,
    ) -> Result<BasicValueEnum<'ctx>> {
        match d {
            d if d.is_narrow_float() => {
                let s = self.to_storage(v, Elem::Scalar(d))?;
                Ok(self.decode_storage(s, Elem::Scalar(d))?)
            }
            _ => Ok(v),
        }
    }

    /// The f16 bits `v` was decoded from by [`Emit::f32_nan_kept`]'s select, so that
    /// storing a loaded f16 (a copy, a `dot` operand staged in shared memory) moves its
    /// bits instead of converting them twice: LLVM folds a bare `fptrunc (fpext h)` to `h`,
    /// but not through the NaN selects, which cost a matmul tenfold `cvt`s and spills.
    fn decoded_f16_bits(&self, v: BasicValueEnum<'ctx>) -> Option<BasicValueEnum<'ctx>> {
        use inkwell::values::{BasicValue, InstructionOpcode as Op};
        if self.half_nans != HalfNans::Canonicalized {
            return None;
        }
        let operand = |i: inkwell::values::InstructionValue<'ctx>, k| {
            i.get_operand(k).and_then(|o| o.value())
        };
        let select = v
            .as_instruction_value()
            .filter(|i| i.get_opcode() == Op::Select)?;
        let ext = operand(select, 2)?
            .as_instruction_value()
            .filter(|i| i.get_opcode() == Op::FPExt)?;
        let half = operand(ext, 0)?
            .as_instruction_value()
            .filter(|i| i.get_opcode() == Op::BitCast)?;
        let bits = operand(half, 0)?;
        (bits.get_type() == self.ctx.i16_type().into()).then_some(bits)
    }

    /// `h`, the f16 bits of `v`, or for a NaN `v` its sign and top payload bits, quiet.
    pub(crate) fn f16_nan_kept(
        &self,
        v: FloatValue<'ctx>,
        h: BasicValueEnum<'ctx>,
    ) -> Result<BasicValueEnum<'ctx>> {
        let b = self.b;
        let nan = self.half_nan_bits(v, DType::F16)?;
        let nan = b.build_int_truncate(nan, self.ctx.i16_type(), "")?;
        let is_nan = b.build_float_compare(FloatPredicate::UNO, v, v, "")?;
        Ok(b.build_select(is_nan, nan, h.into_int_value(), "")?)
    }

    /// The f16 or bf16 NaN (`d`) that keeps the sign and top payload bits of the f32 NaN
    /// `v`, quiet, in the low 16 bits of an i32.
    pub(crate) fn half_nan_bits(&self, v: FloatValue<'ctx>, d: DType) -> Result<IntValue<'ctx>> {
        let (b, i32t) = (self.b, self.ctx.i32_type());
        let c = |x: u64| i32t.const_int(x, false);
        let bits = b.build_bit_cast(v, i32t, "")?.into_int_value();
        let top = b.build_right_shift(bits, c(16), false, "")?;
        if d == DType::BF16 {
            return Ok(b.build_or(top, c(0x40), "")?);
        }
        let sign = b.build_and(top, c(0x8000), "")?;
        let payload = b.build_right_shift(bits, c(13), false, "")?;
        let payload = b.build_and(payload, c(0x3ff), "")?;
        let nan = b.build_or(sign, payload, "")?;
        Ok(b.build_or(nan, c(0x7e00), "")?)
    }

    /// `f`, the f32 of the f16 bits `h`, or for a NaN `h` its sign and payload shifted into
    /// the f32's top payload bits, quiet.
    fn f32_nan_kept(
        &self,
        h: inkwell::values::IntValue<'ctx>,
        f: BasicValueEnum<'ctx>,
    ) -> Result<BasicValueEnum<'ctx>> {
        let (b, i32t) = (self.b, self.ctx.i32_type());
        let h = b.build_int_z_extend(h, i32t, "")?;
        let magnitude = b.build_and(h, i32t.const_int(0x7fff, false), "")?;
        let is_nan = b.build_int_compare(
            IntPredicate::UGT,
            magnitude,
            i32t.const_int(0x7c00, false),
            "",
        )?;
        let sign = b.build_and(h, i32t.const_int(0x8000, false), "")?;
        let sign = b.build_left_shift(sign, i32t.const_int(16, false), "")?;
        let payload = b.build_and(h, i32t.const_int(0x3ff, false), "")?;
        let payload = b.build_left_shift(payload, i32t.const_int(13, false), "")?;
        let nan = b.build_or(sign, payload, "")?;
        let nan = b.build_or(nan, i32t.const_int(0x7fc0_0000, false), "")?;
        let nan = b.build_bit_cast(nan, self.ctx.f32_type(), "")?;
        Ok(b.build_select(is_nan, nan, f, "")?)
    }

    /// f32 → bf16 bits with round-to-nearest-even; NaN stays a quiet NaN.
    pub(crate) fn f32_to_bf16_bits(
        &self,
        v: FloatValue<'ctx>,
    ) -> Result<inkwell::values::IntValue<'ctx>> {
        let (b, i32t) = (self.b, self.ctx.i32_type());
        let bits = b.build_bit_cast(v, i32t, "")?.into_int_value();
        let lsb = b.build_right_shift(bits, i32t.const_int(16, false), false, "")?;
        let lsb = b.build_and(lsb, i32t.const_int(1, false), "")?;
        let bias = b.build_int_add(lsb, i32t.const_int(0x7fff, false), "")?;
        let rounded = b.build_int_add(bits, bias, "")?;
        let rounded = b.build_right_shift(rounded, i32t.const_int(16, false), false, "")?;
        let rounded = b.build_int_truncate(rounded, self.ctx.i16_type(), "")?;
        self.bf16_nan_kept(v, rounded)
    }

    /// `h`, the bf16 bits of `v`, or for a NaN `v` its sign and top payload bits, quiet.
    pub(crate) fn bf16_nan_kept(
        &self,
        v: FloatValue<'ctx>,
        h: inkwell::values::IntValue<'ctx>,
    ) -> Result<inkwell::values::IntValue<'ctx>> {
        let b = self.b;
        let nan = self.half_nan_bits(v, DType::BF16)?;
        let nan = b.build_int_truncate(nan, self.ctx.i16_type(), "")?;
        let is_nan = b.build_float_compare(FloatPredicate::UNO, v, v, "")?;
        Ok(b.build_select(is_nan, nan, h, "")?.into_int_value())
    }
}
