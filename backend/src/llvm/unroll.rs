//! Triton's `loop_unroll_factor` as LLVM loop metadata on a loop's back edge, for both
//! generators: `llvm.loop.unroll.count` for a factor of 2 or more, `llvm.loop.unroll.disable`
//! for 1 (LLVM's unroller reads it; the loop's meaning does not change).

use super::Emit;
use inkwell::values::{AsValueRef, InstructionValue};
use llvm_sys::core::{
    LLVMConstInt, LLVMGetMDKindIDInContext, LLVMInt32TypeInContext, LLVMMDNodeInContext2,
    LLVMMDStringInContext2, LLVMMetadataAsValue, LLVMSetMetadata, LLVMValueAsMetadata,
};
use llvm_sys::debuginfo::{LLVMMetadataReplaceAllUsesWith, LLVMTemporaryMDNode};
use llvm_sys::prelude::LLVMMetadataRef;

impl<'ctx> Emit<'_, 'ctx> {
    /// Marks `back_edge` (the branch to a loop's header) with `factor`.
    pub(crate) fn unroll_hint(&self, back_edge: InstructionValue<'ctx>, factor: u32) {
        let ctx = self.ctx.raw();
        let string = |s: &str| {
            // SAFETY: `ctx` is this module's live context; the bytes are copied.
            unsafe { LLVMMDStringInContext2(ctx, s.as_ptr().cast(), s.len()) }
        };
        // SAFETY: every call gets the live context and metadata made from it; the
        // temporary node is replaced (and freed) before the loop node is attached.
        unsafe {
            let option: Vec<LLVMMetadataRef> = if factor >= 2 {
                let count = LLVMConstInt(LLVMInt32TypeInContext(ctx), u64::from(factor), 0);
                vec![string("llvm.loop.unroll.count"), LLVMValueAsMetadata(count)]
            } else {
                vec![string("llvm.loop.unroll.disable")]
            };
            let mut option = option;
            let option = LLVMMDNodeInContext2(ctx, option.as_mut_ptr(), option.len());
            // A loop node refers to itself (distinct per loop).
            let temp = LLVMTemporaryMDNode(ctx, std::ptr::null_mut(), 0);
            let mut ops = [temp, option];
            let node = LLVMMDNodeInContext2(ctx, ops.as_mut_ptr(), ops.len());
            LLVMMetadataReplaceAllUsesWith(temp, node);
            let name = "llvm.loop";
            let kind = LLVMGetMDKindIDInContext(ctx, name.as_ptr().cast(), name.len() as u32);
            LLVMSetMetadata(
                back_edge.as_value_ref(),
                kind,
                LLVMMetadataAsValue(ctx, node),
            );
        }
    }
}
