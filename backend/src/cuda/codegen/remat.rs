//! Index tiles evaluated again after a tensor-core loop.
//!
//! LLVM keeps one copy of each expression, so the per-slot index tiles computed before a
//! loop (row offsets, masks, the epilogue's store pointers, which equal the prologue's load
//! pointers) stay live across it beside the loop's fragments, and ptxas spills them to the
//! stack (attention's forward pass: 348 bytes). After a loop around a tensor-core `dot`,
//! the thread index is read again (a volatile `mov`, which nothing merges with the first
//! read) and the index tiles that the rest of the block uses are evaluated again from it:
//! a few integer ops, once, instead of spills.

use super::{Gen, V};
use crate::llvm::Result;
use inkwell::values::IntValue;
use std::collections::HashSet;
use tritium_dsl::ir::{Inst, Op, Value};

impl<'ctx> Gen<'ctx, '_> {
    /// Whether `inst` is a loop whose body holds a tensor-core `dot`.
    pub(super) fn is_mma_loop(&self, inst: &Inst) -> bool {
        match &inst.op {
            Op::For { body, .. } => body.insts.iter().any(|i| self.mma_shape(i).is_some()),
            _ => false,
        }
    }

    /// After an [`is_mma_loop`](Self::is_mma_loop): the thread index read again and the
    /// index tiles that `later` (the rest of the block) uses evaluated again from it. The
    /// new values dominate only the rest of this block: returns the ones they replace, for
    /// the block to restore at its end (as it restores the thread index).
    pub(super) fn rematerialize_after(&mut self, later: &[Inst]) -> Result<Vec<(Value, V<'ctx>)>> {
        fn operands(insts: &[Inst], out: &mut HashSet<Value>) {
            for i in insts {
                out.extend(i.op.operands());
                for r in i.op.regions() {
                    operands(&r.insts, out);
                }
            }
        }
        let mut used = HashSet::new();
        operands(later, &mut used);
        let mut again: Vec<Value> = (used.into_iter())
            .filter(|v| {
                matches!(self.vals.get(v), Some(V::Tile(_)))
                    && !self.ty(*v).is_scalar()
                    && self.is_index_value(*v)
            })
            .collect();
        if again.is_empty() {
            return Ok(Vec::new());
        }
        again.sort_by_key(|v| v.index());
        self.tid = self.fresh_tid()?;
        let mut replaced = Vec::with_capacity(again.len());
        for v in again {
            let shape = self.ty(v).shape.clone();
            let numel = self.ty(v).numel();
            let slots = (0..self.slots(numel))
                .map(|j| {
                    let lin = self.clamped_lin(numel, j)?;
                    let idx = self.unravel(&shape, lin)?;
                    self.eval_at(v, &idx)
                })
                .collect::<Result<_>>()?;
            if let Some(old) = self.vals.insert(v, V::Tile(slots)) {
                replaced.push((v, old));
            }
        }
        Ok(replaced)
    }

    /// `%tid.x` read by a volatile `mov` (the emulator's thread word).
    fn fresh_tid(&self) -> Result<IntValue<'ctx>> {
        if self.emu.is_some() {
            return self.special_register("tid.x");
        }
        let i32t = self.ctx.i32_type();
        let fn_ty = i32t.fn_type(&[], false);
        let asm = "mov.u32 $0, %tid.x;".to_string();
        let f = (self.ctx).create_inline_asm(fn_ty, asm, "=r".into(), true, false, None, false);
        let call = self.b.build_indirect_call(fn_ty, f, &[], "tid")?;
        match call.try_as_basic_value() {
            inkwell::values::ValueKind::Basic(v) => Ok(v.into_int_value()),
            inkwell::values::ValueKind::Instruction(_) => unreachable!("returns the index"),
        }
    }
}
