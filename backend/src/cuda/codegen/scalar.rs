//! One element of an elementwise op, in compute form: the same semantics as the CPU
//! backend (binary ops, compares, casts and types are `crate::llvm`, shared with it),
//! except for transcendental functions, which NVPTX cannot call from a libm (and Tritium
//! ships no libdevice): they are emitted from FMAs and integer ops by `crate::llvm`, the
//! same IR in the emulator. In f64, `exp`, `exp2`, `log`, `log2`, `sin` and `cos` are
//! `crate::llvm::math` (below 1 ulp over the whole range); in f32 (f16/bf16 compute in it),
//! `log`, `log2`, `sin`, `cos` are `crate::llvm::math` too (below 1 ulp) and `exp` the CPU's
//! polynomial, while `exp2` stays PTX `ex2.approx.ftz` (within 2 ulp, subnormal results
//! flushed to zero, as Triton's; the host's `exp2`, flushed, in the emulator). A float `%` is `crate::llvm`'s exact `fmod`.

use super::Gen;
use crate::llvm::{Emitter, Result};
use inkwell::values::BasicValueEnum;
use tritium_dsl::ir::{BinOp, DType, UnOp};

impl<'ctx> Gen<'ctx, '_> {
    /// `a op b` for two lanes of dtype `d`. A float `%` is `crate::llvm`'s exact `fmod`
    /// (no libm here; NVPTX's own `frem` is `x - trunc(x / y) · y`), in the emulator too.
    pub(super) fn binary(
        &self,
        op: BinOp,
        d: DType,
        a: BasicValueEnum<'ctx>,
        b: BasicValueEnum<'ctx>,
    ) -> Result<BasicValueEnum<'ctx>> {
        let e = self.emit();
        match (a, b) {
            (BasicValueEnum::FloatValue(x), BasicValueEnum::FloatValue(y)) if op == BinOp::Rem => {
                let r = e.exact_fmod(x, y)?;
                e.round_to(r, d)
            }
            // The larger or smaller of two values of `d` is one of them: no rounding.
            (BasicValueEnum::FloatValue(_), _) if matches!(op, BinOp::Max | BinOp::Min) => {
                self.float_max_min(op == BinOp::Max, a, b)
            }
            _ => e.binary(op, d, a, b),
        }
    }

    /// Float max/min, IEEE 754-2019 maximumNumber/minimumNumber with -0 < +0: PTX's `max`
    /// and `min` are exactly that (the PTX ISA: a NaN operand gives the other, "+0.0 >
    /// -0.0"), one instruction where LLVM's `maxnum` needs `Emit::float_max_min`'s NaN and
    /// zero fix-ups; inline, so that no LLVM analysis reasons about it (the reason for the
    /// fix-ups). The emulator runs the LLVM formulation on the host.
    pub(super) fn float_max_min(
        &self,
        max: bool,
        a: BasicValueEnum<'ctx>,
        b: BasicValueEnum<'ctx>,
    ) -> Result<BasicValueEnum<'ctx>> {
        let (BasicValueEnum::FloatValue(x), BasicValueEnum::FloatValue(_)) = (a, b) else {
            return self.emit().float_max_min(max, a, b);
        };
        if self.emu.is_some() {
            return self.emit().float_max_min(max, a, b);
        }
        let ty = x.get_type();
        let (suffix, reg) = match ty == self.ctx.f64_type() {
            true => ("f64", "d"),
            false => ("f32", "f"),
        };
        let op = if max { "max" } else { "min" };
        let fn_ty = ty.fn_type(&[ty.into(), ty.into()], false);
        let asm = format!("{op}.{suffix} $0, $1, $2;");
        let constraints = format!("={reg},{reg},{reg}");
        let f = (self.ctx).create_inline_asm(fn_ty, asm, constraints, false, false, None, false);
        let call = self
            .b
            .build_indirect_call(fn_ty, f, &[a.into(), b.into()], op)?;
        match call.try_as_basic_value() {
            inkwell::values::ValueKind::Basic(v) => Ok(v),
            inkwell::values::ValueKind::Instruction(_) => unreachable!("returns the value"),
        }
    }

    /// PTX `ex2.approx.ftz.f32`, as Triton's `exp2`: within 2 ulp of the normal results,
    /// and results below f32's smallest normal (inputs below -126) flushed to +0, which
    /// spares the scaling ptxas wraps around `ex2.approx.f32` for them (a compare and two
    /// multiplies per element: attention's inner loop runs one per score). The emulator
    /// computes the host's `llvm.exp2` and flushes the same way.
    fn ex2_approx(&self, x: BasicValueEnum<'ctx>) -> Result<BasicValueEnum<'ctx>> {
        if self.emu.is_none() {
            return self.intrinsic("llvm.nvvm.ex2.approx.ftz.f", &[], &[x]);
        }
        let f32t = self.ctx.f32_type();
        let y = self
            .intrinsic("llvm.exp2", &[f32t.into()], &[x])?
            .into_float_value();
        let b = self.b;
        let normal = f32t.const_float(f64::from(f32::MIN_POSITIVE));
        let tiny = b.build_float_compare(inkwell::FloatPredicate::OLT, y, normal, "")?;
        Ok(b.build_select(tiny, f32t.const_zero(), y, "ex2.ftz")?)
    }

    /// `op x` for one element of dtype `d`.
    pub(super) fn unary(
        &self,
        op: UnOp,
        d: DType,
        x: BasicValueEnum<'ctx>,
    ) -> Result<BasicValueEnum<'ctx>> {
        if !d.is_float() {
            return self.emit().int_unary(op, d, x);
        }
        // No libm on NVPTX: `crate::llvm`'s own functions, in the emulator too, so that it
        // runs the code the GPU runs.
        let e = self.emit();
        e.float_unary(op, d, x.into_float_value(), |op, f| {
            let v = match (op, d == DType::F64) {
                (UnOp::Exp, true) => e.exp_f64(f)?,
                (UnOp::Exp2, true) => e.exp2_f64(f)?,
                (UnOp::Log, true) => e.log_f64(f)?,
                (UnOp::Log2, true) => e.log2_f64(f)?,
                (UnOp::Sin, true) => e.sin_f64(f)?,
                (_, true) => e.cos_f64(f)?,
                (UnOp::Exp, false) => e.exp_f32(f)?,
                (UnOp::Exp2, false) => return self.ex2_approx(f.into()),
                (UnOp::Log, false) => e.log_f32(f)?,
                (UnOp::Log2, false) => e.log2_f32(f)?,
                (UnOp::Sin, false) => e.sin_f32(f)?,
                (_, false) => e.cos_f32(f)?,
            };
            Ok(v.into())
        })
    }
}
