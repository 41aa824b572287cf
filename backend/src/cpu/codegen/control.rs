//! Structured control flow. Carried scalars live in entry-block allocas (mem2reg makes them
//! SSA); carried tiles live in scratch buffers that the loop body reads and the yield
//! overwrites.

use super::reduce::{holder, FusedSum};
use super::{Gen, Lv};
use crate::llvm::{Emitter, LoopCounter};
use crate::llvm::{Positioned, Result};
use inkwell::values::{BasicValueEnum, IntValue, PointerValue};
use tritium_dsl::ir::{Block, Inst, Op, Type, Value};

/// The full sums of one carried tile that the loop's block takes right after the loop:
/// they are accumulated while the last iteration writes the tile (see `Gen::assign`)
/// instead of in a pass over the carried buffer after the loop.
struct CarriedSums<'ctx> {
    sums: Vec<FusedSum<'ctx>>,
    /// The loop's result is read by something besides these sums, so the last iteration
    /// still writes the carried buffer (otherwise that write is dead and skipped).
    keep_last: bool,
}

/// Where a carried value lives.
#[derive(Clone, Copy)]
enum Slot<'ctx> {
    Scalar(PointerValue<'ctx>),
    Tile(PointerValue<'ctx>),
}

impl<'ctx, 'f> Gen<'ctx, 'f> {
    fn slots_for(&mut self, types: &[Type]) -> Result<Vec<Slot<'ctx>>> {
        types
            .iter()
            .map(|t| {
                Ok(if t.is_scalar() {
                    Slot::Scalar(self.entry_alloca(self.elem_compute_ty(t.elem))?)
                } else {
                    Slot::Tile(self.alloc_buf(t)?)
                })
            })
            .collect()
    }

    fn bind(&mut self, values: &[Value], slots: &[Slot<'ctx>]) -> Result<()> {
        for (v, s) in values.iter().zip(slots) {
            let lv = match s {
                Slot::Scalar(p) => {
                    let t = self.elem_compute_ty(self.ty(*v).elem);
                    Lv::Scalar(self.b.build_load(t, *p, "")?)
                }
                Slot::Tile(p) => Lv::Buf(*p),
            };
            self.lv.insert(*v, lv);
        }
        Ok(())
    }

    /// Writes `values` into `slots` as one parallel assignment (swaps are safe).
    ///
    /// A lazily computed tile whose lanes read carried buffers only as its own slot at the
    /// same index (`acc = acc + x`) is written into its slot in place, when no other value
    /// of the assignment reads that slot; everything else goes through a temporary.
    ///
    /// `carried[k]` are the sums taken of slot `k` after the loop, and `last` (an `i1`)
    /// says whether this assignment is the loop's last: then the sums are accumulated in
    /// the loop that writes the slot in place (or in a pass over the slot when it is not
    /// written in place), and a write read by nothing but the sums is skipped. The first
    /// tile written in place carries the `spread` prefetches planned for the loop's yield.
    fn assign(
        &mut self,
        values: &[Value],
        slots: &[Slot<'ctx>],
        carried: &[CarriedSums<'ctx>],
        last: Option<IntValue<'ctx>>,
        spread: &[(Value, bool)],
    ) -> Result<()> {
        let mut spread = spread.to_vec();
        let summed = |k: usize| carried.get(k).filter(|c| !c.sums.is_empty()).zip(last);
        let carried: Vec<PointerValue> = slots
            .iter()
            .filter_map(|s| {
                if let Slot::Tile(p) = s {
                    Some(*p)
                } else {
                    None
                }
            })
            .collect();
        let reads: Vec<Vec<(PointerValue, bool)>> = values
            .iter()
            .map(|v| self.carried_reads(*v, &carried))
            .collect();
        let in_place = |k: usize, dst: PointerValue| {
            matches!(self.lv.get(&values[k]), Some(Lv::Lazy))
                && reads[k].iter().all(|&(p, same)| p == dst && same)
                && reads
                    .iter()
                    .enumerate()
                    .all(|(j, r)| j == k || r.iter().all(|&(p, _)| p != dst))
        };
        let in_place: Vec<bool> = slots
            .iter()
            .enumerate()
            .map(|(k, s)| matches!(s, Slot::Tile(dst) if in_place(k, *dst)))
            .collect();
        let mut pending = Vec::new();
        let mut sum_after = Vec::new();
        for (k, (v, s)) in values.iter().zip(slots).enumerate() {
            match *s {
                Slot::Scalar(p) => {
                    let x = self.lane(*v, &[])?;
                    pending.push((p, Some(x), None));
                }
                Slot::Tile(dst) if in_place[k] => {
                    let ty = self.ty(*v).clone();
                    let spread = std::mem::take(&mut spread);
                    match summed(k) {
                        Some((c, last)) => self.fill_buf_summed(dst, &ty, *v, c, last, &spread)?,
                        None => self.fill_buf_spread(dst, &ty, *v, &spread)?,
                    }
                }
                Slot::Tile(dst) => {
                    let ty = self.ty(*v).clone();
                    if let Some((c, last)) = summed(k) {
                        sum_after.push((dst, ty.clone(), c, last));
                    }
                    let src = match self.lv.get(v).copied() {
                        Some(Lv::Buf(p)) if p == dst => continue,
                        Some(Lv::Buf(p)) if !carried.contains(&p) => p,
                        _ => {
                            let tmp = self.alloc_buf(&ty)?;
                            self.fill_buf(tmp, &ty, *v)?;
                            tmp
                        }
                    };
                    let bytes = ty.numel() * self.elem_size(ty.elem);
                    pending.push((dst, None, Some((src, bytes))));
                }
            }
        }
        for (dst, scalar, copy) in pending {
            if let Some(x) = scalar {
                self.b.build_store(dst, x)?;
            }
            if let Some((src, bytes)) = copy {
                self.b
                    .build_memcpy(dst, 64, src, 64, self.i64c(bytes as u64))?;
            }
        }
        for (dst, ty, c, last) in sum_after {
            self.when(last, &mut |g| {
                g.fused_sums_reset(&c.sums)?;
                g.loop_nest(&ty.shape.clone(), &mut |g, idx| {
                    let x = g.lane_of_buf(dst, &ty, idx)?;
                    g.fused_sums_step(&c.sums, x)
                })
            })?;
        }
        Ok(())
    }

    /// Lane `idx` (compute form) of the buffer `buf` holding a tile of `ty`.
    fn lane_of_buf(
        &mut self,
        buf: PointerValue<'ctx>,
        ty: &Type,
        idx: &[IntValue<'ctx>],
    ) -> Result<BasicValueEnum<'ctx>> {
        let p = self.buf_elem(buf, ty, idx)?;
        let raw = self.b.build_load(self.elem_storage_ty(ty.elem), p, "")?;
        self.decode_storage(raw, ty.elem)
    }

    /// Emits `emit` behind the `i1` `cond` (unconditionally when it is the constant true).
    fn when(
        &mut self,
        cond: IntValue<'ctx>,
        emit: &mut dyn FnMut(&mut Self) -> Result<()>,
    ) -> Result<()> {
        if cond.get_zero_extended_constant() == Some(1) {
            return emit(self);
        }
        let yes = self.ctx.append_basic_block(self.func, "last");
        let done = self.ctx.append_basic_block(self.func, "last.done");
        self.b.build_conditional_branch(cond, yes, done)?;
        self.b.position_at_end(yes);
        emit(self)?;
        self.b.build_unconditional_branch(done)?;
        self.b.position_at_end(done);
        Ok(())
    }

    /// Emits `yes` behind the `i1` `cond` and `no` behind its negation (only `yes` when
    /// `cond` is the constant true).
    pub(super) fn when_else(
        &mut self,
        cond: IntValue<'ctx>,
        yes: &mut dyn FnMut(&mut Self) -> Result<()>,
        no: &mut dyn FnMut(&mut Self) -> Result<()>,
    ) -> Result<()> {
        if cond.get_zero_extended_constant() == Some(1) {
            return yes(self);
        }
        let then = self.ctx.append_basic_block(self.func, "then");
        let other = self.ctx.append_basic_block(self.func, "else");
        let done = self.ctx.append_basic_block(self.func, "endif");
        self.b.build_conditional_branch(cond, then, other)?;
        self.b.position_at_end(then);
        yes(self)?;
        self.b.build_unconditional_branch(done)?;
        self.b.position_at_end(other);
        no(self)?;
        self.b.build_unconditional_branch(done)?;
        self.b.position_at_end(done);
        Ok(())
    }

    /// [`fill_buf`](Self::fill_buf) of a carried tile whose sums `c` are taken after the
    /// loop: when `last`, the loop that writes it also accumulates the sums (and writes
    /// nothing when only the sums read the result); otherwise it is a plain `fill_buf`.
    fn fill_buf_summed(
        &mut self,
        buf: PointerValue<'ctx>,
        ty: &Type,
        v: Value,
        c: &CarriedSums<'ctx>,
        last: IntValue<'ctx>,
        spread: &[(Value, bool)],
    ) -> Result<()> {
        let constant = last.get_zero_extended_constant() == Some(1);
        let (no, done) = if constant {
            (None, None)
        } else {
            let yes = self.ctx.append_basic_block(self.func, "last");
            let no = self.ctx.append_basic_block(self.func, "not.last");
            let done = self.ctx.append_basic_block(self.func, "last.done");
            self.b.build_conditional_branch(last, yes, no)?;
            self.b.position_at_end(yes);
            (Some(no), Some(done))
        };
        self.fused_sums_reset(&c.sums)?;
        let elem = ty.elem;
        let shape = ty.shape.clone();
        let mask = self.load_mask_in(v);
        let keep = c.keep_last;
        self.versioned_lane_loop(mask, (&[v], &[]), &shape, &mut |g| {
            g.lane_loop(&shape, (&[v], &c.sums), spread, &mut |g, idx| {
                let x = g.lane(v, idx)?;
                if keep {
                    let s = g.to_storage(x, elem)?;
                    let p = g.buf_elem(buf, ty, idx)?;
                    g.b.build_store(p, s)?;
                }
                Ok(Some(x))
            })
        })?;
        if let (Some(no), Some(done)) = (no, done) {
            self.b.build_unconditional_branch(done)?;
            self.b.position_at_end(no);
            self.fill_buf_spread(buf, ty, v, spread)?;
            self.b.build_unconditional_branch(done)?;
            self.b.position_at_end(done);
        }
        Ok(())
    }

    /// The sums of each of `inst`'s (a `for`) results that its block takes (empty for
    /// scalars and for results no sum is taken of).
    fn carried_sums(&mut self, inst: &'f Inst) -> Result<Vec<CarriedSums<'ctx>>> {
        let f = self.f;
        let Some(block) = holder(&f.body, inst) else {
            return Ok(Vec::new());
        };
        inst.results
            .iter()
            .map(|r| {
                let sums = if f.ty(*r).is_scalar() {
                    Vec::new()
                } else {
                    self.sums_in(block, *r)?
                };
                Ok(CarriedSums {
                    keep_last: f.uses(*r) > sums.len(),
                    sums,
                })
            })
            .collect()
    }

    /// The carried buffers among `carried` that computing `v`'s lanes reads, each with
    /// whether every read of it is at the lane's own index.
    fn carried_reads(
        &self,
        v: Value,
        carried: &[PointerValue<'ctx>],
    ) -> Vec<(PointerValue<'ctx>, bool)> {
        let mut out: Vec<(PointerValue<'ctx>, bool)> = Vec::new();
        let mut seen = std::collections::HashSet::new();
        let mut todo = vec![(v, true)];
        while let Some((v, same)) = todo.pop() {
            if !seen.insert((v, same)) {
                continue;
            }
            match self.lv.get(&v) {
                Some(Lv::Buf(p)) if carried.contains(p) => match out.iter_mut().find(|r| r.0 == *p)
                {
                    Some(r) => r.1 &= same,
                    None => out.push((*p, same)),
                },
                Some(Lv::Lazy) => {
                    let Some(inst) = self.defs.get(&v) else {
                        continue;
                    };
                    let keeps_index = match &inst.op {
                        Op::Broadcast(x) => self.ty(*x).shape == self.ty(v).shape,
                        Op::Splat(_)
                        | Op::ExpandDims { .. }
                        | Op::Reshape(_)
                        | Op::Permute { .. }
                        | Op::Gather { .. }
                        | Op::Flip { .. } => false,
                        _ => true,
                    };
                    for o in inst.op.operands() {
                        todo.push((o, same && keeps_index));
                    }
                }
                _ => {}
            }
        }
        out
    }

    /// A `for` loop. When a carried tile starts as a constant (`acc = zeros(…)`) and the
    /// body has no loop inside, the first iteration is peeled: it reads the constant
    /// itself, so the carried buffer is never filled with it (and `acc + x` is written
    /// straight into the buffer). A body with a loop or a `dot` (loop nests of
    /// micro-kernels) is not: the fill it saves is small next to one iteration's work,
    /// and the second copy of the body doubled the code LLVM compiles (tutorial 03's
    /// cold compile took 145-192 ms peeled, 91-113 ms not, at the same speed).
    pub(super) fn for_loop(&mut self, inst: &'f Inst) -> Result<()> {
        let Op::For {
            lo,
            hi,
            step,
            init,
            body,
            unroll,
            ..
        } = &inst.op
        else {
            unreachable!()
        };
        let types: Vec<Type> = init.iter().map(|v| self.ty(*v).clone()).collect();
        let slots = self.slots_for(&types)?;
        let dtype = self.dtype_of(*lo);
        let bounds = [
            self.lane(*lo, &[])?.into_int_value(),
            self.lane(*hi, &[])?.into_int_value(),
            self.lane(*step, &[])?.into_int_value(),
        ];
        let count = LoopCounter::new(&self.emit(), dtype, bounds)?;
        let header = self.ctx.append_basic_block(self.func, "for");
        let body_bb = self.ctx.append_basic_block(self.func, "for.body");
        let exit = self.ctx.append_basic_block(self.func, "for.end");
        let runs = |g: &Self, iv| count.runs(&g.emit(), iv);
        let lo = count.lo;
        let peel = init.iter().any(|v| self.is_constant_tile(*v)) && !has_loop_or_dot(body);
        let carried = self.carried_sums(inst)?;
        let spread = body
            .insts
            .last()
            .map(|y| self.spread_here(y))
            .unwrap_or_default();
        let start = if peel {
            let first = self.ctx.append_basic_block(self.func, "for.first");
            let never = self.ctx.append_basic_block(self.func, "for.never");
            let go = runs(self, lo)?;
            self.b.build_conditional_branch(go, first, never)?;
            self.b.position_at_end(never);
            let always = self.ctx.bool_type().const_all_ones();
            self.assign(init, &slots, &carried, Some(always), &[])?;
            self.b.build_unconditional_branch(exit)?;
            self.b.position_at_end(first);
            self.lv.insert(
                body.args[0],
                Lv::Scalar(count.body_value(&self.emit(), lo)?),
            );
            for (arg, v) in body.args[1..].iter().zip(init) {
                self.alias(*arg, *v);
            }
            self.loop_body(body, lo, &count, bounds[2], self.i64c(0))?;
            let last = count.is_last(&self.emit(), lo)?;
            self.assign(body.yields(), &slots, &carried, Some(last), &spread)?;
            count.advance(&self.emit(), self.func, lo, exit)
        } else {
            let go = runs(self, lo)?;
            let never = self.b.build_not(go, "")?;
            self.assign(init, &slots, &carried, Some(never), &[])?;
            Ok(lo)
        }?;
        let pre = self.b.current_block()?;
        self.b.build_unconditional_branch(header)?;
        self.b.position_at_end(header);
        let phi = self.b.build_phi(lo.get_type(), "iv")?;
        phi.add_incoming(&[(&start, pre)]);
        let iv = phi.as_basic_value().into_int_value();
        let trip_phi = self.b.build_phi(self.ctx.i64_type(), "trip")?;
        trip_phi.add_incoming(&[(&self.i64c(u64::from(peel)), pre)]);
        let trip = trip_phi.as_basic_value().into_int_value();
        let go = runs(self, iv)?;
        self.b.build_conditional_branch(go, body_bb, exit)?;
        self.b.position_at_end(body_bb);
        if peel {
            // The peeled copy left its values (registers and buffers of the first
            // iteration, and the results of reductions fused into them) in `lv`: the loop's
            // copy must compute its own, not reuse them.
            self.forget(body);
        }
        self.lv.insert(
            body.args[0],
            Lv::Scalar(count.body_value(&self.emit(), iv)?),
        );
        self.bind(&body.args[1..], &slots)?;
        self.loop_body(body, iv, &count, bounds[2], trip)?;
        let last = count.is_last(&self.emit(), iv)?;
        self.assign(body.yields(), &slots, &carried, Some(last), &spread)?;
        let next_trip = self.b.build_int_add(trip, self.i64c(1), "")?;
        let next = count.advance(&self.emit(), self.func, iv, exit)?;
        phi.add_incoming(&[(&next, self.b.current_block()?)]);
        trip_phi.add_incoming(&[(&next_trip, self.b.current_block()?)]);
        let back_edge = self.b.build_unconditional_branch(header)?;
        if let Some(factor) = unroll {
            self.emit().unroll_hint(back_edge, *factor);
        }
        self.b.position_at_end(exit);
        self.bind(&inst.results, &slots)?;
        for c in &carried {
            self.fused_sums_finish(&c.sums)?;
        }
        Ok(())
    }

    /// Generates a `for` body for the counter value `iv`, known as the innermost loop (see
    /// `next_iteration`).
    fn loop_body(
        &mut self,
        body: &'f Block,
        iv: IntValue<'ctx>,
        count: &LoopCounter<'ctx>,
        step: IntValue<'ctx>,
        trip: IntValue<'ctx>,
    ) -> Result<()> {
        let now = count.body_value(&self.emit(), iv)?.into_int_value();
        let step = self
            .b
            .build_int_cast_sign_flag(step, now.get_type(), true, "")?;
        let next_iv = self.b.build_int_add(now, step, "")?;
        self.loops.push(super::next_iteration::LoopFrame {
            body,
            next_iv,
            trip,
        });
        self.block(body)?;
        self.loops.pop();
        Ok(())
    }

    /// True for a tile computed lazily from a constant or a splatted scalar.
    pub(super) fn is_constant_tile(&self, v: Value) -> bool {
        !self.ty(v).is_scalar()
            && matches!(self.lv.get(&v), Some(Lv::Lazy))
            && self
                .defs
                .get(&v)
                .is_some_and(|i| matches!(i.op, Op::Const(_) | Op::Splat(_)))
    }

    /// Forgets every value defined in `block` (its arguments and results, nested regions
    /// included), so that the block can be generated again from scratch.
    fn forget(&mut self, block: &Block) {
        for a in &block.args {
            self.lv.remove(a);
            // `alias` gave arguments the definition of what they stood for.
            self.defs.remove(a);
        }
        for inst in &block.insts {
            for r in &inst.results {
                self.lv.remove(r);
            }
            for region in inst.op.regions() {
                self.forget(region);
            }
        }
    }

    /// Makes `arg` (a block argument) stand for `v`.
    fn alias(&mut self, arg: Value, v: Value) {
        let Some(lv) = self.lv.get(&v).copied() else {
            return;
        };
        if let (Lv::Lazy, Some(def)) = (lv, self.defs.get(&v).copied()) {
            self.defs.insert(arg, def);
        }
        self.lv.insert(arg, lv);
    }

    pub(super) fn if_else(&mut self, inst: &'f Inst) -> Result<()> {
        let Op::If {
            cond,
            then_region,
            else_region,
        } = &inst.op
        else {
            unreachable!()
        };
        let types: Vec<Type> = inst.results.iter().map(|v| self.ty(*v).clone()).collect();
        let slots = self.slots_for(&types)?;
        let c = self.lane(*cond, &[])?.into_int_value();
        let then_bb = self.ctx.append_basic_block(self.func, "then");
        let else_bb = self.ctx.append_basic_block(self.func, "else");
        let merge = self.ctx.append_basic_block(self.func, "endif");
        self.b.build_conditional_branch(c, then_bb, else_bb)?;
        for (bb, region) in [(then_bb, then_region), (else_bb, else_region)] {
            self.b.position_at_end(bb);
            self.block(region)?;
            self.assign(region.yields(), &slots, &[], None, &[])?;
            self.b.build_unconditional_branch(merge)?;
        }
        self.b.position_at_end(merge);
        self.bind(&inst.results, &slots)
    }

    pub(super) fn while_loop(&mut self, inst: &'f Inst) -> Result<()> {
        let Op::While { init, cond, body } = &inst.op else {
            unreachable!()
        };
        let types: Vec<Type> = init.iter().map(|v| self.ty(*v).clone()).collect();
        let slots = self.slots_for(&types)?;
        self.assign(init, &slots, &[], None, &[])?;
        let header = self.ctx.append_basic_block(self.func, "while");
        let body_bb = self.ctx.append_basic_block(self.func, "while.body");
        let exit = self.ctx.append_basic_block(self.func, "while.end");
        self.b.build_unconditional_branch(header)?;
        self.b.position_at_end(header);
        self.bind(&cond.args, &slots)?;
        self.block(cond)?;
        let Some(Op::Condition(c)) = cond.insts.last().map(|i| &i.op) else {
            unreachable!("verified")
        };
        let c = self.lane(*c, &[])?.into_int_value();
        self.b.build_conditional_branch(c, body_bb, exit)?;
        self.b.position_at_end(body_bb);
        self.bind(&body.args, &slots)?;
        self.block(body)?;
        self.assign(body.yields(), &slots, &[], None, &[])?;
        self.b.build_unconditional_branch(header)?;
        self.b.position_at_end(exit);
        self.bind(&inst.results, &slots)
    }
}

/// True when `b` has a loop or a `dot` anywhere inside.
fn has_loop_or_dot(b: &Block) -> bool {
    b.insts.iter().any(|i| {
        matches!(i.op, Op::For { .. } | Op::While { .. } | Op::Dot { .. })
            || i.op.regions().into_iter().any(has_loop_or_dot)
    })
}
