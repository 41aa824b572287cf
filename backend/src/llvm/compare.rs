//! Comparisons: ordered float predicates (`!=` unordered), signed or unsigned integers.

use super::Emit;
use crate::llvm::Result;
use inkwell::values::{BasicValueEnum, IntValue, VectorValue};
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
            let (x, y) = (a.into_float_value(), b.into_float_value());
            return Ok(self.b.build_float_compare(float_predicate(p), x, y, "")?);
        }
        let (x, y) = (a.into_int_value(), b.into_int_value());
        let ip = int_predicate(p, d.is_signed_int());
        Ok(self.b.build_int_compare(ip, x, y, "")?)
    }

    /// [`compare`](Self::compare) lane by lane of two vectors of dtype `d` (compute form).
    pub(crate) fn compare_vectors(
        &self,
        p: CmpPred,
        d: DType,
        a: VectorValue<'ctx>,
        b: VectorValue<'ctx>,
    ) -> Result<VectorValue<'ctx>> {
        if d.is_float() {
            return Ok(self.b.build_float_compare(float_predicate(p), a, b, "")?);
        }
        let ip = int_predicate(p, d.is_signed_int());
        Ok(self.b.build_int_compare(ip, a, b, "")?)
    }
}

/// Ordered, except `!=`, which is true when either side is NaN.
fn float_predicate(p: CmpPred) -> FloatPredicate {
    match p {
        CmpPred::Eq => FloatPredicate::OEQ,
        CmpPred::Ne => FloatPredicate::UNE,
        CmpPred::Lt => FloatPredicate::OLT,
        CmpPred::Le => FloatPredicate::OLE,
        CmpPred::Gt => FloatPredicate::OGT,
        CmpPred::Ge => FloatPredicate::OGE,
    }
}

fn int_predicate(p: CmpPred, signed: bool) -> IntPredicate {
    match p {
        CmpPred::Eq => IntPredicate::EQ,
        CmpPred::Ne => IntPredicate::NE,
        CmpPred::Lt if signed => IntPredicate::SLT,
        CmpPred::Lt => IntPredicate::ULT,
        CmpPred::Le if signed => IntPredicate::SLE,
        CmpPred::Le => IntPredicate::ULE,
        CmpPred::Gt if signed => IntPredicate::SGT,
        CmpPred::Gt => IntPredicate::UGT,
        CmpPred::Ge if signed => IntPredicate::SGE,
        CmpPred::Ge => IntPredicate::UGE,
    }
}
