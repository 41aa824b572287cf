//! Binary ops on one element of a dtype, with Tritium's integer rules (no UB: `x / 0 == 0`,
//! `x % 0 == 0`, `MIN / -1` wraps, shift amounts modulo the width), and integer unary ops.

use super::Emit;
use crate::llvm::Result;
use inkwell::types::BasicTypeEnum;
use inkwell::values::{BasicValueEnum, FloatValue};
use inkwell::{FloatPredicate, IntPredicate};
use tritium_dsl::ir::{BinOp, DType, UnOp};

impl<'ctx> Emit<'_, 'ctx> {
    /// Float max/min of two floats or float vectors: IEEE 754-2019 maximumNumber and
    /// minimumNumber. A NaN operand is ignored (maxnum/minnum), and -0 < +0, which
    /// maxnum leaves open, so that every device and every order gives the same zero.
    ///
    /// `maxnum` gets no lone NaN: each operand that is NaN is replaced by the other first.
    /// LLVM 19's analyses take `maxnum(x, y)` for never below zero when `x` is never below
    /// zero, forgetting that a NaN `x` gives `y`: `maxnum(select(c, 1.0, NaN), -1.0) < 0`
    /// was folded to false (`minnum` alike; the fuzzer's seed 4400067). With the NaNs
    /// replaced, each operand may be what the other is, and the analyses stay sound.
    pub(crate) fn float_max_min(
        &self,
        max: bool,
        a: BasicValueEnum<'ctx>,
        b: BasicValueEnum<'ctx>,
    ) -> Result<BasicValueEnum<'ctx>> {
        let a_or_b = self.unless_nan(a, b)?;
        let b_or_a = self.unless_nan(b, a)?;
        let name = if max { "llvm.maxnum" } else { "llvm.minnum" };
        let picked = self.intrinsic(name, &[a.get_type()], &[a_or_b, b_or_a])?;
        self.order_signed_zeros(max, a, b, picked)
    }

    /// `x`, or `y` where `x` is NaN (lane by lane for vectors).
    fn unless_nan(
        &self,
        x: BasicValueEnum<'ctx>,
        y: BasicValueEnum<'ctx>,
    ) -> Result<BasicValueEnum<'ctx>> {
        let bl = self.b;
        Ok(match x {
            BasicValueEnum::FloatValue(v) => {
                let nan = bl.build_float_compare(FloatPredicate::UNO, v, v, "")?;
                bl.build_select(nan, y, x, "")?
            }
            BasicValueEnum::VectorValue(v) => {
                let nan = bl.build_float_compare(FloatPredicate::UNO, v, v, "")?;
                bl.build_select(nan, y, x, "")?
            }
            other => unreachable!("float max/min of {other:?}"),
        })
    }

    /// The integer type of a float type's width (compute types are f32 or f64).
    fn float_bits_ty(&self, f: inkwell::types::FloatType<'ctx>) -> inkwell::types::IntType<'ctx> {
        if f == self.ctx.f64_type() {
            self.ctx.i64_type()
        } else {
            self.ctx.i32_type()
        }
    }

    /// `picked` (a max or min of `a` and `b` up to the sign of zero), except that equal
    /// operands give `a & b` (max: +0 unless both are -0) or `a | b` (min) of their bits.
    /// Equal non-zero operands have equal bits, so only ±0 changes.
    pub(crate) fn order_signed_zeros(
        &self,
        max: bool,
        a: BasicValueEnum<'ctx>,
        b: BasicValueEnum<'ctx>,
        picked: BasicValueEnum<'ctx>,
    ) -> Result<BasicValueEnum<'ctx>> {
        let bl = self.b;
        let bits_ty: BasicTypeEnum<'ctx> = match a.get_type() {
            BasicTypeEnum::FloatType(f) => self.float_bits_ty(f).into(),
            BasicTypeEnum::VectorType(v) => self
                .float_bits_ty(v.get_element_type().into_float_type())
                .vec_type(v.get_size())
                .into(),
            t => unreachable!("float max/min of {t:?}"),
        };
        let (eq, ab, bb) = match (a, b) {
            (BasicValueEnum::FloatValue(x), BasicValueEnum::FloatValue(y)) => (
                bl.build_float_compare(FloatPredicate::OEQ, x, y, "")?
                    .into(),
                bl.build_bit_cast(x, bits_ty, "")?,
                bl.build_bit_cast(y, bits_ty, "")?,
            ),
            (BasicValueEnum::VectorValue(x), BasicValueEnum::VectorValue(y)) => (
                bl.build_float_compare(FloatPredicate::OEQ, x, y, "")?
                    .into(),
                bl.build_bit_cast(x, bits_ty, "")?,
                bl.build_bit_cast(y, bits_ty, "")?,
            ),
            _ => unreachable!("float max/min operands of one type"),
        };
        let joined: BasicValueEnum<'ctx> = match (ab, bb) {
            (BasicValueEnum::IntValue(x), BasicValueEnum::IntValue(y)) => if max {
                bl.build_and(x, y, "")
            } else {
                bl.build_or(x, y, "")
            }?
            .into(),
            (BasicValueEnum::VectorValue(x), BasicValueEnum::VectorValue(y)) => if max {
                bl.build_and(x, y, "")
            } else {
                bl.build_or(x, y, "")
            }?
            .into(),
            _ => unreachable!("bits of one type"),
        };
        let joined = bl.build_bit_cast(joined, a.get_type(), "")?;
        let eq: BasicValueEnum<'ctx> = eq;
        match eq {
            BasicValueEnum::IntValue(c) => Ok(bl.build_select(c, joined, picked, "")?),
            BasicValueEnum::VectorValue(c) => Ok(bl.build_select(c, joined, picked, "")?),
            _ => unreachable!("a comparison"),
        }
    }

    /// `a op b` for two lanes of dtype `d`.
    pub(crate) fn binary(
        &self,
        op: BinOp,
        d: DType,
        a: BasicValueEnum<'ctx>,
        b: BasicValueEnum<'ctx>,
    ) -> Result<BasicValueEnum<'ctx>> {
        let bl = self.b;
        if d.is_float() {
            let (x, y) = (a.into_float_value(), b.into_float_value());
            let v: BasicValueEnum = match op {
                BinOp::Add => bl.build_float_add(x, y, "")?.into(),
                BinOp::Sub => bl.build_float_sub(x, y, "")?.into(),
                BinOp::Mul => bl.build_float_mul(x, y, "")?.into(),
                BinOp::Div => bl.build_float_div(x, y, "")?.into(),
                BinOp::Rem => bl.build_float_rem(x, y, "")?.into(),
                BinOp::Max => self.float_max_min(true, a, b)?,
                BinOp::Min => self.float_max_min(false, a, b)?,
                _ => unreachable!("verifier rejects bit ops on floats"),
            };
            return self.round_to(v, d);
        }
        let (x, y) = (a.into_int_value(), b.into_int_value());
        let it = x.get_type();
        let signed = d.is_signed_int();
        match op {
            BinOp::Add => Ok(bl.build_int_add(x, y, "")?.into()),
            BinOp::Sub => Ok(bl.build_int_sub(x, y, "")?.into()),
            BinOp::Mul => Ok(bl.build_int_mul(x, y, "")?.into()),
            BinOp::And => Ok(bl.build_and(x, y, "")?.into()),
            BinOp::Or => Ok(bl.build_or(x, y, "")?.into()),
            BinOp::Xor => Ok(bl.build_xor(x, y, "")?.into()),
            BinOp::Shl | BinOp::Shr => {
                let amount = bl.build_and(y, it.const_int(d.bits() as u64 - 1, false), "")?;
                if op == BinOp::Shl {
                    Ok(bl.build_left_shift(x, amount, "")?.into())
                } else {
                    Ok(bl.build_right_shift(x, amount, signed, "")?.into())
                }
            }
            BinOp::Max => Ok(self.intrinsic(
                if signed { "llvm.smax" } else { "llvm.umax" },
                &[it.into()],
                &[a, b],
            )?),
            BinOp::Min => self.intrinsic(
                if signed { "llvm.smin" } else { "llvm.umin" },
                &[it.into()],
                &[a, b],
            ),
            BinOp::Div | BinOp::Rem => {
                // x / 0 == 0, x % 0 == 0, MIN / -1 == MIN (wrapping): never UB.
                let zero = it.const_zero();
                let one = it.const_int(1, false);
                let is_zero = bl.build_int_compare(IntPredicate::EQ, y, zero, "")?;
                let mut safe = bl.build_select(is_zero, one, y, "")?.into_int_value();
                let mut is_neg_one = None;
                if signed {
                    let m1 = it.const_all_ones();
                    let n1 = bl.build_int_compare(IntPredicate::EQ, safe, m1, "")?;
                    safe = bl.build_select(n1, one, safe, "")?.into_int_value();
                    is_neg_one = Some(n1);
                }
                let q = match (op, signed) {
                    (BinOp::Div, true) => bl.build_int_signed_div(x, safe, "")?,
                    (BinOp::Div, false) => bl.build_int_unsigned_div(x, safe, "")?,
                    (_, true) => bl.build_int_signed_rem(x, safe, "")?,
                    (_, false) => bl.build_int_unsigned_rem(x, safe, "")?,
                };
                let q = match is_neg_one {
                    Some(n1) => {
                        let alt = if op == BinOp::Div {
                            bl.build_int_sub(zero, x, "")?
                        } else {
                            zero
                        };
                        bl.build_select(n1, alt, q, "")?.into_int_value()
                    }
                    None => q,
                };
                Ok(bl.build_select(is_zero, zero, q, "")?)
            }
        }
    }

    /// `op x` for a float `x` of dtype `d` (f16/bf16 in their f32 compute form), rounded
    /// to `d`. `exp`, `exp2`, `log`, `log2`, `sin` and `cos` come from `transcendental`,
    /// which each target supplies (libm intrinsics and the f32 polynomial on the host,
    /// `llvm::math` on NVPTX); the other ops are the same everywhere.
    pub(crate) fn float_unary(
        &self,
        op: UnOp,
        d: DType,
        x: FloatValue<'ctx>,
        transcendental: impl FnOnce(UnOp, FloatValue<'ctx>) -> Result<BasicValueEnum<'ctx>>,
    ) -> Result<BasicValueEnum<'ctx>> {
        let bl = self.b;
        let t = self.compute_ty(d);
        let xv: BasicValueEnum = x.into();
        let v: BasicValueEnum = match op {
            UnOp::Neg => bl.build_float_neg(x, "")?.into(),
            UnOp::Abs => self.intrinsic("llvm.fabs", &[t], &[xv])?,
            UnOp::Exp | UnOp::Exp2 | UnOp::Log | UnOp::Log2 | UnOp::Sin | UnOp::Cos => {
                transcendental(op, x)?
            }
            UnOp::Sqrt => self.intrinsic("llvm.sqrt", &[t], &[xv])?,
            UnOp::Rsqrt => {
                let s = self.intrinsic("llvm.sqrt", &[t], &[xv])?.into_float_value();
                let one = t.into_float_type().const_float(1.0);
                bl.build_float_div(one, s, "")?.into()
            }
            UnOp::Floor => self.intrinsic("llvm.floor", &[t], &[xv])?,
            UnOp::Ceil => self.intrinsic("llvm.ceil", &[t], &[xv])?,
            UnOp::Trunc => self.intrinsic("llvm.trunc", &[t], &[xv])?,
            UnOp::Round => self.intrinsic("llvm.round", &[t], &[xv])?,
            UnOp::Rint => self.intrinsic("llvm.rint", &[t], &[xv])?,
            UnOp::Not => unreachable!("verifier rejects `not` on floats"),
        };
        self.round_to(v, d)
    }

    /// `op x` for an integer (or bool) `x` of dtype `d`: wrapping negation, bitwise not,
    /// absolute value (wrapping at MIN).
    pub(crate) fn int_unary(
        &self,
        op: UnOp,
        d: DType,
        x: BasicValueEnum<'ctx>,
    ) -> Result<BasicValueEnum<'ctx>> {
        let bl = self.b;
        let t = self.compute_ty(d);
        let i = x.into_int_value();
        match op {
            UnOp::Neg => Ok(bl.build_int_sub(i.get_type().const_zero(), i, "")?.into()),
            UnOp::Not => Ok(bl.build_not(i, "")?.into()),
            UnOp::Abs if d.is_signed_int() => Ok(self.intrinsic(
                "llvm.abs",
                &[t],
                &[x, self.ctx.bool_type().const_zero().into()],
            )?),
            UnOp::Abs => Ok(x),
            _ => unreachable!("the tracer casts integers to f32 for float-only ops"),
        }
    }
}
