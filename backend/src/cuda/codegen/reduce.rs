//! Reductions along an axis.
//!
//! To a scalar (a 1-D input): each thread folds its valid slots, a warp combines with
//! `shfl.sync.bfly` (every lane ends with the same value), then lane 0 of each warp
//! writes shared memory and every thread folds the per-warp values in warp order, so
//! every thread holds the same result. Along an axis of a larger tile: the input goes
//! to shared memory; with at least half as many outputs as threads each output slot
//! folds its line in index order, else a group of up to 32 lanes shares each line (every
//! lane folds a strided part, the group combines with `shfl.sync.bfly`) and the results
//! return to the blocked layout through shared memory.
//!
//! Semantics as the interpreter: float max/min are maximumNumber folds (NaN is their
//! identity), f16/bf16 sums add in f32 and round once, integer sums wrap; argmax/argmin
//! give the first index of the extreme, ignoring NaN (all NaN gives 0).

use super::Gen;
use crate::llvm::{Emitter, Positioned, Result};
use inkwell::values::{BasicValueEnum, IntValue};
use inkwell::{FloatPredicate, IntPredicate};
use tritium_dsl::ir::{BinOp, DType, Elem, Inst, Op, ReduceOp};

/// A partial result: the value and, for argmax/argmin, its index.
pub(super) type Acc<'ctx> = (BasicValueEnum<'ctx>, Option<IntValue<'ctx>>);

/// One iteration of a [`Gen::counted_loop`]: the index and the partial results in, the
/// next partial results out.
pub(super) type FoldStep<'a, 'ctx, G> =
    dyn FnMut(&mut G, IntValue<'ctx>, &[Acc<'ctx>]) -> Result<Vec<Acc<'ctx>>> + 'a;

/// How many lanes share one output of an axis reduction: a power of two up to a warp,
/// when there are fewer outputs than threads and the lines are long enough to split;
/// 1 for the serial fold.
fn lanes_per_output(outputs: usize, len: usize, threads: usize) -> usize {
    if outputs == 0 || outputs * 2 > threads || len < 2 {
        return 1;
    }
    let spare = threads / outputs;
    let by_threads = 1usize << spare.ilog2();
    by_threads.min(32).min(len.next_power_of_two())
}

impl<'ctx> Gen<'ctx, '_> {
    pub(super) fn reduce(&mut self, inst: &Inst) -> Result<()> {
        let Op::Reduce { op, x, axis } = &inst.op else {
            unreachable!()
        };
        let (op, x, axis) = (*op, *x, *axis as usize);
        let xt = self.ty(x).clone();
        let d = xt.dtype().expect("reductions take numbers");
        let r = inst.results[0];
        if xt.rank() == 1 {
            let v = self.reduce_to_scalar(op, d, x)?;
            self.define(r, vec![v]);
            return Ok(());
        }
        self.spill_to_shared(x, 0)?;
        self.barrier()?;
        let rt = self.ty(r).clone();
        let group = lanes_per_output(rt.numel(), xt.shape[axis], self.threads);
        let out = if group > 1 {
            self.reduce_lines_in_groups(op, d, &xt, axis, &rt, group)?
        } else {
            self.reduce_lines_serially(op, d, &xt, axis, &rt)?
        };
        self.define(r, out);
        Ok(())
    }

    /// The shared-memory index of `x[idx with 0 inserted at axis]` for output index `lin`.
    fn line_base(
        &self,
        xt: &tritium_dsl::ir::Type,
        axis: usize,
        rt: &tritium_dsl::ir::Type,
        lin: IntValue<'ctx>,
    ) -> Result<IntValue<'ctx>> {
        let mut idx = self.unravel(&rt.shape, lin)?;
        idx.insert(axis, self.i32c(0));
        self.ravel(&xt.shape, &idx)
    }

    /// Each output slot of each thread folds its line of the spilled input in index
    /// order (enough outputs to keep every thread busy).
    fn reduce_lines_serially(
        &mut self,
        op: ReduceOp,
        d: DType,
        xt: &tritium_dsl::ir::Type,
        axis: usize,
        rt: &tritium_dsl::ir::Type,
    ) -> Result<Vec<BasicValueEnum<'ctx>>> {
        let numel = rt.numel();
        let len = xt.shape[axis];
        let stride: usize = xt.shape[axis + 1..].iter().product();
        let bases: Vec<IntValue<'ctx>> = (0..self.slots(numel))
            .map(|j| {
                let lin = self.clamped_lin(numel, j)?;
                self.line_base(xt, axis, rt, lin)
            })
            .collect::<Result<_>>()?;
        let elem = Elem::Scalar(d);
        let init: Vec<Acc<'ctx>> = bases.iter().map(|_| self.identity(op, d)).collect();
        let accs = self.counted_loop(len, init, &mut |g, k, accs| {
            let step = g.b.build_int_mul(k, g.i32c(stride as u64), "")?;
            accs.iter()
                .zip(&bases)
                .map(|(acc, base)| {
                    let at = g.b.build_int_add(*base, step, "")?;
                    let p = g.shared_elem(0, elem, at)?;
                    let v = g.shared_load(p, elem)?;
                    g.combine(op, d, *acc, (v, Some(k)))
                })
                .collect()
        })?;
        self.barrier()?;
        accs.into_iter().map(|a| self.finish(op, d, a)).collect()
    }

    /// Fewer outputs than threads: `group` adjacent lanes (a power of two dividing the
    /// warp) share an output's line, each folding every `group`-th element of it, then
    /// combine with `shfl.sync.bfly`; the groups' results go through shared memory to
    /// the output's blocked layout.
    fn reduce_lines_in_groups(
        &mut self,
        op: ReduceOp,
        d: DType,
        xt: &tritium_dsl::ir::Type,
        axis: usize,
        rt: &tritium_dsl::ir::Type,
        group: usize,
    ) -> Result<Vec<BasicValueEnum<'ctx>>> {
        let numel = rt.numel();
        let len = xt.shape[axis];
        let stride: usize = xt.shape[axis + 1..].iter().product();
        let elem = Elem::Scalar(d);
        let i32e = Elem::Scalar(DType::I32);
        let bl = self.b;
        let out = bl.build_int_unsigned_div(self.tid, self.i32c(group as u64), "out")?;
        let part = bl.build_int_unsigned_rem(self.tid, self.i32c(group as u64), "part")?;
        // Lanes past the last output fold a real line too (every lane takes part in the
        // shuffles) and drop the result.
        let (has_out, out_in_range) = self.below_or_zero(out, numel)?;
        let base = self.line_base(xt, axis, rt, out_in_range)?;
        let init = vec![self.identity(op, d)];
        let accs = self.counted_loop(len.div_ceil(group), init, &mut |g, k, accs| {
            let b = g.b;
            let kk = b.build_int_mul(k, g.i32c(group as u64), "")?;
            let kk = b.build_int_add(kk, part, "kk")?;
            let (ok, at_k) = g.below_or_zero(kk, len)?;
            let step = b.build_int_mul(at_k, g.i32c(stride as u64), "")?;
            let at = b.build_int_add(base, step, "")?;
            let p = g.shared_elem(0, elem, at)?;
            let v = g.shared_load(p, elem)?;
            let next = g.combine(op, d, accs[0], (v, Some(kk)))?;
            Ok(vec![g.select_acc(ok, next, accs[0])?])
        })?;
        let acc = self.butterfly(op, d, accs[0], group)?;
        // Every lane is done reading the spilled input: the results reuse its memory.
        self.barrier()?;
        let idx_offset = (numel * self.shared_size(elem)).div_ceil(16) * 16;
        self.reserve_scratch(idx_offset + numel * 4);
        let first = bl.build_int_compare(IntPredicate::EQ, part, self.i32c(0), "")?;
        let writes = bl.build_and(first, has_out, "")?;
        self.when(Some(writes), &mut |g| {
            let p = g.shared_elem(0, elem, out)?;
            g.shared_store(p, acc.0, elem)?;
            if let Some(i) = acc.1 {
                let p = g.shared_elem(idx_offset, i32e, out)?;
                g.shared_store(p, i.into(), i32e)?;
            }
            Ok(())
        })?;
        self.barrier()?;
        let slots = (0..self.slots(numel))
            .map(|j| {
                let lin = self.clamped_lin(numel, j)?;
                let v = self.shared_load(self.shared_elem(0, elem, lin)?, elem)?;
                let i = acc
                    .1
                    .map(|_| -> Result<_> {
                        Ok(self
                            .shared_load(self.shared_elem(idx_offset, i32e, lin)?, i32e)?
                            .into_int_value())
                    })
                    .transpose()?;
                self.finish(op, d, (v, i))
            })
            .collect::<Result<_>>()?;
        self.barrier()?;
        Ok(slots)
    }

    /// A reduction to a scalar of `d` across warps: where its warps' indices start in
    /// its scratch (after their partials), and its scratch bytes.
    pub(super) fn scalar_reduce_scratch(&self, d: DType) -> (usize, usize) {
        let warps = self.threads / 32;
        let idx_offset = (warps * self.shared_size(Elem::Scalar(d))).div_ceil(16) * 16;
        (idx_offset, idx_offset + warps * 4)
    }

    fn reduce_to_scalar(
        &mut self,
        op: ReduceOp,
        d: DType,
        x: tritium_dsl::ir::Value,
    ) -> Result<BasicValueEnum<'ctx>> {
        let numel = self.ty(x).numel();
        let slots = self.tile_slots(x, numel)?;
        let mut acc = self.identity(op, d);
        for (j, v) in slots.into_iter().enumerate() {
            let idx = self.lin(numel, j)?;
            let next = self.combine(op, d, acc, (v, Some(idx)))?;
            acc = match self.valid(numel, j)? {
                None => next,
                Some(ok) => self.select_acc(ok, next, acc)?,
            };
        }
        acc = self.butterfly(op, d, acc, 32)?;
        let warps = self.threads / 32;
        if warps > 1 {
            let elem = Elem::Scalar(d);
            let (idx_offset, scratch) = self.scalar_reduce_scratch(d);
            self.reserve_scratch(scratch);
            let (lane, warp) = self.lane_and_warp()?;
            let lane0 = self
                .b
                .build_int_compare(IntPredicate::EQ, lane, self.i32c(0), "")?;
            self.when(Some(lane0), &mut |g| {
                let p = g.shared_elem(0, elem, warp)?;
                g.shared_store(p, acc.0, elem)?;
                if let Some(i) = acc.1 {
                    let p = g.shared_elem(idx_offset, Elem::Scalar(DType::I32), warp)?;
                    g.shared_store(p, i.into(), Elem::Scalar(DType::I32))?;
                }
                Ok(())
            })?;
            self.barrier()?;
            let mut total = self.identity(op, d);
            for w in 0..warps {
                let p = self.shared_elem(0, elem, self.i32c(w as u64))?;
                let v = self.shared_load(p, elem)?;
                let i = acc
                    .1
                    .map(|_| -> Result<_> {
                        let p = self.shared_elem(
                            idx_offset,
                            Elem::Scalar(DType::I32),
                            self.i32c(w as u64),
                        )?;
                        Ok(self
                            .shared_load(p, Elem::Scalar(DType::I32))?
                            .into_int_value())
                    })
                    .transpose()?;
                total = self.combine(op, d, total, (v, i))?;
            }
            self.barrier()?;
            acc = total;
        }
        self.finish(op, d, acc)
    }

    /// Combines `acc` across each aligned group of `lanes` lanes (a power of two up to 32)
    /// with `shfl.sync.bfly`: every lane of a group ends with the group's result.
    pub(super) fn butterfly(
        &mut self,
        op: ReduceOp,
        d: DType,
        mut acc: Acc<'ctx>,
        lanes: usize,
    ) -> Result<Acc<'ctx>> {
        let mut mask = lanes as u32 / 2;
        while mask >= 1 {
            let other = (
                self.shuffle_xor(acc.0, mask)?,
                acc.1
                    .map(|i| -> Result<_> {
                        Ok(self.shuffle_xor(i.into(), mask)?.into_int_value())
                    })
                    .transpose()?,
            );
            acc = self.combine(op, d, acc, other)?;
            mask /= 2;
        }
        Ok(acc)
    }

    /// The fold's starting value: 0 for sums (-0 for floats, addition's identity, which
    /// LLVM drops from `-0 + x`: a lane of -0s sums to -0), NaN (maxnum's identity) or the
    /// dtype's extreme for max/min, with index `i32::MAX` for argmax/argmin.
    pub(super) fn identity(&self, op: ReduceOp, d: DType) -> Acc<'ctx> {
        let t = self.compute_ty(d);
        let max = matches!(op, ReduceOp::Max | ReduceOp::ArgMax);
        let v: BasicValueEnum = match op {
            ReduceOp::Sum if d.is_float() => {
                self.const_value(tritium_dsl::ir::Const::Float(-0.0), d)
            }
            ReduceOp::Sum | ReduceOp::Xor => self.const_value(tritium_dsl::ir::Const::Int(0), d),
            _ if d.is_float() => t.into_float_type().const_float(f64::NAN).into(),
            _ if d.is_bool() => self
                .ctx
                .bool_type()
                .const_int(u64::from(!max), false)
                .into(),
            _ => {
                let it = t.into_int_type();
                let bits = d.bits();
                let v = match (max, d.is_signed_int()) {
                    (true, true) => 1u64 << (bits - 1),
                    (true, false) => 0,
                    (false, true) => (1u64 << (bits - 1)) - 1,
                    (false, false) => u64::MAX,
                };
                it.const_int(v, false).into()
            }
        };
        let idx =
            matches!(op, ReduceOp::ArgMax | ReduceOp::ArgMin).then(|| self.i32c(i32::MAX as u64));
        (v, idx)
    }

    /// Combines two partial results (commutative and associative up to float rounding).
    pub(super) fn combine(
        &mut self,
        op: ReduceOp,
        d: DType,
        a: Acc<'ctx>,
        b: Acc<'ctx>,
    ) -> Result<Acc<'ctx>> {
        match op {
            ReduceOp::Sum if d.is_float() => {
                // Halves add in f32 and round once, in `finish`.
                let s =
                    self.b
                        .build_float_add(a.0.into_float_value(), b.0.into_float_value(), "")?;
                Ok((s.into(), None))
            }
            ReduceOp::Sum if d.is_bool() => Ok((
                self.b
                    .build_xor(a.0.into_int_value(), b.0.into_int_value(), "")?
                    .into(),
                None,
            )),
            ReduceOp::Sum => Ok((self.binary(BinOp::Add, d, a.0, b.0)?, None)),
            ReduceOp::Max if d.is_float() => Ok((self.float_max_min(true, a.0, b.0)?, None)),
            ReduceOp::Min if d.is_float() => Ok((self.float_max_min(false, a.0, b.0)?, None)),
            ReduceOp::Max if d.is_bool() => Ok((
                self.b
                    .build_or(a.0.into_int_value(), b.0.into_int_value(), "")?
                    .into(),
                None,
            )),
            ReduceOp::Min if d.is_bool() => Ok((
                self.b
                    .build_and(a.0.into_int_value(), b.0.into_int_value(), "")?
                    .into(),
                None,
            )),
            ReduceOp::Max => Ok((self.binary(BinOp::Max, d, a.0, b.0)?, None)),
            ReduceOp::Min => Ok((self.binary(BinOp::Min, d, a.0, b.0)?, None)),
            ReduceOp::Xor => Ok((self.binary(BinOp::Xor, d, a.0, b.0)?, None)),
            ReduceOp::ArgMax | ReduceOp::ArgMin => {
                let better = self.arg_better(op == ReduceOp::ArgMax, d, b, a)?;
                self.select_acc(better, b, a)
            }
        }
    }

    /// True when `b` should replace `a`: a strictly better value, or an equal one (both
    /// NaN included) at a smaller index; a NaN never beats a number.
    fn arg_better(
        &self,
        max: bool,
        d: DType,
        b: Acc<'ctx>,
        a: Acc<'ctx>,
    ) -> Result<IntValue<'ctx>> {
        let bl = self.b;
        let (ai, bi) = (a.1.expect("arg index"), b.1.expect("arg index"));
        let earlier = bl.build_int_compare(IntPredicate::SLT, bi, ai, "")?;
        if d.is_float() {
            let (x, y) = (a.0.into_float_value(), b.0.into_float_value());
            let pred = if max {
                FloatPredicate::OGT
            } else {
                FloatPredicate::OLT
            };
            let wins = bl.build_float_compare(pred, y, x, "")?;
            let tie = bl.build_float_compare(FloatPredicate::OEQ, y, x, "")?;
            let a_nan = bl.build_float_compare(FloatPredicate::UNO, x, x, "")?;
            let b_nan = bl.build_float_compare(FloatPredicate::UNO, y, y, "")?;
            let both_nan = bl.build_and(a_nan, b_nan, "")?;
            let tie = bl.build_or(tie, both_nan, "")?;
            let tie_wins = bl.build_and(tie, earlier, "")?;
            let b_num = bl.build_not(b_nan, "")?;
            let replaces_nan = bl.build_and(a_nan, b_num, "")?;
            let w = bl.build_or(wins, tie_wins, "")?;
            return Ok(bl.build_or(w, replaces_nan, "")?);
        }
        let (x, y) = (a.0.into_int_value(), b.0.into_int_value());
        let signed = d.is_signed_int();
        let pred = match (max, signed) {
            (true, true) => IntPredicate::SGT,
            (true, false) => IntPredicate::UGT,
            (false, true) => IntPredicate::SLT,
            (false, false) => IntPredicate::ULT,
        };
        let wins = bl.build_int_compare(pred, y, x, "")?;
        let tie = bl.build_int_compare(IntPredicate::EQ, y, x, "")?;
        let tie_wins = bl.build_and(tie, earlier, "")?;
        Ok(bl.build_or(wins, tie_wins, "")?)
    }

    fn select_acc(&self, c: IntValue<'ctx>, a: Acc<'ctx>, b: Acc<'ctx>) -> Result<Acc<'ctx>> {
        let v = self.b.build_select(c, a.0, b.0, "")?;
        let i = match (a.1, b.1) {
            (Some(x), Some(y)) => Some(self.b.build_select(c, x, y, "")?.into_int_value()),
            _ => None,
        };
        Ok((v, i))
    }

    /// The result of a fold: the rounded value, or the index (0 when nothing was found).
    pub(super) fn finish(
        &self,
        op: ReduceOp,
        d: DType,
        acc: Acc<'ctx>,
    ) -> Result<BasicValueEnum<'ctx>> {
        match acc.1 {
            Some(i) if matches!(op, ReduceOp::ArgMax | ReduceOp::ArgMin) => {
                let none = self.b.build_int_compare(
                    IntPredicate::EQ,
                    i,
                    self.i32c(i32::MAX as u64),
                    "",
                )?;
                Ok(self.b.build_select(none, self.i32c(0), i, "")?)
            }
            _ => Ok(self.round_to(acc.0, d)?),
        }
    }

    /// A loop `k in 0..n` (i32) carrying partial results; returns them after the loop.
    pub(super) fn counted_loop(
        &mut self,
        n: usize,
        init: Vec<Acc<'ctx>>,
        body: &mut FoldStep<'_, 'ctx, Self>,
    ) -> Result<Vec<Acc<'ctx>>> {
        let pre = self.b.current_block()?;
        let header = self.ctx.append_basic_block(self.func, "fold");
        let exit = self.ctx.append_basic_block(self.func, "fold.end");
        self.b.build_unconditional_branch(header)?;
        self.b.position_at_end(header);
        let k = self.b.build_phi(self.ctx.i32_type(), "k")?;
        k.add_incoming(&[(&self.i32c(0), pre)]);
        let mut phis = Vec::new();
        let mut accs = Vec::new();
        for (v, i) in &init {
            let pv = self.b.build_phi(v.get_type(), "acc")?;
            pv.add_incoming(&[(v, pre)]);
            let pi = i
                .map(|i| -> Result<_> {
                    let p = self.b.build_phi(i.get_type(), "acc.i")?;
                    p.add_incoming(&[(&i, pre)]);
                    Ok(p)
                })
                .transpose()?;
            accs.push((
                pv.as_basic_value(),
                pi.map(|p| p.as_basic_value().into_int_value()),
            ));
            phis.push((pv, pi));
        }
        let kv = k.as_basic_value().into_int_value();
        let next_accs = body(self, kv, &accs)?;
        let latch = self.b.current_block()?;
        for ((pv, pi), (v, i)) in phis.iter().zip(&next_accs) {
            pv.add_incoming(&[(v, latch)]);
            if let (Some(p), Some(i)) = (pi, i) {
                p.add_incoming(&[(i, latch)]);
            }
        }
        let next = self.b.build_int_add(kv, self.i32c(1), "")?;
        k.add_incoming(&[(&next, latch)]);
        let more = self
            .b
            .build_int_compare(IntPredicate::ULT, next, self.i32c(n as u64), "")?;
        self.b.build_conditional_branch(more, header, exit)?;
        self.b.position_at_end(exit);
        Ok(next_accs)
    }
}
