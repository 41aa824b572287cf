//! Structured control flow. Every condition is a scalar, held equally by every thread,
//! so control flow is uniform across the CTA. Carried values (each slot of a tile) live
//! in entry-block allocas that the optimizer promotes to registers; a `for` loop carries
//! each value in the layout `held.rs` settled for it (a tensor-core `dot`'s accumulator in
//! `mma` fragments, attention's running max and sum one value per fragment row), so none
//! goes through shared memory between iterations. Before a loop, the loop-invariant `a`
//! of its `dot`s is staged once (`dot::hoist_a_fragments`); a loop around tensor-core
//! `dot`s may be software-pipelined (`pipeline.rs`).

use super::held::Held;
use super::{Gen, V};
use crate::llvm::{CodegenError, Positioned, Result};
use crate::llvm::{Emitter, LoopCounter};
use inkwell::values::PointerValue;
use tritium_dsl::ir::{Block, Inst, Op, Type, Value};

impl<'ctx, 'f> Gen<'ctx, 'f> {
    /// One alloca per slot (or fragment register) of each carried value.
    fn carried_slots(
        &mut self,
        types: &[Type],
        carry: &[Held],
    ) -> Result<Vec<Vec<PointerValue<'ctx>>>> {
        types
            .iter()
            .zip(carry)
            .map(|(t, c)| {
                let n = self.held_count(*c, t);
                let ty = self.elem_compute_ty(t.elem);
                (0..n).map(|_| self.entry_alloca(ty)).collect()
            })
            .collect()
    }

    /// Stores `values` into `slots` (all read first, so swaps are safe).
    fn assign(
        &mut self,
        values: &[Value],
        slots: &[Vec<PointerValue<'ctx>>],
        carry: &[Held],
    ) -> Result<()> {
        let vals: Vec<Vec<_>> = values
            .iter()
            .zip(carry)
            .map(|(v, c)| match *c {
                Held::Slots => {
                    let numel = self.ty(*v).numel();
                    self.tile_slots(*v, numel)
                }
                h => self.held_regs(*v, h),
            })
            .collect::<Result<_>>()?;
        for (vs, ps) in vals.iter().zip(slots) {
            for (v, p) in vs.iter().zip(ps) {
                self.b.build_store(*p, *v)?;
            }
        }
        Ok(())
    }

    /// Binds `values` to what `slots` hold now.
    fn bind(
        &mut self,
        values: &[Value],
        slots: &[Vec<PointerValue<'ctx>>],
        carry: &[Held],
    ) -> Result<()> {
        for ((v, ps), c) in values.iter().zip(slots).zip(carry) {
            let ty = self.elem_compute_ty(self.ty(*v).elem);
            let loaded: Vec<_> = ps
                .iter()
                .map(|p| self.b.build_load(ty, *p, ""))
                .collect::<Result<_, _>>()?;
            let val = match *c {
                Held::Frag(l) => V::Frag(l, loaded),
                Held::Rows { m } => V::Rows(m, loaded),
                Held::Slots if self.ty(*v).is_scalar() => V::Scalar(loaded[0]),
                Held::Slots => V::Tile(loaded),
            };
            self.vals.insert(*v, val);
        }
        Ok(())
    }

    /// How a `for` loop carries each value: as `held.rs` decided for its body's arguments.
    fn loop_carry(&self, body: &Block) -> Vec<Held> {
        body.args[1..].iter().map(|a| self.held(*a)).collect()
    }

    pub(super) fn for_loop(&mut self, inst: &'f Inst) -> Result<()> {
        let Op::For {
            lo,
            hi,
            step,
            init,
            body,
            unroll,
            stages,
        } = &inst.op
        else {
            unreachable!()
        };
        let types: Vec<Type> = init.iter().map(|v| self.ty(*v).clone()).collect();
        let carry = self.loop_carry(body);
        let slots = self.carried_slots(&types, &carry)?;
        let dtype = match self.ty(*lo).elem {
            tritium_dsl::ir::Elem::Scalar(d) | tritium_dsl::ir::Elem::Ptr(d) => d,
        };
        let bounds = [
            self.scalar(*lo)?.into_int_value(),
            self.scalar(*hi)?.into_int_value(),
            self.scalar(*step)?.into_int_value(),
        ];
        let count = LoopCounter::new(&self.emit(), dtype, bounds)?;
        self.assign(init, &slots, &carry)?;
        let floor = self.shared_floor;
        self.hoist_a_fragments(body)?;
        let plan = self.pipeline_plan(body, init, count.ahead_is_exact(), *stages);
        let pipelined = plan.is_some();
        // A `wgmma` accumulator starting at zero starts undefined (see
        // `Pipelined::zero_init`): zero where the loop runs no iteration.
        let undefined_acc = (plan.as_ref()).and_then(|p| p.carried_acc.filter(|_| p.zero_init));
        let ran = match undefined_acc {
            Some(j) => {
                for p in &slots[j] {
                    self.b.build_store(*p, self.ctx.f32_type().get_undef())?;
                }
                Some(count.runs(&self.emit(), count.lo)?)
            }
            None => None,
        };
        if pipelined {
            self.pipelined = plan;
            self.pipeline_prologue(&count)?;
        }
        let pre = self.b.current_block()?;
        let header = self.ctx.append_basic_block(self.func, "for");
        let body_bb = self.ctx.append_basic_block(self.func, "for.body");
        let exit = self.ctx.append_basic_block(self.func, "for.end");
        self.b.build_unconditional_branch(header)?;
        self.b.position_at_end(header);
        let phi = self.b.build_phi(count.lo.get_type(), "iv")?;
        phi.add_incoming(&[(&count.lo, pre)]);
        let iv = phi.as_basic_value().into_int_value();
        // A pipelined loop counts its iterations, and carries the stage they use and the
        // stage's use count's parity (its `mbarrier` phase), wrapping at `stages`.
        let trip = match pipelined {
            true => {
                let [t, s, p] = ["trip", "stage", "phase"].map(|name| {
                    let phi = self.b.build_phi(self.ctx.i32_type(), name)?;
                    phi.add_incoming(&[(&self.i32c(0), pre)]);
                    Ok::<_, inkwell::builder::BuilderError>(phi)
                });
                Some((t?, s?, p?))
            }
            false => None,
        };
        // iv < hi counting up, iv > hi counting down, never wrapping (as the CPU backend).
        let go = count.runs(&self.emit(), iv)?;
        self.b.build_conditional_branch(go, body_bb, exit)?;
        self.b.position_at_end(body_bb);
        let next_trip = match trip {
            Some((t, s, ph)) => {
                let b = self.b;
                let [t, carried, phase] = [t, s, ph].map(|p| p.as_basic_value().into_int_value());
                let stages = self.pipelined.as_ref().map_or(1, |p| p.stages) as u64;
                // A power of two of stages: the trip's low bits (one op, where the carried
                // stage costs a compare and a select); else the carried stage (where the
                // remainder costs a multiply-high and shifts).
                let stage = match stages.is_power_of_two() {
                    true => b.build_and(t, self.i32c(stages - 1), "")?,
                    false => carried,
                };
                let later = count.ahead(&self.emit(), iv, stages - 1)?;
                let runs = count.runs(&self.emit(), later)?;
                let value = count.body_value(&self.emit(), later)?;
                if let Some(p) = self.pipelined.as_mut() {
                    p.stage = Some(stage);
                    p.phase = Some(phase);
                    p.ahead = Some((value, runs));
                    p.trip = Some(t);
                }
                let next = b.build_int_add(carried, self.i32c(1), "")?;
                let wrap =
                    b.build_int_compare(inkwell::IntPredicate::EQ, next, self.i32c(stages), "")?;
                let next = b
                    .build_select(wrap, self.i32c(0), next, "")?
                    .into_int_value();
                let flip = b.build_int_z_extend(wrap, self.ctx.i32_type(), "")?;
                let next_phase = b.build_xor(phase, flip, "")?;
                Some([b.build_int_add(t, self.i32c(1), "")?, next, next_phase])
            }
            None => None,
        };
        self.vals
            .insert(body.args[0], V::Scalar(count.body_value(&self.emit(), iv)?));
        self.bind(&body.args[1..], &slots, &carry)?;
        self.block(body)?;
        self.assign(body.yields(), &slots, &carry)?;
        let next = count.advance(&self.emit(), self.func, iv, exit)?;
        phi.add_incoming(&[(&next, self.b.current_block()?)]);
        if let (Some((t, s, p)), Some(n)) = (trip, next_trip) {
            let at = self.b.current_block()?;
            for (phi, next) in [t, s, p].iter().zip(n) {
                phi.add_incoming(&[(&next, at)]);
            }
        }
        let back_edge = self.b.build_unconditional_branch(header)?;
        if let Some(factor) = unroll {
            self.emit().unroll_hint(back_edge, *factor);
        }
        self.b.position_at_end(exit);
        self.shared_floor = floor;
        let carried_acc = (self.pipelined.as_ref()).and_then(|p| p.carried_acc);
        if pipelined {
            // Later iterations' groups hold nothing past the end; drain them all the same
            // before shared memory is reused (TMA copies are all waited for: only
            // iterations that run issue theirs).
            let tma = (self.pipelined.take()).and_then(|p| p.tma.map(|t| (t, p.stages)));
            if tma.is_none() {
                self.wait_copies(0)?;
            }
            self.barrier()?;
            if let Some((t, stages)) = tma {
                self.tma_release(t, stages)?;
            }
        }
        self.bind(&inst.results, &slots, &carry)?;
        // A `wgmma` group left in flight by the body's `dot` completes before its
        // accumulators are read.
        if let Some(j) = carried_acc.filter(|_| self.wgmma_in_flight.is_some()) {
            let r = inst.results[j];
            if let Some(V::Frag(l, mut regs)) = self.vals.get(&r).cloned() {
                self.wgmma_drain(&mut regs)?;
                if let Some(ran) = ran {
                    let zero = self.ctx.f32_type().const_zero();
                    for x in &mut regs {
                        *x = self.b.build_select(ran, *x, zero.into(), "")?;
                    }
                }
                self.vals.insert(r, V::Frag(l, regs));
            }
        }
        Ok(())
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
        let carry = vec![Held::Slots; types.len()];
        let slots = self.carried_slots(&types, &carry)?;
        let c = self.scalar(*cond)?.into_int_value();
        let then_bb = self.ctx.append_basic_block(self.func, "then");
        let else_bb = self.ctx.append_basic_block(self.func, "else");
        let merge = self.ctx.append_basic_block(self.func, "endif");
        self.b.build_conditional_branch(c, then_bb, else_bb)?;
        for (bb, region) in [(then_bb, then_region), (else_bb, else_region)] {
            self.b.position_at_end(bb);
            self.block(region)?;
            self.assign(region.yields(), &slots, &carry)?;
            self.b.build_unconditional_branch(merge)?;
        }
        self.b.position_at_end(merge);
        self.bind(&inst.results, &slots, &carry)
    }

    pub(super) fn while_loop(&mut self, inst: &'f Inst) -> Result<()> {
        let Op::While { init, cond, body } = &inst.op else {
            unreachable!()
        };
        let types: Vec<Type> = init.iter().map(|v| self.ty(*v).clone()).collect();
        let carry = vec![Held::Slots; types.len()];
        let slots = self.carried_slots(&types, &carry)?;
        self.assign(init, &slots, &carry)?;
        let header = self.ctx.append_basic_block(self.func, "while");
        let body_bb = self.ctx.append_basic_block(self.func, "while.body");
        let exit = self.ctx.append_basic_block(self.func, "while.end");
        self.b.build_unconditional_branch(header)?;
        self.b.position_at_end(header);
        self.bind(&cond.args, &slots, &carry)?;
        self.block(cond)?;
        let c = match cond.insts.last().map(|i| &i.op) {
            Some(Op::Condition(c)) => self.scalar(*c)?.into_int_value(),
            _ => {
                return Err(CodegenError::internal(
                    "a while condition region ends without `condition`",
                ))
            }
        };
        self.b.build_conditional_branch(c, body_bb, exit)?;
        self.b.position_at_end(body_bb);
        self.bind(&body.args, &slots, &carry)?;
        self.block(body)?;
        self.assign(body.yields(), &slots, &carry)?;
        self.b.build_unconditional_branch(header)?;
        self.b.position_at_end(exit);
        self.bind(&inst.results, &slots, &carry)
    }
}
