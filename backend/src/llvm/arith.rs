//! Binary ops on one element of a dtype, with Tritium's integer rules (no UB: `x / 0 == 0`,
//! `x % 0 == 0`, `MIN / -1` wraps, shift amounts modulo the width), and integer unary ops.

use super::Emit;
use inkwell::types::BasicTypeEnum;
use inkwell::values::{BasicValueEnum, FloatValue};
use inkwell::{FloatPredicate, IntPredicate};
use tritium_dsl::ir::{BinOp, DType, UnOp};

impl<'ctx> Emit<'_, 'ctx> {
    /// Float max/min of two floats or float vectors: IEEE 754-2019 maximumNumber and
    /// minimumNumber. A NaN operand is ignored (maxnum/minnum), and -0 < +0, which
    /// maxnum leaves open, so that every device and every order gives the same zero.
    pub(crate) fn float_max_min(
        &self,
        max: bool,
        a: BasicValueEnum<'ctx>,
        b: BasicValueEnum<'ctx>,
    ) -> BasicValueEnum<'ctx> {
        let name = if max { "llvm.maxnum" } else { "llvm.minnum" };
        let picked = self.intrinsic(name, &[a.get_type()], &[a, b]);
        self.order_signed_zeros(max, a, b, picked)
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
    ) -> BasicValueEnum<'ctx> {
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
                bl.build_float_compare(FloatPredicate::OEQ, x, y, "")
                    .unwrap()
                    .into(),
                bl.build_bit_cast(x, bits_ty, "").unwrap(),
                bl.build_bit_cast(y, bits_ty, "").unwrap(),
            ),
            (BasicValueEnum::VectorValue(x), BasicValueEnum::VectorValue(y)) => (
                bl.build_float_compare(FloatPredicate::OEQ, x, y, "")
                    .unwrap()
                    .into(),
                bl.build_bit_cast(x, bits_ty, "").unwrap(),
                bl.build_bit_cast(y, bits_ty, "").unwrap(),
            ),
            _ => unreachable!("float max/min operands of one type"),
        };
        let joined: BasicValueEnum<'ctx> = match (ab, bb) {
            (BasicValueEnum::IntValue(x), BasicValueEnum::IntValue(y)) => if max {
                bl.build_and(x, y, "")
            } else {
                bl.build_or(x, y, "")
            }
            .unwrap()
            .into(),
            (BasicValueEnum::VectorValue(x), BasicValueEnum::VectorValue(y)) => if max {
                bl.build_and(x, y, "")
            } else {
                bl.build_or(x, y, "")
            }
            .unwrap()
            .into(),
            _ => unreachable!("bits of one type"),
        };
        let joined = bl.build_bit_cast(joined, a.get_type(), "").unwrap();
        let eq: BasicValueEnum<'ctx> = eq;
        match eq {
            BasicValueEnum::IntValue(c) => bl.build_select(c, joined, picked, "").unwrap(),
            BasicValueEnum::VectorValue(c) => bl.build_select(c, joined, picked, "").unwrap(),
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
    ) -> BasicValueEnum<'ctx> {
        let bl = self.b;
        if d.is_float() {
            let (x, y) = (a.into_float_value(), b.into_float_value());
            let v: BasicValueEnum = match op {
                BinOp::Add => bl.build_float_add(x, y, "").unwrap().into(),
                BinOp::Sub => bl.build_float_sub(x, y, "").unwrap().into(),
                BinOp::Mul => bl.build_float_mul(x, y, "").unwrap().into(),
                BinOp::Div => bl.build_float_div(x, y, "").unwrap().into(),
                BinOp::Rem => bl.build_float_rem(x, y, "").unwrap().into(),
                BinOp::Max => self.float_max_min(true, a, b),
                BinOp::Min => self.float_max_min(false, a, b),
                _ => unreachable!("verifier rejects bit ops on floats"),
            };
            return self.round_to(v, d);
        }
        let (x, y) = (a.into_int_value(), b.into_int_value());
        let it = x.get_type();
        let signed = d.is_signed_int();
        match op {
            BinOp::Add => bl.build_int_add(x, y, "").unwrap().into(),
            BinOp::Sub => bl.build_int_sub(x, y, "").unwrap().into(),
            BinOp::Mul => bl.build_int_mul(x, y, "").unwrap().into(),
            BinOp::And => bl.build_and(x, y, "").unwrap().into(),
            BinOp::Or => bl.build_or(x, y, "").unwrap().into(),
            BinOp::Xor => bl.build_xor(x, y, "").unwrap().into(),
            BinOp::Shl | BinOp::Shr => {
                let amount = bl
                    .build_and(y, it.const_int(d.bits() as u64 - 1, false), "")
                    .unwrap();
                if op == BinOp::Shl {
                    bl.build_left_shift(x, amount, "").unwrap().into()
                } else {
                    bl.build_right_shift(x, amount, signed, "").unwrap().into()
                }
            }
            BinOp::Max => self.intrinsic(
                if signed { "llvm.smax" } else { "llvm.umax" },
                &[it.into()],
                &[a, b],
            ),
            BinOp::Min => self.intrinsic(
                if signed { "llvm.smin" } else { "llvm.umin" },
                &[it.into()],
                &[a, b],
            ),
            BinOp::Div | BinOp::Rem => {
                // x / 0 == 0, x % 0 == 0, MIN / -1 == MIN (wrapping): never UB.
                let zero = it.const_zero();
                let one = it.const_int(1, false);
                let is_zero = bl.build_int_compare(IntPredicate::EQ, y, zero, "").unwrap();
                let mut safe = bl
                    .build_select(is_zero, one, y, "")
                    .unwrap()
                    .into_int_value();
                let mut is_neg_one = None;
                if signed {
                    let m1 = it.const_all_ones();
                    let n1 = bl
                        .build_int_compare(IntPredicate::EQ, safe, m1, "")
                        .unwrap();
                    safe = bl.build_select(n1, one, safe, "").unwrap().into_int_value();
                    is_neg_one = Some(n1);
                }
                let q = match (op, signed) {
                    (BinOp::Div, true) => bl.build_int_signed_div(x, safe, "").unwrap(),
                    (BinOp::Div, false) => bl.build_int_unsigned_div(x, safe, "").unwrap(),
                    (_, true) => bl.build_int_signed_rem(x, safe, "").unwrap(),
                    (_, false) => bl.build_int_unsigned_rem(x, safe, "").unwrap(),
                };
                let q = match is_neg_one {
                    Some(n1) => {
                        let alt = if op == BinOp::Div {
                            bl.build_int_sub(zero, x, "").unwrap()
                        } else {
                            zero
                        };
                        bl.build_select(n1, alt, q, "").unwrap().into_int_value()
                    }
                    None => q,
                };
                bl.build_select(is_zero, zero, q, "").unwrap()
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
        transcendental: impl FnOnce(UnOp, FloatValue<'ctx>) -> BasicValueEnum<'ctx>,
    ) -> BasicValueEnum<'ctx> {
        let bl = self.b;
        let t = self.compute_ty(d);
        let xv: BasicValueEnum = x.into();
        let v: BasicValueEnum = match op {
            UnOp::Neg => bl.build_float_neg(x, "").unwrap().into(),
            UnOp::Abs => self.intrinsic("llvm.fabs", &[t], &[xv]),
            UnOp::Exp | UnOp::Exp2 | UnOp::Log | UnOp::Log2 | UnOp::Sin | UnOp::Cos => {
                transcendental(op, x)
            }
            UnOp::Sqrt => self.intrinsic("llvm.sqrt", &[t], &[xv]),
            UnOp::Rsqrt => {
                let s = self.intrinsic("llvm.sqrt", &[t], &[xv]).into_float_value();
                let one = t.into_float_type().const_float(1.0);
                bl.build_float_div(one, s, "").unwrap().into()
            }
            UnOp::Floor => self.intrinsic("llvm.floor", &[t], &[xv]),
            UnOp::Ceil => self.intrinsic("llvm.ceil", &[t], &[xv]),
            UnOp::Trunc => self.intrinsic("llvm.trunc", &[t], &[xv]),
            UnOp::Round => self.intrinsic("llvm.round", &[t], &[xv]),
            UnOp::Rint => self.intrinsic("llvm.rint", &[t], &[xv]),
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
    ) -> BasicValueEnum<'ctx> {
        let bl = self.b;
        let t = self.compute_ty(d);
        let i = x.into_int_value();
        match op {
            UnOp::Neg => bl
                .build_int_sub(i.get_type().const_zero(), i, "")
                .unwrap()
                .into(),
            UnOp::Not => bl.build_not(i, "").unwrap().into(),
            UnOp::Abs if d.is_signed_int() => self.intrinsic(
                "llvm.abs",
                &[t],
                &[x, self.ctx.bool_type().const_zero().into()],
            ),
            UnOp::Abs => x,
            _ => unreachable!("the tracer casts integers to f32 for float-only ops"),
        }
    }
}
