//! Integer read-modify-write atomics, shared by both generators (floats differ per target).

use super::Emit;
use inkwell::values::{BasicValueEnum, PointerValue};
use inkwell::{AtomicOrdering, AtomicRMWBinOp};
use tritium_dsl::ir::{AtomicOp, DType};

impl<'ctx> Emit<'_, 'ctx> {
    /// `atomicrmw` (sequentially consistent) of integer dtype `d`: max/min signed or
    /// unsigned by the dtype; returns the old value.
    pub(crate) fn int_atomic_rmw(
        &self,
        op: AtomicOp,
        d: DType,
        p: PointerValue<'ctx>,
        v: BasicValueEnum<'ctx>,
    ) -> BasicValueEnum<'ctx> {
        let signed = d.is_signed_int();
        let rop = match op {
            AtomicOp::Add => AtomicRMWBinOp::Add,
            AtomicOp::Xchg => AtomicRMWBinOp::Xchg,
            AtomicOp::Max if signed => AtomicRMWBinOp::Max,
            AtomicOp::Max => AtomicRMWBinOp::UMax,
            AtomicOp::Min if signed => AtomicRMWBinOp::Min,
            AtomicOp::Min => AtomicRMWBinOp::UMin,
        };
        self.b
            .build_atomicrmw(
                rop,
                p,
                v.into_int_value(),
                AtomicOrdering::SequentiallyConsistent,
            )
            .unwrap()
            .into()
    }
}
