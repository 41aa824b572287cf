//! Loads, stores and atomics. Masked-off lanes never touch memory; in checked mode every
//! access is compared with the byte ranges of the parameters its pointer derives from, and
//! a fault is recorded (first one wins) instead of touching memory.

use super::{Gen, Lv};
use crate::launch::checked::PARAM_WORDS;
use crate::launch::race::{AccessKind, RACE_SYMBOL};
use crate::llvm::{Emitter, Positioned, Result};
use inkwell::basic_block::BasicBlock;
use inkwell::values::{BasicValue, BasicValueEnum, InstructionValue, IntValue, PointerValue};
use inkwell::AtomicOrdering;
use tritium_dsl::ir::{AtomicOp, CacheHints, Const, DType, Elem, Inst, Op, Value};

impl<'ctx> Gen<'ctx, '_> {
    /// In checked mode: i1 "address is inside a root buffer", recording a fault otherwise.
    /// Outside checked mode: `None`.
    fn check_access(
        &self,
        inst: &Inst,
        ptr_value: Value,
        p: PointerValue<'ctx>,
        size: usize,
    ) -> Result<Option<IntValue<'ctx>>> {
        if !self.checks(inst) {
            return Ok(None);
        }
        let addr = self.b.build_ptr_to_int(p, self.ctx.i64_type(), "addr")?;
        let write = !matches!(inst.op, Op::Load { .. });
        Ok(Some(self.in_buffers(ptr_value, addr, None, size, write)?))
    }

    /// i1: `size` bytes at `addr` (or `len` bytes of elements of `size`: a builtin's
    /// extent) lie inside a buffer pointer `ptr_value` may point into (a writable one for
    /// `write`).
    pub(super) fn in_buffers(
        &self,
        ptr_value: Value,
        addr: IntValue<'ctx>,
        len: Option<IntValue<'ctx>>,
        size: usize,
        write: bool,
    ) -> Result<IntValue<'ctx>> {
        let (bl, i64t) = (self.b, self.ctx.i64_type());
        let len = len.unwrap_or_else(|| self.i64c(size as u64));
        let word = |k: u64| -> Result<_> {
            // SAFETY (of the generated code): `ranges` holds the launch's check words.
            let p = unsafe { bl.build_gep(i64t, self.ranges, &[self.i64c(k)], "") }?;
            Ok(bl.build_load(i64t, p, "")?.into_int_value())
        };
        let params = self.f.params.len() as u64;
        if self.foreign.contains(&ptr_value) {
            // After the parameters' words and the race recorder's word.
            let at = self.i64c(PARAM_WORDS as u64 * params + 1);
            // SAFETY (of the generated code): the launcher appends the buffer list for
            // kernels with pointers made from integers.
            let list = unsafe { bl.build_gep(i64t, self.ranges, &[at], "buffers") }?;
            return self
                .emit()
                .in_any_buffer_extent(list, addr, len, size, write);
        }
        let all: Vec<usize> = (0..self.f.params.len()).collect();
        let roots = self.roots.get(&ptr_value).unwrap_or(&all);
        let mut ok = self.ctx.bool_type().const_zero();
        for &r in roots {
            if self.f.ty(self.f.params[r].value).elem.pointee().is_none() {
                continue;
            }
            let first = PARAM_WORDS as u64 * r as u64;
            let fields = [word(first)?, word(first + 1)?, word(first + 2)?];
            let inside = (self.emit()).in_buffer_extent(addr, len, size, fields, self.ranges)?;
            ok = bl.build_or(ok, inside, "")?;
        }
        Ok(ok)
    }

    /// Records a fault of memory op `inst` at `p` unless one was recorded already.
    fn record_fault(&self, inst: &Inst, p: PointerValue<'ctx>) -> Result<()> {
        let addr = self.b.build_ptr_to_int(p, self.ctx.i64_type(), "")?;
        self.record_fault_at(inst, addr)
    }

    /// [`Self::record_fault`] at address `addr`.
    pub(super) fn record_fault_at(&self, inst: &Inst, addr: IntValue<'ctx>) -> Result<()> {
        let id = self.site_ids[&(inst as *const Inst)];
        self.emit()
            .record_fault(self.func, self.err, id, addr, self.pids)
    }

    /// Branches to a new block when `cond` (and the bounds check) holds; returns the block
    /// the guarded code goes in and the join block. Records a fault when the check fails.
    fn guard(
        &self,
        inst: &Inst,
        ptr_value: Value,
        p: PointerValue<'ctx>,
        size: usize,
        mask: Option<IntValue<'ctx>>,
    ) -> Result<Option<Guard<'ctx>>> {
        let check = self.check_access(inst, ptr_value, p, size)?;
        if mask.is_none() && check.is_none() {
            return Ok(None);
        }
        let bl = self.b;
        let join = self.ctx.append_basic_block(self.func, "mem.join");
        let doit = self.ctx.append_basic_block(self.func, "mem.do");
        let mut skipped = Vec::new();
        if let Some(ok) = check {
            if let Some(m) = mask {
                let test = self.ctx.append_basic_block(self.func, "mem.check");
                skipped.push(bl.current_block()?);
                bl.build_conditional_branch(m, test, join)?;
                bl.position_at_end(test);
            }
            let fault = self.ctx.append_basic_block(self.func, "mem.fault");
            bl.build_conditional_branch(ok, doit, fault)?;
            bl.position_at_end(fault);
            self.record_fault(inst, p)?;
            skipped.push(bl.current_block()?);
            bl.build_unconditional_branch(join)?;
        } else {
            skipped.push(bl.current_block()?);
            bl.build_conditional_branch(mask.expect("checked above"), doit, join)?;
        }
        bl.position_at_end(doit);
        self.report_access(inst, p)?;
        Ok(Some(Guard { join, skipped }))
    }

    /// Race checking: tells the launch's recorder that this program accesses `p` with
    /// memory op `inst` (after its bounds check passed).
    fn report_access(&self, inst: &Inst, p: PointerValue<'ctx>) -> Result<()> {
        let Some(recorder) = self.race else {
            return Ok(());
        };
        let (ctx, i64t) = (self.ctx, self.ctx.i64_type());
        let ptr = ctx.ptr_type(inkwell::AddressSpace::default());
        let hook = self.module.get_function(RACE_SYMBOL).unwrap_or_else(|| {
            let mut params = vec![ptr.into()];
            params.extend([inkwell::types::BasicMetadataTypeEnum::from(i64t); 6]);
            let ty = ctx.void_type().fn_type(&params, false);
            self.module
                .add_function(RACE_SYMBOL, ty, Some(inkwell::module::Linkage::External))
        });
        let kind = match inst.op {
            Op::Load { .. } => AccessKind::Read,
            Op::Store { .. } => AccessKind::Write,
            _ => AccessKind::Atomic,
        };
        let bl = self.b;
        let addr = bl.build_ptr_to_int(p, i64t, "")?;
        let site = self.site_ids[&(inst as *const Inst)];
        let mut args: Vec<inkwell::values::BasicMetadataValueEnum> = vec![
            recorder.into(),
            addr.into(),
            i64t.const_int(kind as u64, false).into(),
            i64t.const_int(u64::from(site), false).into(),
        ];
        for pid in self.pids {
            args.push(bl.build_int_z_extend(pid, i64t, "")?.into());
        }
        bl.build_call(hook, &args, "")?;
        Ok(())
    }

    /// The mask of a masked load computed lazily inside `v` (`v` itself or a lazy operand,
    /// transitively), if any: the mask to version a loop over `v`'s lanes on.
    pub(super) fn load_mask_in(&self, v: Value) -> Option<Value> {
        let mut seen = std::collections::HashSet::new();
        let mut todo = vec![v];
        while let Some(v) = todo.pop() {
            if !seen.insert(v) || !matches!(self.lv.get(&v), Some(Lv::Lazy)) {
                continue;
            }
            let Some(inst) = self.defs.get(&v) else {
                continue;
            };
            if let Op::Load { mask: Some(m), .. } = &inst.op {
                if !self.true_masks.contains(m) {
                    return Some(*m);
                }
            }
            todo.extend(inst.op.operands());
        }
        None
    }

    pub(super) fn load_lane(
        &mut self,
        inst: &Inst,
        idx: &[IntValue<'ctx>],
    ) -> Result<BasicValueEnum<'ctx>> {
        let Op::Load {
            ptr,
            mask,
            other,
            hints,
        } = &inst.op
        else {
            unreachable!()
        };
        let hints = *hints;
        let rt = self.ty(inst.results[0]);
        let d = rt.dtype().expect("loads give numbers");
        let elem = Elem::Scalar(d);
        let p = self.lane(*ptr, idx)?.into_pointer_value();
        let m = mask
            .filter(|m| !self.true_masks.contains(m))
            .map(|m| -> Result<_> { Ok(self.lane(m, idx)?.into_int_value()) })
            .transpose()?;
        let o = match other {
            Some(o) => self.lane(*o, idx),
            None => Ok(self.const_value(Const::Int(0), d)),
        }?;
        let st = self.storage_ty(d);
        match self.guard(inst, *ptr, p, d.size_bytes(), m)? {
            None => {
                let raw = self.b.build_load(st, p, "")?;
                self.cache_hints(raw.as_instruction_value(), hints);
                Ok(self.decode_storage(raw, elem)?)
            }
            Some(guard) => {
                let raw = self.b.build_load(st, p, "")?;
                self.cache_hints(raw.as_instruction_value(), hints);
                let v = self.decode_storage(raw, elem)?;
                self.join(guard, v, o)
            }
        }
    }

    /// Honours a load's or store's cache hints on the host: `volatile` makes the access
    /// volatile. Streaming hints (`.cs`, `.cg`, `evict_first`) mark nothing: x86 has
    /// non-temporal vector stores only at the vector's alignment (SSE4A's scalar `movntss`
    /// aside), and LLVM's loop vectorizer leaves a loop of under-aligned non-temporal stores
    /// scalar: such a mark made tutorial-style `.cs` store loops run one lane at a time
    /// (`movntss` on AMD, a plain `vmovss` on the H100 machine's Xeon). Nor do loads: x86
    /// has no non-temporal load of ordinary memory. `.ca`, `.wb`, `.wt` and `evict_last`
    /// are what the CPU does anyway.
    fn cache_hints(&self, access: Option<InstructionValue<'ctx>>, hints: CacheHints) {
        if let (Some(i), true) = (access, hints.volatile) {
            let _ = i.set_volatile(true);
        }
    }

    pub(super) fn store(&mut self, inst: &Inst) -> Result<()> {
        let Op::Store {
            ptr,
            value,
            mask,
            hints,
        } = &inst.op
        else {
            unreachable!()
        };
        let hints = *hints;
        // A Simd call may have written the values in place (see `custom`).
        // There the next program's lines are requested at once: no store loop runs to
        // spread them over (the Simd add over 1024 floats spent a sixth of its time
        // in the zero fill of its out, waiting for those lines).
        let written = self.stored_in_place.remove(&(inst as *const Inst));
        let join = written
            .map(|done| -> Result<_> {
                let in_place = self.ctx.append_basic_block(self.func, "store.in_place");
                let store = self.ctx.append_basic_block(self.func, "store");
                let join = self.ctx.append_basic_block(self.func, "store.done");
                self.b.build_conditional_branch(done, in_place, store)?;
                self.b.position_at_end(in_place);
                self.prefetch_next_burst(*ptr, true)?;
                self.b.build_unconditional_branch(join)?;
                self.b.position_at_end(store);
                Ok(join)
            })
            .transpose()?;
        self.prefetch_next(*ptr, true)?;
        let pt = self.ty(*ptr).clone();
        let d = pt.elem.pointee().expect("verified pointer");
        let (ptr, value, mask) = (*ptr, *value, *mask);
        let version_on = mask.or_else(|| self.load_mask_in(value));
        let spread = self.spread_here(inst);
        self.versioned_lane_loop(version_on, (&[value], &[ptr]), &pt.shape, &mut |g| {
            let roots: Vec<Value> = [value, ptr].into_iter().chain(mask).collect();
            g.lane_loop(&pt.shape, (&roots, &[]), &spread, &mut |g, idx| {
                let p = g.lane(ptr, idx)?.into_pointer_value();
                let v = g.lane(value, idx)?;
                let m = mask
                    .filter(|m| !g.true_masks.contains(m))
                    .map(|m| -> Result<_> { Ok(g.lane(m, idx)?.into_int_value()) })
                    .transpose()?;
                let s = g.to_storage(v, Elem::Scalar(d))?;
                match g.guard(inst, ptr, p, d.size_bytes(), m)? {
                    None => {
                        let st = g.b.build_store(p, s)?;
                        g.cache_hints(Some(st), hints);
                    }
                    Some(guard) => {
                        let st = g.b.build_store(p, s)?;
                        g.cache_hints(Some(st), hints);
                        g.b.build_unconditional_branch(guard.join)?;
                        g.b.position_at_end(guard.join);
                    }
                }
                Ok(None)
            })
        })?;
        if let Some(join) = join {
            self.b.build_unconditional_branch(join)?;
            self.b.position_at_end(join);
        }
        Ok(())
    }

    pub(super) fn atomic(&mut self, inst: &'_ Inst) -> Result<()> {
        let r = inst.results[0];
        let rt = self.ty(r).clone();
        let d = rt.dtype().expect("atomics give numbers");
        let buf = (!rt.is_scalar()).then(|| self.alloc_buf(&rt)).transpose()?;
        let mut scalar = None;
        self.loop_nest(&rt.shape.clone(), &mut |g, idx| {
            let old = g.atomic_lane(inst, d, idx)?;
            match buf {
                Some(buf) => {
                    let s = g.to_storage(old, Elem::Scalar(d))?;
                    let p = g.buf_elem(buf, &rt, idx)?;
                    g.b.build_store(p, s)?;
                    Ok(())
                }
                None => {
                    scalar = Some(old);
                    Ok(())
                }
            }
        })?;
        let lv = match buf {
            Some(b) => Lv::Buf(b),
            None => Lv::Scalar(scalar.expect("the loop nest of a scalar runs once")),
        };
        self.lv.insert(r, lv);
        Ok(())
    }

    fn atomic_lane(
        &mut self,
        inst: &Inst,
        d: DType,
        idx: &[IntValue<'ctx>],
    ) -> Result<BasicValueEnum<'ctx>> {
        let (ptr, mask) = match &inst.op {
            Op::Atomic { ptr, mask, .. } => (*ptr, *mask),
            Op::AtomicCas { ptr, .. } => (*ptr, None),
            _ => unreachable!(),
        };
        let p = self.lane(ptr, idx)?.into_pointer_value();
        let m = mask
            .map(|m| -> Result<_> { Ok(self.lane(m, idx)?.into_int_value()) })
            .transpose()?;
        let (a, b) = match &inst.op {
            Op::Atomic { value, .. } => (self.lane(*value, idx)?, None),
            Op::AtomicCas { cmp, value, .. } => {
                (self.lane(*cmp, idx)?, Some(self.lane(*value, idx)?))
            }
            _ => unreachable!(),
        };
        let zero = self.const_value(Const::Int(0), d);
        let guarded = self.guard(inst, ptr, p, d.size_bytes(), m)?;
        let old = match &inst.op {
            Op::Atomic { op, .. } => self.rmw(*op, d, p, a),
            _ => {
                let r = self.b.build_cmpxchg(
                    p,
                    a.into_int_value(),
                    b.expect("cas value").into_int_value(),
                    AtomicOrdering::SequentiallyConsistent,
                    AtomicOrdering::SequentiallyConsistent,
                )?;
                Ok(self.b.build_extract_value(r, 0, "")?)
            }
        }?;
        match guarded {
            None => Ok(old),
            Some(guard) => self.join(guard, old, zero),
        }
    }

    /// `atomicrmw` for integers; a compare-exchange loop on the bits for floats.
    fn rmw(
        &self,
        op: AtomicOp,
        d: DType,
        p: PointerValue<'ctx>,
        v: BasicValueEnum<'ctx>,
    ) -> Result<BasicValueEnum<'ctx>> {
        if d.is_float() {
            Ok(self.emit().float_atomic_cas(op, d, p, v)?)
        } else {
            Ok(self.emit().int_atomic_rmw(op, d, p, v)?)
        }
    }
}

/// The blocks around a guarded memory access.
struct Guard<'ctx> {
    /// Where control continues after the access.
    join: BasicBlock<'ctx>,
    /// Blocks that branch to `join` without doing the access.
    skipped: Vec<BasicBlock<'ctx>>,
}

impl<'ctx> Gen<'ctx, '_> {
    /// Ends a guarded access: `done` where it happened, `skipped_value` where it did not.
    fn join(
        &self,
        guard: Guard<'ctx>,
        done: BasicValueEnum<'ctx>,
        skipped_value: BasicValueEnum<'ctx>,
    ) -> Result<BasicValueEnum<'ctx>> {
        let from = self.b.current_block()?;
        self.b.build_unconditional_branch(guard.join)?;
        self.b.position_at_end(guard.join);
        let phi = self.b.build_phi(done.get_type(), "")?;
        phi.add_incoming(&[(&done, from)]);
        for pred in &guard.skipped {
            phi.add_incoming(&[(&skipped_value, *pred)]);
        }
        Ok(phi.as_basic_value())
    }
}
