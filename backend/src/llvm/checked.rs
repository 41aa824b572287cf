//! Checked mode's bounds compare and fault record (see `launch/checked.rs`), shared by both
//! generators; where the ranges and the record live differs per target.

use super::Emit;
use inkwell::values::{FunctionValue, IntValue, PointerValue};
use inkwell::{AtomicOrdering, IntPredicate};

impl<'ctx> Emit<'_, 'ctx> {
    /// i1: `[addr, addr + size)` lies inside `[lo, hi)` (i64 byte addresses). Compared as
    /// `lo <= addr <= hi && hi - addr >= size` so that an address within `size` bytes of
    /// 2^64 does not wrap its end around to a small, "inside" value.
    pub(crate) fn in_range(
        &self,
        addr: IntValue<'ctx>,
        size: usize,
        lo: IntValue<'ctx>,
        hi: IntValue<'ctx>,
    ) -> IntValue<'ctx> {
        let b = self.b;
        let size = self.ctx.i64_type().const_int(size as u64, false);
        let above = b
            .build_int_compare(IntPredicate::UGE, addr, lo, "")
            .unwrap();
        let below = b
            .build_int_compare(IntPredicate::ULE, addr, hi, "")
            .unwrap();
        let room = b.build_int_sub(hi, addr, "").unwrap();
        let fits = b
            .build_int_compare(IntPredicate::UGE, room, size, "")
            .unwrap();
        let ok = b.build_and(above, below, "").unwrap();
        b.build_and(ok, fits, "inbounds").unwrap()
    }

    /// Claims the fault record at `record` for memory op `site` (its index in
    /// `fault_sites`) unless a fault was recorded already, then fills in the address and
    /// the program id (i32 each). Leaves the builder in a new block of `func`.
    pub(crate) fn record_fault(
        &self,
        func: FunctionValue<'ctx>,
        record: PointerValue<'ctx>,
        site: u32,
        addr: IntValue<'ctx>,
        pids: [IntValue<'ctx>; 3],
    ) {
        let (b, i64t) = (self.b, self.ctx.i64_type());
        let seq = AtomicOrdering::SequentiallyConsistent;
        let id = i64t.const_int(site as u64 + 1, false);
        let r = b
            .build_cmpxchg(record, i64t.const_zero(), id, seq, seq)
            .unwrap();
        let won = b.build_extract_value(r, 1, "").unwrap().into_int_value();
        let first = self.ctx.append_basic_block(func, "fault.first");
        let done = self.ctx.append_basic_block(func, "fault.done");
        b.build_conditional_branch(won, first, done).unwrap();
        b.position_at_end(first);
        let words = [addr]
            .into_iter()
            .chain(pids.map(|p| b.build_int_z_extend(p, i64t, "").unwrap()));
        for (k, w) in words.enumerate() {
            // SAFETY (of the generated code): the record has `FAULT_WORDS` (5) u64 words.
            let slot =
                unsafe { b.build_gep(i64t, record, &[i64t.const_int(k as u64 + 1, false)], "") }
                    .unwrap();
            b.build_store(slot, w).unwrap();
        }
        b.build_unconditional_branch(done).unwrap();
        b.position_at_end(done);
    }
}
