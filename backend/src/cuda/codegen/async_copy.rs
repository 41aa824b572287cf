//! `cp.async`: a 16-bit (or fp8) tile loaded only to be a tensor-core `dot` operand goes
//! from global to shared memory without passing through registers.
//!
//! Such a `load` is *deferred*: nothing is emitted where it stands, and the `dot` copies
//! its tile straight into the operand's swizzled layout (`swizzle.rs`), 16 bytes (8
//! elements of a row, 16 of fp8) per `cp.async.cg.shared.global` of each thread, then
//! waits for its group before the barrier that precedes the fragment reads. This is Triton's operand path
//! on Ampere and later. A load is deferred when its pointers, mask and `other` are index
//! expressions (`recompute.rs`: computable at any lane, so at the `dot`), its result has
//! no other use, the `dot` follows in the same block with no op between them that writes
//! memory or holds a region, and the kernel is not in checked mode.
//!
//! Each chunk takes `cp.async` when, at run time, its pointers are consecutive and the
//! first 16-byte aligned, and its mask is all true (16 bytes copied) or all false with
//! `other` zero or absent (`ignore-src`: the chunk is zero-filled, nothing read). Any other
//! chunk is loaded element by element, masked lanes giving `other`, and stored as one
//! 16-byte vector. In the emulator the copy lands only at the thread's `wait_group`: until
//! then its destination holds NaNs, so a read without the wait fails a test.

use super::swizzle::{Swizzled, CHUNK_BYTES};
use super::sync::{EMU_CP_ASYNC, EMU_CP_ASYNC_GROUP};
use super::Gen;
use crate::llvm::{Emitter, Result};
use inkwell::values::{BasicValueEnum, IntValue, PointerValue};
use inkwell::IntPredicate;
use std::collections::HashSet;
use tritium_dsl::ir::{Block, Const, Elem, Inst, Op, Value};

/// The emulator's group hook code for `commit_group` (any other code: `wait_group n`).
pub(crate) const EMU_COMMIT: u32 = u32::MAX;

/// Elements of `x`'s dtype in one copied chunk.
fn chunk_elems(g: &Gen<'_, '_>, x: Value) -> usize {
    CHUNK_BYTES / g.ty(x).dtype().map_or(2, |d| d.size_bytes())
}

impl<'ctx> Gen<'ctx, '_> {
    /// The results of the loads that the `dot` using them may copy with `cp.async`, by
    /// their place in the IR alone (see the module docs; whether their operands are index
    /// expressions is decided where they are generated).
    pub(super) fn find_async_candidates(&self) -> HashSet<Value> {
        let mut found = HashSet::new();
        if !self.checked_mode() {
            self.candidates_in(&self.f.body, &mut found);
        }
        // A checked load goes slot by slot through its check.
        found.retain(|v| !self.checked_load(*v));
        found
    }

    fn candidates_in(&self, block: &Block, found: &mut HashSet<Value>) {
        for (i, inst) in block.insts.iter().enumerate() {
            for region in inst.op.regions() {
                self.candidates_in(region, found);
            }
            let Op::Dot { a, b, .. } = &inst.op else {
                continue;
            };
            let Some((inputs, _)) = self.mma_shape(inst) else {
                continue;
            };
            for x in [*a, *b] {
                // fp8 tiles are K-major: a `b` is copied only by columns.
                if x == *b && inputs.is_fp8() && !self.copies_columns(x) {
                    continue;
                }
                let Some(j) = block.insts[..i]
                    .iter()
                    .rposition(|l| matches!(l.op, Op::Load { .. }) && l.results[0] == x)
                else {
                    continue;
                };
                let quiet = block.insts[j + 1..i].iter().all(|between| {
                    between.op.regions().is_empty()
                        && !matches!(
                            between.op,
                            Op::Store { .. }
                                | Op::Atomic { .. }
                                | Op::AtomicCas { .. }
                                | Op::Custom(_)
                        )
                });
                let whole_chunks = self.ty(x).shape[1].is_multiple_of(chunk_elems(self, x));
                if quiet && self.f.uses(x) == 1 && whole_chunks {
                    found.insert(x);
                }
            }
        }
    }

    /// Whether the `load` `inst` is left for its `dot` to copy (then nothing is emitted).
    pub(super) fn defer_load(&mut self, inst: &'_ Inst) -> bool {
        let Op::Load {
            ptr, mask, other, ..
        } = &inst.op
        else {
            return false;
        };
        let r = inst.results[0];
        if !self.async_candidates.contains(&r) {
            return false;
        }
        let index_expression = |g: &Self, v: Value| g.is_index_value(v);
        if !(index_expression(self, *ptr)
            && mask.is_none_or(|m| index_expression(self, m))
            && other.is_none_or(|o| index_expression(self, o)))
        {
            return false;
        }
        self.deferred.insert(r);
        true
    }

    /// Copies the deferred load defining `x` into `tile` (see the module docs); the
    /// caller commits and waits ([`Self::wait_async_copies`]).
    ///
    /// With `columns`, the tile is stored transposed (`tile` is `cols × rows` of the loaded
    /// tile): each chunk is consecutive rows of one column, for a `b` whose columns lie
    /// contiguous in memory (`kᵀ` in attention; see [`Self::copies_columns`]).
    pub(super) fn copy_operand(
        &mut self,
        x: Value,
        tile: Swizzled,
        columns: bool,
        stage_base: IntValue<'ctx>,
    ) -> Result<()> {
        let load = self.defs[&x];
        let Op::Load {
            ptr,
            mask,
            other,
            hints,
        } = &load.op
        else {
            unreachable!("deferred values are loads")
        };
        let d = self.ty(x).dtype().expect("loads give numbers");
        let elem = Elem::Scalar(d);
        let st = self.storage_ty(d);
        let other_is_zero = other.is_none_or(|o| self.is_positive_zero(o));
        let axis = if columns { 0 } else { self.ty(x).rank() - 1 };
        let per_chunk = tile.chunk_elems();
        let proven = self.chunks_proven(*ptr, *mask, axis, per_chunk);
        let (b, i64t) = (self.b, self.ctx.i64_type());
        let per_row = tile.cols / per_chunk;
        let chunks = tile.rows * per_row;
        // When every round's chunks sit in the same column, a whole number of swizzle
        // periods below the previous round's, their shared offsets differ by constants:
        // one address serves every round (`[r + 0x800]`, as in Triton's loop).
        let step = self.threads / per_row;
        let (per_phase, phases) = tile.phases();
        let periodic =
            self.threads.is_multiple_of(per_row) && step.is_multiple_of(per_phase * phases);
        let first = match periodic {
            true => {
                let (row, col, byte) = self.chunk_place(&tile, self.tid, per_row)?;
                let dst = self.shared_byte(b.build_int_add(byte, stage_base, "")?)?;
                Some((row, col, dst))
            }
            false => None,
        };
        for round in 0..chunks.div_ceil(self.threads) {
            let q = b.build_int_add(self.tid, self.i32c((round * self.threads) as u64), "")?;
            let (valid, q) = if (round + 1) * self.threads <= chunks {
                (None, q)
            } else {
                let (ok, q) = self.below_or_zero(q, chunks)?;
                (Some(ok), q)
            };
            let (row, col, dst) = match first {
                Some((row0, col, dst0)) => {
                    let below = |v: usize| self.i32c((round * step * v) as u64);
                    let row = b.build_int_nuw_add(row0, below(1), "")?;
                    let dst = self.shared_offset(dst0, below(tile.row_stride()))?;
                    (row, col, dst)
                }
                None => {
                    let (row, col, byte) = self.chunk_place(&tile, q, per_row)?;
                    let dst = self.shared_byte(b.build_int_add(byte, stage_base, "")?)?;
                    (row, col, dst)
                }
            };
            // The loaded tile's index of element `e` of the chunk.
            let at = |g: &Self, e: usize| -> Result<Vec<IntValue<'ctx>>> {
                let along = g.b.build_int_add(col, g.i32c(e as u64), "")?;
                Ok(match columns {
                    true => vec![along, row],
                    false => vec![row, along],
                })
            };
            self.when(valid, &mut |g| {
                if proven {
                    // One lane stands for the chunk: its pointer starts the aligned run, its
                    // mask is the chunk's.
                    let p0 = g.eval_at(*ptr, &at(g, 0)?)?.into_pointer_value();
                    let m0 = match mask {
                        Some(m) => g.eval_at(*m, &at(g, 0)?)?.into_int_value(),
                        None => g.ctx.bool_type().const_all_ones(),
                    };
                    if other_is_zero {
                        return g.cp_async(dst, p0, m0);
                    }
                    g.two_paths(
                        m0,
                        &mut |g| {
                            g.cp_async(dst, p0, g.ctx.bool_type().const_all_ones())?;
                            Ok(Vec::new())
                        },
                        &mut |g| {
                            let o = other.expect("a nonzero `other`");
                            g.store_other(o, dst, elem, per_chunk, &at)?;
                            Ok(Vec::new())
                        },
                    )?;
                    return Ok(());
                }
                let ptrs: Vec<PointerValue<'ctx>> = (0..per_chunk)
                    .map(|e| Ok(g.eval_at(*ptr, &at(g, e)?)?.into_pointer_value()))
                    .collect::<Result<_>>()?;
                let lanes: Option<Vec<IntValue<'ctx>>> = mask
                    .map(|m| {
                        (0..per_chunk)
                            .map(|e| Ok(g.eval_at(m, &at(g, e)?)?.into_int_value()))
                            .collect::<Result<_>>()
                    })
                    .transpose()?;
                let addr = |p: PointerValue<'ctx>| g.b.build_ptr_to_int(p, i64t, "");
                let (first, last) = (addr(ptrs[0])?, addr(ptrs[per_chunk - 1])?);
                let span = g.b.build_int_sub(last, first, "")?;
                let whole = (per_chunk - 1) * tile.elem;
                let consecutive = g.b.build_int_compare(
                    IntPredicate::EQ,
                    span,
                    i64t.const_int(whole as u64, false),
                    "",
                )?;
                let low = g.b.build_and(first, i64t.const_int(15, false), "")?;
                let aligned =
                    g.b.build_int_compare(IntPredicate::EQ, low, i64t.const_zero(), "")?;
                let mut fast = g.b.build_and(consecutive, aligned, "")?;
                let mut all = g.ctx.bool_type().const_all_ones();
                if let Some(lanes) = &lanes {
                    let mut any = g.ctx.bool_type().const_zero();
                    for l in lanes {
                        all = g.b.build_and(all, *l, "")?;
                        any = g.b.build_or(any, *l, "")?;
                    }
                    let none = g.b.build_not(any, "")?;
                    let uniform = match other_is_zero {
                        true => g.b.build_or(all, none, "")?,
                        false => all,
                    };
                    fast = g.b.build_and(fast, uniform, "")?;
                }
                g.two_paths(
                    fast,
                    &mut |g| {
                        g.cp_async(dst, ptrs[0], all)?;
                        Ok(Vec::new())
                    },
                    &mut |g| {
                        let vt = st.into_int_type().vec_type(per_chunk as u32);
                        let mut v = vt.get_undef();
                        for (e, p) in ptrs.iter().enumerate() {
                            let fallback = match other {
                                Some(o) => {
                                    let o = g.eval_at(*o, &at(g, e)?)?;
                                    g.to_storage(o, elem)?
                                }
                                None => st.into_int_type().const_zero().into(),
                            };
                            let cond = lanes.as_ref().map(|l| l[e]);
                            let x = g.when_value(cond, fallback, &mut |g| {
                                g.global_load(st, *p, *hints)
                            })?;
                            v = g.b.build_insert_element(v, x, g.i32c(e as u64), "")?;
                        }
                        let store = g.b.build_store(dst, v)?;
                        store.set_alignment(CHUNK_BYTES as u32)?;
                        Ok(Vec::new())
                    },
                )?;
                Ok(())
            })?;
        }
        Ok(())
    }

    /// Chunk `q` (row-major, `per_row` chunks a row) of `tile`: its row, its first
    /// column and its byte offset in shared memory.
    fn chunk_place(
        &self,
        tile: &Swizzled,
        q: IntValue<'ctx>,
        per_row: usize,
    ) -> Result<(IntValue<'ctx>, IntValue<'ctx>, IntValue<'ctx>)> {
        let b = self.b;
        let row = b.build_int_unsigned_div(q, self.i32c(per_row as u64), "")?;
        let c8 = b.build_int_unsigned_rem(q, self.i32c(per_row as u64), "")?;
        let col = b.build_int_mul(c8, self.i32c(tile.chunk_elems() as u64), "")?;
        Ok((row, col, self.swizzled_element(tile, row, col)?))
    }

    /// Whether every chunk (`per_chunk` lanes along `last`) is known, without a test, to be
    /// one aligned 16-byte run under a mask equal for its lanes (`dsl::ir::axis_info`,
    /// given the launch's specialization).
    fn chunks_proven(
        &self,
        ptr: Value,
        mask: Option<Value>,
        last: usize,
        per_chunk: usize,
    ) -> bool {
        let Some(p) = self.axis.get(&ptr) else {
            return false;
        };
        let runs =
            p.contiguity[last] >= per_chunk as u64 && p.divisibility[last] >= CHUNK_BYTES as u64;
        let uniform = mask.is_none_or(|m| {
            self.ty(m).is_scalar()
                || self
                    .axis
                    .get(&m)
                    .is_some_and(|i| i.constancy[last] >= per_chunk as u64)
        });
        runs && uniform
    }

    /// Whether the deferred load `x` (a `dot`'s `b`) is copied by columns: its pointers
    /// step by one element down its columns and not along its rows. This chooses a layout,
    /// not a proof: each chunk is still tested, or proven by [`Self::chunks_proven`].
    pub(super) fn copies_columns(&self, x: Value) -> bool {
        let Op::Load { ptr, .. } = &self.defs[&x].op else {
            return false;
        };
        let Some(lanes) = tritium_dsl::ir::affine_lanes(self.f, &self.defs, *ptr) else {
            return false;
        };
        self.ty(x).shape[0].is_multiple_of(chunk_elems(self, x))
            && lanes.strides[0] == Some(1)
            && lanes.strides[1] != Some(1)
    }

    /// Stores `other`'s lanes of the chunk at `at(0..per_chunk)` to `dst` as one 16-byte
    /// vector.
    fn store_other(
        &mut self,
        other: Value,
        dst: PointerValue<'ctx>,
        elem: Elem,
        per_chunk: usize,
        at: &dyn Fn(&Self, usize) -> Result<Vec<IntValue<'ctx>>>,
    ) -> Result<()> {
        let st = self.storage_ty(elem.dtype().expect("a number"));
        let vt = st.into_int_type().vec_type(per_chunk as u32);
        let mut v = vt.get_undef();
        for e in 0..per_chunk {
            let o = self.eval_at(other, &at(self, e)?)?;
            let x = self.to_storage(o, elem)?;
            v = self.b.build_insert_element(v, x, self.i32c(e as u64), "")?;
        }
        let store = self.b.build_store(dst, v)?;
        store.set_alignment(CHUNK_BYTES as u32)?;
        Ok(())
    }

    /// Whether `v` is the constant +0 (a constant, or a splat of one).
    pub(super) fn is_positive_zero(&self, v: Value) -> bool {
        match self.defs.get(&v).map(|i| &i.op) {
            Some(Op::Const(c)) => is_zero(c),
            Some(Op::Splat(x)) => self.is_positive_zero(*x),
            _ => false,
        }
    }

    /// Commits this thread's copies as a group and waits for every group.
    pub(super) fn wait_async_copies(&self) -> Result<()> {
        self.commit_copies()?;
        self.wait_copies(0)
    }

    /// `cp.async.commit_group`: this thread's copies since the last one form a group.
    pub(super) fn commit_copies(&self) -> Result<()> {
        match self.emu.is_some() {
            true => self.emulator_copy_group(EMU_COMMIT),
            false => self.nvvm_call("llvm.nvvm.cp.async.commit.group", &[]),
        }
    }

    /// `cp.async.wait_group n`: every group but the `n` newest has landed.
    pub(super) fn wait_copies(&self, n: u32) -> Result<()> {
        match self.emu.is_some() {
            true => self.emulator_copy_group(n),
            false => self.nvvm_call(
                "llvm.nvvm.cp.async.wait.group",
                &[self.i32c(u64::from(n)).into()],
            ),
        }
    }

    /// `cp.async.cg.shared.global [dst], [src], 16`: 16 bytes from `src` where `copy` (an
    /// `i1`), else 16 zero bytes, `src` not read.
    ///
    /// From PTX 7.5 the zero fill is `ignore-src`, a predicate: ptxas then tests the mask
    /// once per chunk, where the `src-size` form (`copy ? 16 : 0` in a register, Triton's)
    /// costs two selects and a compare to turn the size back into a predicate.
    fn cp_async(
        &self,
        dst: PointerValue<'ctx>,
        src: PointerValue<'ctx>,
        copy: IntValue<'ctx>,
    ) -> Result<()> {
        let b = self.b;
        if self.emu.is_none() && self.ptx >= 75 {
            let (i64t, i1t) = (self.ctx.i64_type(), self.ctx.bool_type());
            let fn_ty = self
                .ctx
                .void_type()
                .fn_type(&[i64t.into(), i64t.into(), i1t.into()], false);
            let asm = "cp.async.cg.shared.global [$0], [$1], 16, $2;".to_string();
            let f = (self.ctx).create_inline_asm(
                fn_ty,
                asm,
                "l,l,b,~{memory}".into(),
                true,
                false,
                None,
                false,
            );
            let args = [
                b.build_ptr_to_int(dst, i64t, "")?.into(),
                b.build_ptr_to_int(src, i64t, "")?.into(),
                b.build_not(copy, "")?.into(),
            ];
            b.build_indirect_call(fn_ty, f, &args, "")?;
            return Ok(());
        }
        let full = self.i32c(CHUNK_BYTES as u64);
        let bytes = b.build_select(copy, full, self.i32c(0), "")?;
        if self.emu.is_some() {
            self.emulator_hook(EMU_CP_ASYNC, &[dst.into(), src.into(), bytes], None)?;
            return Ok(());
        }
        self.nvvm_call(
            "llvm.nvvm.cp.async.cg.shared.global.16.s",
            &[dst.into(), src.into(), bytes],
        )
    }

    /// The emulator's `commit_group` ([`EMU_COMMIT`]) or `wait_group code`.
    fn emulator_copy_group(&self, code: u32) -> Result<()> {
        let code = self.i32c(u64::from(code)).into();
        self.emulator_hook(EMU_CP_ASYNC_GROUP, &[code], None)?;
        Ok(())
    }

    /// Calls the NVVM intrinsic `name` (not overloaded) for its effect.
    fn nvvm_call(&self, name: &str, args: &[BasicValueEnum<'ctx>]) -> Result<()> {
        let i = inkwell::intrinsics::Intrinsic::find(name).expect("LLVM 19 has cp.async");
        let decl = i.get_declaration(self.module, &[]).expect("declaration");
        let args: Vec<_> = args.iter().map(|v| (*v).into()).collect();
        self.b.build_call(decl, &args, "")?;
        Ok(())
    }
}

/// +0 (a zero-filled chunk holds +0, not -0).
fn is_zero(c: &Const) -> bool {
    match c {
        Const::Int(i) => *i == 0,
        Const::Float(f) => f.to_bits() == 0,
    }
}
