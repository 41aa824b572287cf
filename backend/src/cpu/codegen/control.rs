//! Structured control flow. Carried scalars live in entry-block allocas (mem2reg makes them
//! SSA); carried tiles live in scratch buffers that the loop body reads and the yield
//! overwrites.

use super::{Gen, Lv};
use inkwell::values::PointerValue;
use inkwell::IntPredicate;
use tritium_dsl::ir::{Block, Inst, Op, Type, Value};

/// Where a carried value lives.
#[derive(Clone, Copy)]
enum Slot<'ctx> {
    Scalar(PointerValue<'ctx>),
    Tile(PointerValue<'ctx>),
}

impl<'ctx, 'f> Gen<'ctx, 'f> {
    fn slots_for(&mut self, types: &[Type]) -> Vec<Slot<'ctx>> {
        types
            .iter()
            .map(|t| {
                if t.is_scalar() {
                    Slot::Scalar(self.entry_alloca(self.elem_compute_ty(t.elem)))
                } else {
                    Slot::Tile(self.alloc_buf(t))
                }
            })
            .collect()
    }

    fn bind(&mut self, values: &[Value], slots: &[Slot<'ctx>]) {
        for (v, s) in values.iter().zip(slots) {
            let lv = match s {
                Slot::Scalar(p) => {
                    let t = self.elem_compute_ty(self.ty(*v).elem);
                    Lv::Scalar(self.b.build_load(t, *p, "").unwrap())
                }
                Slot::Tile(p) => Lv::Buf(*p),
            };
            self.lv.insert(*v, lv);
        }
    }

    /// Writes `values` into `slots` as one parallel assignment (swaps are safe).
    ///
    /// A lazily computed tile whose lanes read carried buffers only as its own slot at the
    /// same index (`acc = acc + x`) is written into its slot in place, when no other value
    /// of the assignment reads that slot; everything else goes through a temporary.
    fn assign(&mut self, values: &[Value], slots: &[Slot<'ctx>]) {
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
        for (k, (v, s)) in values.iter().zip(slots).enumerate() {
            match *s {
                Slot::Scalar(p) => {
                    let x = self.lane(*v, &[]);
                    pending.push((p, Some(x), None));
                }
                Slot::Tile(dst) if in_place[k] => {
                    let ty = self.ty(*v).clone();
                    self.fill_buf(dst, &ty, *v);
                }
                Slot::Tile(dst) => {
                    let ty = self.ty(*v).clone();
                    let src = match self.lv.get(v).copied() {
                        Some(Lv::Buf(p)) if p == dst => continue,
                        Some(Lv::Buf(p)) if !carried.contains(&p) => p,
                        _ => {
                            let tmp = self.alloc_buf(&ty);
                            self.fill_buf(tmp, &ty, *v);
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
                self.b.build_store(dst, x).unwrap();
            }
            if let Some((src, bytes)) = copy {
                self.b
                    .build_memcpy(dst, 64, src, 64, self.i64c(bytes as u64))
                    .unwrap();
            }
        }
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
                        Op::Splat(_) | Op::ExpandDims { .. } | Op::Reshape(_) | Op::Trans(_) => {
                            false
                        }
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

    fn yields(block: &Block) -> &[Value] {
        match block.insts.last().map(|i| &i.op) {
            Some(Op::Yield(v)) => v,
            _ => &[],
        }
    }

    /// A `for` loop. When a carried tile starts as a constant (`acc = zeros(…)`) and the
    /// body has no loop inside, the first iteration is peeled: it reads the constant
    /// itself, so the carried buffer is never filled with it (and `acc + x` is written
    /// straight into the buffer).
    pub(super) fn for_loop(&mut self, inst: &'f Inst) {
        let Op::For {
            lo,
            hi,
            step,
            init,
            body,
        } = &inst.op
        else {
            unreachable!()
        };
        let types: Vec<Type> = init.iter().map(|v| self.ty(*v).clone()).collect();
        let slots = self.slots_for(&types);
        let lo = self.lane(*lo, &[]).into_int_value();
        let hi = self.lane(*hi, &[]).into_int_value();
        let step = self.lane(*step, &[]).into_int_value();
        let zero = lo.get_type().const_zero();
        let header = self.ctx.append_basic_block(self.func, "for");
        let body_bb = self.ctx.append_basic_block(self.func, "for.body");
        let exit = self.ctx.append_basic_block(self.func, "for.end");
        // iv < hi counting up, iv > hi counting down.
        let runs = |g: &Self, iv| {
            let b = g.b;
            let up = b
                .build_int_compare(IntPredicate::SGT, step, zero, "")
                .unwrap();
            let down = b
                .build_int_compare(IntPredicate::SLT, step, zero, "")
                .unwrap();
            let below = b.build_int_compare(IntPredicate::SLT, iv, hi, "").unwrap();
            let above = b.build_int_compare(IntPredicate::SGT, iv, hi, "").unwrap();
            let go_up = b.build_and(up, below, "").unwrap();
            let go_down = b.build_and(down, above, "").unwrap();
            b.build_or(go_up, go_down, "").unwrap()
        };
        let peel = init.iter().any(|v| self.is_constant_tile(*v)) && !has_loop(body);
        let start = if peel {
            let first = self.ctx.append_basic_block(self.func, "for.first");
            let never = self.ctx.append_basic_block(self.func, "for.never");
            let go = runs(self, lo);
            self.b.build_conditional_branch(go, first, never).unwrap();
            self.b.position_at_end(never);
            self.assign(init, &slots);
            self.b.build_unconditional_branch(exit).unwrap();
            self.b.position_at_end(first);
            self.lv.insert(body.args[0], Lv::Scalar(lo.into()));
            for (arg, v) in body.args[1..].iter().zip(init) {
                self.alias(*arg, *v);
            }
            self.block(body);
            self.assign(Self::yields(body), &slots);
            self.b.build_int_add(lo, step, "").unwrap()
        } else {
            self.assign(init, &slots);
            lo
        };
        let pre = self.b.get_insert_block().unwrap();
        self.b.build_unconditional_branch(header).unwrap();
        self.b.position_at_end(header);
        let phi = self.b.build_phi(lo.get_type(), "iv").unwrap();
        phi.add_incoming(&[(&start, pre)]);
        let iv = phi.as_basic_value().into_int_value();
        let go = runs(self, iv);
        self.b.build_conditional_branch(go, body_bb, exit).unwrap();
        self.b.position_at_end(body_bb);
        self.lv.insert(body.args[0], Lv::Scalar(iv.into()));
        self.bind(&body.args[1..], &slots);
        self.block(body);
        self.assign(Self::yields(body), &slots);
        let next = self.b.build_int_add(iv, step, "").unwrap();
        phi.add_incoming(&[(&next, self.b.get_insert_block().unwrap())]);
        self.b.build_unconditional_branch(header).unwrap();
        self.b.position_at_end(exit);
        self.bind(&inst.results, &slots);
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

    pub(super) fn if_else(&mut self, inst: &'f Inst) {
        let Op::If {
            cond,
            then_region,
            else_region,
        } = &inst.op
        else {
            unreachable!()
        };
        let types: Vec<Type> = inst.results.iter().map(|v| self.ty(*v).clone()).collect();
        let slots = self.slots_for(&types);
        let c = self.lane(*cond, &[]).into_int_value();
        let then_bb = self.ctx.append_basic_block(self.func, "then");
        let else_bb = self.ctx.append_basic_block(self.func, "else");
        let merge = self.ctx.append_basic_block(self.func, "endif");
        self.b
            .build_conditional_branch(c, then_bb, else_bb)
            .unwrap();
        for (bb, region) in [(then_bb, then_region), (else_bb, else_region)] {
            self.b.position_at_end(bb);
            self.block(region);
            self.assign(Self::yields(region), &slots);
            self.b.build_unconditional_branch(merge).unwrap();
        }
        self.b.position_at_end(merge);
        self.bind(&inst.results, &slots);
    }

    pub(super) fn while_loop(&mut self, inst: &'f Inst) {
        let Op::While { init, cond, body } = &inst.op else {
            unreachable!()
        };
        let types: Vec<Type> = init.iter().map(|v| self.ty(*v).clone()).collect();
        let slots = self.slots_for(&types);
        self.assign(init, &slots);
        let header = self.ctx.append_basic_block(self.func, "while");
        let body_bb = self.ctx.append_basic_block(self.func, "while.body");
        let exit = self.ctx.append_basic_block(self.func, "while.end");
        self.b.build_unconditional_branch(header).unwrap();
        self.b.position_at_end(header);
        self.bind(&cond.args, &slots);
        self.block(cond);
        let Some(Op::Condition(c)) = cond.insts.last().map(|i| &i.op) else {
            unreachable!("verified")
        };
        let c = self.lane(*c, &[]).into_int_value();
        self.b.build_conditional_branch(c, body_bb, exit).unwrap();
        self.b.position_at_end(body_bb);
        self.bind(&body.args, &slots);
        self.block(body);
        self.assign(Self::yields(body), &slots);
        self.b.build_unconditional_branch(header).unwrap();
        self.b.position_at_end(exit);
        self.bind(&inst.results, &slots);
    }
}

/// True when `b` has a loop anywhere inside.
fn has_loop(b: &Block) -> bool {
    b.insts.iter().any(|i| {
        matches!(i.op, Op::For { .. } | Op::While { .. })
            || i.op.regions().into_iter().any(has_loop)
    })
}
