//! A `dot`'s packed `b` tiles kept across the programs a worker runs, as BLAS libraries
//! keep a packed panel of `B` for every block of rows of `A`.
//!
//! In tutorial 03 the programs of one column of blocks of `c` read the same `b` tiles, one
//! per iteration of their K loop, and a worker runs them one after the other (the grid's
//! first axis varies fastest, and each worker takes ranges of consecutive programs). Each
//! program copied every tile into the micro-kernel's panels again: 8% of the time at
//! 4096³. Here the copy of iteration `k` goes to slot `k` of a per-thread cache, keyed by
//! the addresses of the tile's rows, and the next program whose tile has the same rows
//! finds it packed. Tutorial 03 at 4096³ went from 0.85–0.88 of OpenBLAS to 0.90–0.91
//! (`bench_table attention`, alternated with the build before). The micro-kernels request
//! the next iteration's tiles of `a` only (`dot`).
//!
//! The key is exact: the tile is taken as runs along its rows (`runs`), so the row
//! addresses name every lane's address, and only the all-true copy fills or reads a
//! slot. The entry clears every slot when it starts a range of programs, so a slot never
//! outlives one launch. Memory may not change under a slot: the cache is used only in a
//! kernel that writes no memory before the `dot` in program order (no store, atomic or
//! custom op that writes, up to the end of the outermost statement holding the `dot`), and
//! a program writing what another one reads is a race, which Triton leaves undefined (and
//! race checking, which keeps nothing, reports). Checked code keeps nothing either.

use crate::cpu::codegen::{Gen, Lv};
use crate::llvm::{Positioned, Result};
use inkwell::values::{IntValue, PointerValue};
use inkwell::IntPredicate;
use tritium_dsl::ir::{Block, Function, Inst, Op, Value};

/// Slots (loop iterations) a cache holds at most; later iterations copy as before.
const MAX_SLOTS: usize = 256;
/// Bytes of scratch one cache may take, per thread: 126 slots of 64 × 256 f32 tiles
/// (tutorial 03's K loop up to 8064 deep), 252 of 64 × 128.
const MAX_BYTES: usize = 8 << 20;
/// Fewer slots than this are not worth the scratch.
const MIN_SLOTS: usize = 8;

/// The per-thread cache of one `dot`'s `b` operand.
pub(super) struct PanelCache<'ctx> {
    /// `slots` i64 flags, set when the slot holds a tile.
    valid: PointerValue<'ctx>,
    /// `slots × rows` i64 addresses of the rows the slot's tile was packed from.
    keys: PointerValue<'ctx>,
    /// `slots × slot_bytes` of packed tiles.
    data: PointerValue<'ctx>,
    rows: usize,
    slot_bytes: usize,
    slots: usize,
    /// The iteration of the `dot`'s innermost loop.
    trip: IntValue<'ctx>,
    /// The pointer tile of the load being packed.
    ptr: Value,
    /// The load's mask.
    mask: Option<Value>,
}

impl<'ctx> Gen<'ctx, '_> {
    /// A cache for the packed copy of `b`, a `rows × ·` tile taking `bytes` once packed,
    /// when the `dot` is in a loop and `b` is a load nothing before it may have written.
    pub(super) fn panel_cache(
        &mut self,
        dot: &Inst,
        b: Value,
        rows: usize,
        bytes: usize,
    ) -> Result<Option<PanelCache<'ctx>>> {
        if self.reads_checked(b) || self.opts.race_check || may_write_before(self.f, dot) {
            return Ok(None);
        }
        let Some(trip) = self.loops.last().map(|l| l.trip) else {
            return Ok(None);
        };
        if !matches!(self.lv.get(&b), Some(Lv::Lazy)) {
            return Ok(None);
        }
        // A volatile load reads memory every time.
        let Some(Op::Load {
            ptr, mask, hints, ..
        }) = self.defs.get(&b).map(|i| &i.op)
        else {
            return Ok(None);
        };
        if hints.volatile {
            return Ok(None);
        }
        let slot_bytes = bytes.div_ceil(64) * 64;
        let slots = (MAX_BYTES / (slot_bytes + rows * 8 + 8)).min(MAX_SLOTS);
        if slots < MIN_SLOTS {
            return Ok(None);
        }
        let (ptr, mask) = (*ptr, *mask);
        let valid = self.alloc_cleared(slots * 8)?;
        let keys = self.alloc_bytes(slots * rows * 8)?;
        let data = self.alloc_bytes(slots * slot_bytes)?;
        Ok(Some(PanelCache {
            valid,
            keys,
            data,
            rows,
            slot_bytes,
            slots,
            trip,
            ptr,
            mask,
        }))
    }

    /// Whether the copy being generated may use `cache`: the all-true copy, with the
    /// tile's rows taken as runs.
    pub(super) fn may_use(&self, cache: &PanelCache<'ctx>) -> bool {
        self.runs.contains(&cache.ptr) && cache.mask.is_none_or(|m| self.true_masks.contains(&m))
    }

    /// The packed tile of this iteration in `cache`, copied there by `copy` (into the
    /// buffer it is given) unless the slot holds the tile of the same rows already; past
    /// the cache's slots, copied into `fallback`. One copy of the copy's code serves both.
    pub(super) fn cached_copy(
        &mut self,
        cache: &PanelCache<'ctx>,
        fallback: PointerValue<'ctx>,
        copy: &mut dyn FnMut(&mut Self, PointerValue<'ctx>) -> Result<()>,
    ) -> Result<PointerValue<'ctx>> {
        let i64t = self.ctx.i64_type();
        let ptr_t = self.ctx.ptr_type(Default::default());
        let in_cache = self.b.build_int_compare(
            IntPredicate::ULT,
            cache.trip,
            self.i64c(cache.slots as u64),
            "",
        )?;
        let outside = self.b.current_block()?;
        let cached_bb = self.ctx.append_basic_block(self.func, "panel.cached");
        let copy_bb = self.ctx.append_basic_block(self.func, "panel.copy");
        let done_bb = self.ctx.append_basic_block(self.func, "panel.done");
        self.b
            .build_conditional_branch(in_cache, cached_bb, copy_bb)?;
        // The slot: compare and replace its keys, then copy unless they were the same.
        self.b.position_at_end(cached_bb);
        let slot_data = self.byte_offset(cache.data, cache.trip, cache.slot_bytes)?;
        let slot_keys = self.byte_offset(cache.keys, cache.trip, cache.rows * 8)?;
        let same = self.entry_alloca(self.ctx.bool_type().into())?;
        self.b
            .build_store(same, self.ctx.bool_type().const_all_ones())?;
        self.counted_loop(cache.rows, super::LoopUnroll::Never, &mut |g, r| {
            let first = g.lane(cache.ptr, &[r, g.i64c(0)])?.into_pointer_value();
            let addr = g.b.build_ptr_to_int(first, i64t, "")?;
            // SAFETY (of the generated code): `r < rows`, inside the slot's keys.
            let key = unsafe { g.b.build_in_bounds_gep(i64t, slot_keys, &[r], "key")? };
            let old = g.b.build_load(i64t, key, "")?.into_int_value();
            g.b.build_store(key, addr)?;
            let eq = g.b.build_int_compare(IntPredicate::EQ, old, addr, "")?;
            let acc =
                g.b.build_load(g.ctx.bool_type(), same, "")?
                    .into_int_value();
            let acc = g.b.build_and(acc, eq, "")?;
            g.b.build_store(same, acc)?;
            Ok(())
        })?;
        // SAFETY (of the generated code): `trip < slots`.
        let flag = unsafe {
            self.b
                .build_in_bounds_gep(i64t, cache.valid, &[cache.trip], "")?
        };
        let was = self.b.build_load(i64t, flag, "")?.into_int_value();
        let was = self
            .b
            .build_int_compare(IntPredicate::NE, was, self.i64c(0), "")?;
        self.b.build_store(flag, self.i64c(1))?;
        let same = self
            .b
            .build_load(self.ctx.bool_type(), same, "")?
            .into_int_value();
        let hit = self.b.build_and(was, same, "")?;
        let slot_end = self.b.current_block()?;
        self.b.build_conditional_branch(hit, done_bb, copy_bb)?;
        // A copy into the slot (a miss) or into `fallback` (past the slots).
        self.b.position_at_end(copy_bb);
        let to = self.b.build_phi(ptr_t, "panel.to")?;
        to.add_incoming(&[(&fallback, outside), (&slot_data, slot_end)]);
        let to = to.as_basic_value().into_pointer_value();
        copy(self, to)?;
        let copy_end = self.b.current_block()?;
        self.b.build_unconditional_branch(done_bb)?;
        self.b.position_at_end(done_bb);
        let phi = self.b.build_phi(ptr_t, "panel")?;
        phi.add_incoming(&[(&slot_data, slot_end), (&to, copy_end)]);
        Ok(phi.as_basic_value().into_pointer_value())
    }

    /// `base + i · stride` bytes.
    fn byte_offset(
        &self,
        base: PointerValue<'ctx>,
        i: IntValue<'ctx>,
        stride: usize,
    ) -> Result<PointerValue<'ctx>> {
        let off = self.b.build_int_mul(i, self.i64c(stride as u64), "")?;
        // SAFETY (of the generated code): `i` is below the region's count of strides.
        Ok(unsafe {
            self.b
                .build_in_bounds_gep(self.ctx.i8_type(), base, &[off], "")?
        })
    }
}

/// Whether memory may be written, in program order, before the last run of `dot`: by an
/// instruction of the function's body up to the one holding `dot`, or inside that one.
fn may_write_before(f: &Function, dot: &Inst) -> bool {
    for inst in &f.body.insts {
        if writes(&inst.op) {
            return true;
        }
        if std::ptr::eq(inst, dot) || inst.op.regions().into_iter().any(|r| holds(r, dot)) {
            return false;
        }
    }
    true
}

/// Whether `op` (or an op in its regions) may write memory: a store, an atomic, or a
/// custom op that writes through its pointers.
fn writes(op: &Op) -> bool {
    match op {
        Op::Store { .. } | Op::Atomic { .. } | Op::AtomicCas { .. } => true,
        Op::Custom(c) => c.writes_memory(),
        _ => op
            .regions()
            .into_iter()
            .any(|r| r.insts.iter().any(|i| writes(&i.op))),
    }
}

/// Whether `inst` is in `b`, at any depth.
fn holds(b: &Block, inst: &Inst) -> bool {
    b.insts
        .iter()
        .any(|i| std::ptr::eq(i, inst) || i.op.regions().into_iter().any(|r| holds(r, inst)))
}
