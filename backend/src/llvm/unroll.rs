//! LLVM loop metadata on a loop's back edge (LLVM's unroller and vectorizer read it; the
//! loop's meaning does not change): Triton's `loop_unroll_factor` for both generators,
//! `llvm.loop.unroll.count` for a factor of 2 or more, `llvm.loop.unroll.disable` for 1;
//! and the CPU's loops that should stay one vector (or one lane) per iteration.

use super::Emit;
use inkwell::values::{AsValueRef, InstructionValue};
use llvm_sys::core::{
    LLVMConstInt, LLVMGetMDKindIDInContext, LLVMInt32TypeInContext, LLVMMDNodeInContext2,
    LLVMMDStringInContext2, LLVMMetadataAsValue, LLVMSetMetadata, LLVMValueAsMetadata,
};
use llvm_sys::debuginfo::{LLVMMetadataReplaceAllUsesWith, LLVMTemporaryMDNode};

impl<'ctx> Emit<'_, 'ctx> {
    /// Marks `back_edge` (the branch to a loop's header) with `factor`.
    pub(crate) fn unroll_hint(&self, back_edge: InstructionValue<'ctx>, factor: u32) {
        if factor >= 2 {
            self.loop_options(back_edge, &[("llvm.loop.unroll.count", Some(factor))]);
        } else {
            self.loop_options(back_edge, &[("llvm.loop.unroll.disable", None)]);
        }
    }

    /// Marks `back_edge` so that the loop vectorizer takes one vector per iteration
    /// (`llvm.loop.interleave.count` 1) and nothing unrolls the loop.
    pub(crate) fn single_copy_hint(&self, back_edge: InstructionValue<'ctx>) {
        self.loop_options(
            back_edge,
            &[
                ("llvm.loop.interleave.count", Some(1)),
                ("llvm.loop.unroll.disable", None),
            ],
        );
    }

    /// Marks `back_edge` so that the loop stays one lane per iteration: neither vectorized
    /// (width and interleave count 1 read as vectorized already) nor unrolled.
    pub(crate) fn scalar_loop_hint(&self, back_edge: InstructionValue<'ctx>) {
        self.loop_options(
            back_edge,
            &[
                ("llvm.loop.vectorize.width", Some(1)),
                ("llvm.loop.interleave.count", Some(1)),
                ("llvm.loop.unroll.disable", None),
            ],
        );
    }

    /// Attaches a distinct `llvm.loop` node holding `options` (each a name and an optional
    /// i32 operand) to `back_edge`.
    fn loop_options(&self, back_edge: InstructionValue<'ctx>, options: &[(&str, Option<u32>)]) {
        let ctx = self.ctx.raw();
        let string = |s: &str| {
            // SAFETY: `ctx` is this module's live context; the bytes are copied.
            unsafe { LLVMMDStringInContext2(ctx, s.as_ptr().cast(), s.len()) }
        };
        // SAFETY: every call gets the live context and metadata made from it; the
        // temporary node is replaced (and freed) before the loop node is attached.
        unsafe {
            // A loop node refers to itself (distinct per loop).
            let temp = LLVMTemporaryMDNode(ctx, std::ptr::null_mut(), 0);
            let mut ops = vec![temp];
            for (name, value) in options {
                let mut option = vec![string(name)];
                if let Some(v) = value {
                    let c = LLVMConstInt(LLVMInt32TypeInContext(ctx), u64::from(*v), 0);
                    option.push(LLVMValueAsMetadata(c));
                }
                ops.push(LLVMMDNodeInContext2(ctx, option.as_mut_ptr(), option.len()));
            }
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
