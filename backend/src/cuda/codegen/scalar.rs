//! One element of an elementwise op, in compute form: the same semantics as the CPU
//! backend's `cpu/codegen/lanes.rs` (copied from it; unify once both backends settle),
//! except for transcendental functions, which NVPTX cannot call from a libm: `exp` keeps
//! the CPU's polynomial, `exp2`/`log2`/`sin`/`cos` use the PTX `.approx` instructions and
//! `log` is `log2(x) * ln 2`. f64 transcendental functions are rejected at compile time.

use super::Gen;
use inkwell::intrinsics::Intrinsic;
use inkwell::types::BasicTypeEnum;
use inkwell::values::{BasicValueEnum, IntValue};
use inkwell::{FloatPredicate, IntPredicate};
use tritium_dsl::ir::{BinOp, CmpPred, Const, DType, UnOp};

impl<'ctx> Gen<'ctx, '_> {
    /// Calls an overloaded LLVM intrinsic.
    pub(super) fn intrinsic(
        &self,
        name: &str,
        overload: &[BasicTypeEnum<'ctx>],
        args: &[BasicValueEnum<'ctx>],
    ) -> BasicValueEnum<'ctx> {
        let i = Intrinsic::find(name).unwrap_or_else(|| panic!("LLVM 19 has intrinsic {name}"));
        let decl = i
            .get_declaration(self.module, overload)
            .expect("intrinsic declaration");
        let args: Vec<_> = args.iter().map(|a| (*a).into()).collect();
        match self
            .b
            .build_call(decl, &args, "")
            .unwrap()
            .try_as_basic_value()
        {
            inkwell::values::ValueKind::Basic(v) => v,
            inkwell::values::ValueKind::Instruction(_) => {
                panic!("intrinsic {name} returns a value")
            }
        }
    }

    /// A constant of dtype `d` in compute form.
    pub(super) fn const_value(&self, c: Const, d: DType) -> BasicValueEnum<'ctx> {
        let ty = self.compute_ty(d);
        match (c, d.is_float()) {
            (Const::Int(i), false) => {
                let bits = if d.is_bool() {
                    (i != 0) as u64
                } else {
                    i as u64
                };
                ty.into_int_type().const_int(bits, false).into()
            }
            (Const::Float(f), false) => {
                ty.into_int_type().const_int(f as i128 as u64, false).into()
            }
            (c, true) => {
                let f = match c {
                    Const::Int(i) => i as f64,
                    Const::Float(f) => f,
                };
                let f = match d {
                    DType::F16 => half::f16::from_f64(f).to_f64(),
                    DType::BF16 => half::bf16::from_f64(f).to_f64(),
                    DType::F32 => f as f32 as f64,
                    _ => f,
                };
                ty.into_float_type().const_float(f).into()
            }
        }
    }

    /// `a op b` for two lanes of dtype `d`.
    pub(super) fn binary(
        &self,
        op: BinOp,
        d: DType,
        a: BasicValueEnum<'ctx>,
        b: BasicValueEnum<'ctx>,
    ) -> BasicValueEnum<'ctx> {
        let bl = self.b;
        if d.is_float() {
            let (x, y) = (a.into_float_value(), b.into_float_value());
            let t = self.compute_ty(d);
            let v: BasicValueEnum = match op {
                BinOp::Add => bl.build_float_add(x, y, "").unwrap().into(),
                BinOp::Sub => bl.build_float_sub(x, y, "").unwrap().into(),
                BinOp::Mul => bl.build_float_mul(x, y, "").unwrap().into(),
                BinOp::Div => bl.build_float_div(x, y, "").unwrap().into(),
                BinOp::Rem => bl.build_float_rem(x, y, "").unwrap().into(),
                BinOp::Max => self.intrinsic("llvm.maxnum", &[t], &[a, b]),
                BinOp::Min => self.intrinsic("llvm.minnum", &[t], &[a, b]),
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

    /// PTX `<op>.approx.f32` (`ex2`, `lg2`, `sin`, `cos`); the host's intrinsic in the
    /// emulator.
    fn approx(&self, op: &str, x: BasicValueEnum<'ctx>) -> BasicValueEnum<'ctx> {
        if self.emu.is_some() {
            let host = match op {
                "ex2" => "llvm.exp2",
                "lg2" => "llvm.log2",
                "sin" => "llvm.sin",
                _ => "llvm.cos",
            };
            return self.intrinsic(host, &[self.ctx.f32_type().into()], &[x]);
        }
        self.intrinsic(&format!("llvm.nvvm.{op}.approx.f"), &[], &[x])
    }

    /// `op x` for one element of dtype `d`.
    pub(super) fn unary(
        &mut self,
        op: UnOp,
        d: DType,
        x: BasicValueEnum<'ctx>,
    ) -> BasicValueEnum<'ctx> {
        let bl = self.b;
        let t = self.compute_ty(d);
        if d.is_float() {
            let f = x.into_float_value();
            let f32t = self.ctx.f32_type();
            if d == DType::F64
                && !matches!(
                    op,
                    UnOp::Neg | UnOp::Abs | UnOp::Sqrt | UnOp::Rsqrt | UnOp::Floor | UnOp::Ceil
                )
            {
                self.fail(format!(
                    "`{}` on f64 is not supported on CUDA yet (there is no libdevice); cast to f32",
                    op.name()
                ));
                return x;
            }
            let v: BasicValueEnum = match op {
                UnOp::Neg => bl.build_float_neg(f, "").unwrap().into(),
                UnOp::Abs => self.intrinsic("llvm.fabs", &[t], &[x]),
                UnOp::Exp => self.exp_f32(f).into(),
                UnOp::Exp2 => self.approx("ex2", x),
                UnOp::Log => {
                    let l2 = self.approx("lg2", x);
                    let ln2 = f32t.const_float(std::f64::consts::LN_2);
                    bl.build_float_mul(l2.into_float_value(), ln2, "")
                        .unwrap()
                        .into()
                }
                UnOp::Log2 => self.approx("lg2", x),
                UnOp::Sqrt => self.intrinsic("llvm.sqrt", &[t], &[x]),
                UnOp::Rsqrt => {
                    let s = self.intrinsic("llvm.sqrt", &[t], &[x]).into_float_value();
                    let one = t.into_float_type().const_float(1.0);
                    bl.build_float_div(one, s, "").unwrap().into()
                }
                UnOp::Sin => self.approx("sin", x),
                UnOp::Cos => self.approx("cos", x),
                UnOp::Floor => self.intrinsic("llvm.floor", &[t], &[x]),
                UnOp::Ceil => self.intrinsic("llvm.ceil", &[t], &[x]),
                UnOp::Not => unreachable!("verifier rejects `not` on floats"),
            };
            return self.round_to(v, d);
        }
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

    pub(super) fn compare(
        &self,
        p: CmpPred,
        d: DType,
        a: BasicValueEnum<'ctx>,
        b: BasicValueEnum<'ctx>,
    ) -> IntValue<'ctx> {
        if d.is_float() {
            let fp = match p {
                CmpPred::Eq => FloatPredicate::OEQ,
                CmpPred::Ne => FloatPredicate::UNE,
                CmpPred::Lt => FloatPredicate::OLT,
                CmpPred::Le => FloatPredicate::OLE,
                CmpPred::Gt => FloatPredicate::OGT,
                CmpPred::Ge => FloatPredicate::OGE,
            };
            return self
                .b
                .build_float_compare(fp, a.into_float_value(), b.into_float_value(), "")
                .unwrap();
        }
        let s = d.is_signed_int();
        let ip = match p {
            CmpPred::Eq => IntPredicate::EQ,
            CmpPred::Ne => IntPredicate::NE,
            CmpPred::Lt if s => IntPredicate::SLT,
            CmpPred::Lt => IntPredicate::ULT,
            CmpPred::Le if s => IntPredicate::SLE,
            CmpPred::Le => IntPredicate::ULE,
            CmpPred::Gt if s => IntPredicate::SGT,
            CmpPred::Gt => IntPredicate::UGT,
            CmpPred::Ge if s => IntPredicate::SGE,
            CmpPred::Ge => IntPredicate::UGE,
        };
        self.b
            .build_int_compare(ip, a.into_int_value(), b.into_int_value(), "")
            .unwrap()
    }

    /// Converts a compute value of dtype `from` to dtype `to` (Rust `as` semantics).
    pub(super) fn cast(
        &self,
        v: BasicValueEnum<'ctx>,
        from: DType,
        to: DType,
    ) -> BasicValueEnum<'ctx> {
        let bl = self.b;
        if from == to {
            return v;
        }
        let tt = self.compute_ty(to);
        if to.is_bool() {
            return if from.is_float() {
                let z = v.into_float_value().get_type().const_zero();
                bl.build_float_compare(FloatPredicate::UNE, v.into_float_value(), z, "")
                    .unwrap()
                    .into()
            } else {
                let z = v.into_int_value().get_type().const_zero();
                bl.build_int_compare(IntPredicate::NE, v.into_int_value(), z, "")
                    .unwrap()
                    .into()
            };
        }
        match (from.is_float(), to.is_float()) {
            (false, false) => {
                let signed = from.is_signed_int();
                bl.build_int_cast_sign_flag(v.into_int_value(), tt.into_int_type(), signed, "")
                    .unwrap()
                    .into()
            }
            (false, true) => {
                let ft = tt.into_float_type();
                let f = if from.is_signed_int() {
                    bl.build_signed_int_to_float(v.into_int_value(), ft, "")
                        .unwrap()
                } else {
                    bl.build_unsigned_int_to_float(v.into_int_value(), ft, "")
                        .unwrap()
                };
                self.round_to(f.into(), to)
            }
            (true, false) => {
                let name = if to.is_signed_int() {
                    "llvm.fptosi.sat"
                } else {
                    "llvm.fptoui.sat"
                };
                self.intrinsic(name, &[tt, v.get_type()], &[v])
            }
            (true, true) => {
                let f = v.into_float_value();
                let ft = tt.into_float_type();
                let w = if f.get_type() == ft {
                    f
                } else if to == DType::F64 {
                    bl.build_float_ext(f, ft, "").unwrap()
                } else {
                    bl.build_float_trunc(f, ft, "").unwrap()
                };
                self.round_to(w.into(), to)
            }
        }
    }

    /// `e^x` in f32 without a libm call, so that loops containing it vectorize: Cody-Waite
    /// range reduction to r in [-ln2/2, ln2/2] and a degree-6 near-minimax polynomial
    /// (Chebyshev fit of (e^r - 1)/r; below 0.85 ulp over the whole range, against 0.93
    /// for the Cephes `expf` polynomial it replaces, with one multiply fewer). Overflow gives
    /// +inf, arguments below -87.33 give 0, NaN stays NaN. 17 vector operations, 10 of them
    /// multiplies or FMAs.
    fn exp_f32(&self, x: inkwell::values::FloatValue<'ctx>) -> inkwell::values::FloatValue<'ctx> {
        let (b, f32t, i32t) = (self.b, self.ctx.f32_type(), self.ctx.i32_type());
        let c = |v: f64| f32t.const_float(v);
        let hi = c(88.722_83);
        let lo = c(-87.336_55);
        let too_big = b
            .build_float_compare(FloatPredicate::OGT, x, hi, "")
            .unwrap();
        let too_small = b
            .build_float_compare(FloatPredicate::OLT, x, lo, "")
            .unwrap();
        let xc = b
            .build_select(too_big, hi, x, "")
            .unwrap()
            .into_float_value();
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
        // the top); add the bias. For NaN, y is NaN and the scale does not matter.
        let bits = b.build_bit_cast(fxm, i32t, "").unwrap().into_int_value();
        let e = b
            .build_left_shift(bits, i32t.const_int(23, false), "")
            .unwrap();
        let e = b
            .build_int_add(e, i32t.const_int(127 << 23, false), "")
            .unwrap();
        let scale = b.build_bit_cast(e, f32t, "").unwrap().into_float_value();
        let v = b.build_float_mul(y, scale, "").unwrap();
        b.build_select(too_small, c(0.0), v, "")
            .unwrap()
            .into_float_value()
    }
}
