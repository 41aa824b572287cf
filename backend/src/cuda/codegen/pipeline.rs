//! Software pipelining of a `for` loop around a tensor-core `dot` (Triton's `num_stages`).
//!
//! When a loop's body is its counter's arithmetic, index expressions, the two loads that
//! feed a tensor-core `dot` (deferred, see `async_copy.rs`) and that `dot`, the operand
//! tiles of `S` iterations live in shared memory at once (`S` = 3, Triton's default, or 2
//! where three would pass [`SHARED_BUDGET`]): before the loop, the copies of the first
//! `S - 1` iterations are issued, one `cp.async` group each; at each iteration the `dot`
//! waits until its own group has landed (`wait_group S - 2`), a barrier makes every warp
//! done with the buffer the last iteration read, the copies of iteration `i + S - 1` are
//! issued into that buffer, and the `mma`s read buffer `i % S` while those copies are in
//! flight. A later iteration's loads
//! are the same index expressions evaluated with the counter advanced: scalars of the
//! body are computed again from it (`Gen::scalar_at`). Iterations past the loop's end
//! issue nothing but still commit a group, so that group counts stay in step.

use super::swizzle::Swizzled;
use super::Gen;
use crate::llvm::{LoopCounter, Result};
use inkwell::values::{BasicValueEnum, IntValue};
use std::collections::{HashMap, HashSet};
use tritium_dsl::ir::{Block, Inst, Op, Value};

/// The most operand buffers: the `dot`'s tiles of this many iterations.
const MAX_STAGES: usize = 3;

/// Shared memory the stages may take: what every GPU from sm_80 gives one CTA (sm_86 and
/// sm_89 allow 99 KiB), so that a pipelined kernel launches on all of them.
const SHARED_BUDGET: usize = 96 * 1024;

/// A loop the generator pipelines: its `dot` and what evaluating a later iteration needs.
pub(super) struct Pipelined<'ctx, 'f> {
    /// The `dot`.
    pub dot: &'f Inst,
    /// Its `a` and `b` tiles' layouts in stage 0, `b` stored by columns or not.
    pub tiles: (Swizzled, Swizzled, bool),
    /// Bytes of one stage (both tiles).
    pub stage_bytes: usize,
    /// The number of stages (2 or 3).
    pub stages: usize,
    /// The loop's counter value (`body.args[0]`).
    pub iv: Value,
    /// Values the body defines: computed again for a later iteration.
    pub body_values: HashSet<Value>,
    /// This iteration's stage (`i % stages`, i32).
    pub stage: Option<IntValue<'ctx>>,
    /// The counter `stages - 1` iterations ahead (in the loop's dtype), and whether that
    /// iteration runs.
    pub ahead: Option<(BasicValueEnum<'ctx>, IntValue<'ctx>)>,
}

impl<'ctx, 'f> Gen<'ctx, 'f> {
    /// The `dot` of `body` if the loop can be pipelined (see the module docs).
    pub(super) fn pipeline_plan(
        &self,
        body: &'f Block,
        narrow: bool,
    ) -> Option<Pipelined<'ctx, 'f>> {
        if !narrow || self.check.is_some() {
            return None;
        }
        let dots: Vec<&Inst> = (body.insts.iter())
            .filter(|i| matches!(i.op, Op::Dot { .. }))
            .collect();
        let [dot] = dots[..] else {
            return None;
        };
        let Op::Dot { a, b, acc } = &dot.op else {
            return None;
        };
        self.mma_shape(dot)?;
        // The accumulator must reach the `dot` without shared memory: carried in fragments
        // (the body yields the `dot` in its place) or one value in every lane.
        let in_fragments = (body.args[1..].iter().zip(Self::yields(body)))
            .any(|(arg, y)| arg == acc && *y == dot.results[0]);
        let uniform = matches!(
            self.defs.get(acc).map(|i| &i.op),
            Some(Op::Const(_) | Op::Splat(_))
        );
        if !(in_fragments || uniform) {
            return None;
        }
        let carried: HashSet<Value> = body.args[1..].iter().copied().collect();
        let body_values: HashSet<Value> =
            body.insts.iter().flat_map(|i| i.results.clone()).collect();
        for x in [*a, *b] {
            let load = body.insts.iter().find(|i| i.results.first() == Some(&x))?;
            let Op::Load {
                ptr, mask, other, ..
            } = &load.op
            else {
                return None;
            };
            let ok =
                |v: Value| self.is_index_value(v) && self.recomputable(v, &body_values, &carried);
            if !self.async_candidates.contains(&x)
                || !ok(*ptr)
                || !mask.is_none_or(ok)
                || !other.is_none_or(ok)
            {
                return None;
            }
        }
        // Nothing else in the body may use shared memory while copies are in flight.
        let plain = body.insts.iter().all(|i| {
            std::ptr::eq(i, dot)
                || matches!(
                    i.op,
                    Op::Yield(_) | Op::Load { .. } | Op::ProgramId(_) | Op::NumPrograms(_)
                )
                || (i.op.regions().is_empty()
                    && i.op.is_elementwise()
                    && i.results
                        .iter()
                        .all(|r| self.ty(*r).is_scalar() || self.is_index_value(*r)))
        });
        if !plain {
            return None;
        }
        let tiles = self.operand_tiles(dot, true, false);
        let stage_bytes = (tiles.0.bytes() + tiles.1.bytes()).next_multiple_of(128);
        let stages = (2..=MAX_STAGES)
            .rev()
            .find(|s| s * stage_bytes <= SHARED_BUDGET)?;
        Some(Pipelined {
            dot,
            tiles,
            stage_bytes,
            stages,
            iv: body.args[0],
            body_values,
            stage: None,
            ahead: None,
        })
    }

    /// Whether `v` can be computed for a later iteration: it depends on no carried value,
    /// and what it needs of the body are constants, program ids and elementwise ops (no
    /// load: its memory may change).
    fn recomputable(&self, v: Value, body: &HashSet<Value>, carried: &HashSet<Value>) -> bool {
        if carried.contains(&v) {
            return false;
        }
        let Some(inst) = self.defs.get(&v).filter(|_| body.contains(&v)) else {
            // Defined before the loop (or its counter): the same at every iteration.
            return true;
        };
        let here = match &inst.op {
            Op::Const(_) | Op::ProgramId(_) | Op::NumPrograms(_) => true,
            Op::Load { .. } => false,
            op => op.is_elementwise() && op.regions().is_empty(),
        };
        here && (inst.op.operands().iter()).all(|o| self.recomputable(*o, body, carried))
    }

    /// The scalar `v`, computed for the iteration `self.iteration` stands for: the counter
    /// replaced and the body's scalars computed again from it (each time it is asked for).
    pub(super) fn scalar_at(&mut self, v: Value) -> Result<BasicValueEnum<'ctx>> {
        if let Some(s) = self.iteration.get(&v) {
            return Ok(*s);
        }
        let again = self
            .pipelined
            .as_ref()
            .is_some_and(|p| p.body_values.contains(&v))
            && !self.iteration.is_empty();
        let inst: Option<&'f Inst> = self.defs.get(&v).copied();
        let r = match inst {
            Some(inst) if again => match &inst.op {
                Op::Const(c) => {
                    let d = self.ty(v).dtype().expect("a numeric constant");
                    self.const_value(*c, d)
                }
                Op::ProgramId(axis) => self.pids[*axis as usize].into(),
                Op::NumPrograms(axis) => self.nprogs[*axis as usize].into(),
                op => {
                    let args: Vec<BasicValueEnum<'ctx>> = (op.operands().iter())
                        .map(|o| self.scalar_at(*o))
                        .collect::<Result<_>>()?;
                    self.element(inst, &args)?
                }
            },
            _ => return self.scalar(v),
        };
        // Not kept for other uses: this may be emitted inside one chunk's branch, which
        // does not dominate the others (LLVM merges the copies that may be merged).
        Ok(r)
    }

    /// Issues the copies of the iteration whose counter value is `iv` into `stage`'s
    /// buffers (a byte offset), then commits them as a group.
    pub(super) fn issue_stage(
        &mut self,
        iv: BasicValueEnum<'ctx>,
        runs: IntValue<'ctx>,
        stage: IntValue<'ctx>,
    ) -> Result<()> {
        let (dot, (a_tile, b_tile, columns), stage_bytes, iv_value) = {
            let p = self.pipelined.as_ref().expect("a pipelined loop");
            (p.dot, p.tiles, p.stage_bytes, p.iv)
        };
        let Op::Dot { a, b, .. } = &dot.op else {
            unreachable!("the plan's dot")
        };
        let (a, b) = (*a, *b);
        let base = self
            .b
            .build_int_mul(stage, self.i32c(stage_bytes as u64), "stage")?;
        self.when(Some(runs), &mut |g| {
            g.iteration = HashMap::from([(iv_value, iv)]);
            let out = g
                .copy_operand(a, a_tile, false, base)
                .and_then(|()| g.copy_operand(b, b_tile, columns, base));
            g.iteration.clear();
            out
        })?;
        self.commit_copies()
    }

    /// The loop's prologue: the copies of its first `stages - 1` iterations.
    pub(super) fn pipeline_prologue(&mut self, count: &LoopCounter<'ctx>) -> Result<()> {
        let stages = self.pipelined.as_ref().map_or(0, |p| p.stages);
        for d in 0..stages - 1 {
            let iv = count.ahead(&self.emit(), count.lo, d as u64)?;
            let runs = count.runs(&self.emit(), iv)?;
            let value = count.body_value(&self.emit(), iv)?;
            self.issue_stage(value, runs, self.i32c(d as u64))?;
        }
        Ok(())
    }
}
