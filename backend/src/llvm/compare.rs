//! Comparisons: ordered float predicates (`!=` unordered), signed or unsigned integers.

use super::Emit;
use crate::llvm::Result;
use inkwell::values::{BasicValueEnum, IntValue};
use inkwell::{FloatPredicate, IntPredicate};
use tritium_dsl::ir::{CmpPred, DType};

impl<'ctx> Emit<'_, 'ctx> {
    /// `a p b` for two elements of dtype `d`.
    pub(crate) fn compare(
        &self,
        p: CmpPred,
        d: DType,
        a: BasicValueEnum<'ctx>,
        b: BasicValueEnum<'ctx>,
    ) -> Result<IntValue<'ctx>> {
        if d.is_float() {
            let fp = match p {
                CmpPred::Eq => FloatPredicate::OEQ,
                CmpPred::Ne => FloatPredicate::UNE,
                CmpPred::Lt => FloatPredicate::OLT,
                CmpPred::Le => FloatPredicate::OLE,
                CmpPred::Gt => FloatPredicate::OGT,
                CmpPred::Ge => FloatPredicate::OGE,
            };
            return Ok(self.b.build_float_compare(
                fp,
                a.into_float_value(),
                b.into_float_value(),
                "",
            )?);
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
        Ok(self
            .b
            .build_int_compare(ip, a.into_int_value(), b.into_int_value(), "")?)
    }
}
