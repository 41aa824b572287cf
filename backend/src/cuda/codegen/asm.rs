//! Inline PTX where LLVM 19 has no intrinsic (TMA, `mbarrier`, `stmatrix`, fences):
//! statements with side effects and a memory clobber, so that LLVM neither drops nor
//! moves them across other memory operations.

use super::Gen;
use crate::llvm::Result;
use inkwell::values::{BasicValueEnum, IntValue};

impl<'ctx> Gen<'ctx, '_> {
    /// An asm statement with side effects and no operands.
    pub(super) fn asm_statement(&self, asm: &str) -> Result<()> {
        self.asm_call(asm, &[], false).map(|_| ())
    }

    /// A PTX statement with side effects and a memory clobber on `args` (an i1 is a
    /// predicate, an i32 a 32-bit and an i64 a 64-bit register), giving the i32 of its
    /// first operand where `ret` (then `$0`, the args from `$1`).
    pub(super) fn asm_call(
        &self,
        asm: &str,
        args: &[BasicValueEnum<'ctx>],
        ret: bool,
    ) -> Result<Option<IntValue<'ctx>>> {
        let i32t = self.ctx.i32_type();
        let mut constraints: Vec<&str> = Vec::new();
        if ret {
            constraints.push("=r");
        }
        for a in args {
            constraints.push(match a.into_int_value().get_type().get_bit_width() {
                1 => "b",
                64 => "l",
                _ => "r",
            });
        }
        constraints.push("~{memory}");
        let params: Vec<_> = args.iter().map(|a| a.get_type().into()).collect();
        let fn_ty = match ret {
            true => i32t.fn_type(&params, false),
            false => self.ctx.void_type().fn_type(&params, false),
        };
        let f = self.ctx.create_inline_asm(
            fn_ty,
            asm.to_string(),
            constraints.join(","),
            true,
            false,
            None,
            false,
        );
        let args: Vec<_> = args.iter().map(|a| (*a).into()).collect();
        let call = self.b.build_indirect_call(fn_ty, f, &args, "")?;
        Ok(match call.try_as_basic_value() {
            inkwell::values::ValueKind::Basic(v) => Some(v.into_int_value()),
            inkwell::values::ValueKind::Instruction(_) => None,
        })
    }
}
