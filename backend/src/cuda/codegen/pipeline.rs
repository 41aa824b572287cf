//! Software pipelining of a `for` loop around a tensor-core `dot` (Triton's `num_stages`).
//!
//! When a loop's body uses no shared memory but for its tensor-core `dot`s (index and
//! scalar ops, ops on values held in fragments, the loads that feed the `dot`s, deferred:
//! see `async_copy.rs`), the operand tiles of `S` iterations live in shared memory at once:
//! `S = num_stages - 1` buffers, as Triton's `num_stages` counts them on Ampere (tutorial
//! 03's 128×256×64 at 3 stages takes two 48 KiB buffers; on Hopper `S = num_stages`, as
//! Triton's there), fewer where they would pass [`SHARED_BUDGET`] (Hopper's
//! [`HOPPER_SHARED_BUDGET`]), none below 2. Before the loop, the copies of the first `S - 1`
//! iterations are issued, one `cp.async` group each; at each iteration the first `dot`
//! waits until its own group has landed (`wait_group S - 2`), a barrier makes every warp
//! done with the buffer the last iteration read, the copies of iteration `i + S - 1` are
//! issued into that buffer, and the `mma`s read buffer `i % S` while those copies are in
//! flight. A later iteration's loads
//! are the same index expressions evaluated with the counter advanced: scalars of the
//! body are computed again from it (`Gen::scalar_at`). Iterations past the loop's end
//! issue nothing but still commit a group, so that group counts stay in step. On Hopper,
//! where every copied tile is a tensor descriptor's block, TMA fills the stages instead,
//! each waited for on its own `mbarrier` (`tma.rs`).

use super::held::Held;
use super::swizzle::Swizzled;
use super::tma::{TmaStages, MBARRIER_BYTES};
use super::Gen;
use crate::llvm::{Emitter, LoopCounter, Result};
use inkwell::values::{BasicValueEnum, IntValue};
use std::collections::{HashMap, HashSet};
use tritium_dsl::ir::{BinOp, Block, Inst, Op, Value};

/// The most operand buffers (each the `dot`s' tiles of one iteration).
const MAX_STAGES: usize = 8;

/// Shared memory the stages may take: what every GPU from sm_80 gives one CTA (sm_86 and
/// sm_89 allow 99 KiB), so that a pipelined kernel launches on all of them.
const SHARED_BUDGET: usize = 96 * 1024;

/// The same on Hopper (sm_90's 227 KiB per CTA, less 3 KiB for the kernel's other uses).
const HOPPER_SHARED_BUDGET: usize = 224 * 1024;

/// A loop the generator pipelines: its `dot`s and what evaluating a later iteration needs.
pub(super) struct Pipelined<'ctx, 'f> {
    /// The body's tensor-core `dot`s in order, with their tiles in a stage.
    pub dots: Vec<StagedDot<'f>>,
    /// Bytes of one stage (every `dot`'s copied tiles).
    pub stage_bytes: usize,
    /// The number of stages (2 or 3).
    pub stages: usize,
    /// The loop's counter value (`body.args[0]`).
    pub iv: Value,
    /// Values the body defines: computed again for a later iteration.
    pub body_values: HashSet<Value>,
    /// Carried scalars that advance by a loop-invariant step (a block pointer's offsets):
    /// the body's argument, its initial value and the step.
    pub inductions: Vec<Induction>,
    /// This iteration's stage (`i % stages`, i32), carried through the loop.
    pub stage: Option<IntValue<'ctx>>,
    /// The parity of `i / stages` (i32), carried: the phase of the stage's `mbarrier`
    /// this iteration waits for (`tma.rs`).
    pub phase: Option<IntValue<'ctx>>,
    /// The counter `stages - 1` iterations ahead (in the loop's dtype), and whether that
    /// iteration runs.
    pub ahead: Option<(BasicValueEnum<'ctx>, IntValue<'ctx>)>,
    /// Where the body's only `dot` runs on `wgmma` and accumulates into a carried value
    /// that nothing else reads (tutorial 03): that value's place among the carried ones.
    /// Its group then stays in flight across the back edge (`wgmma.rs`).
    pub carried_acc: Option<usize>,
    /// The carried accumulator starts at zero: its registers start undefined instead and
    /// the first iteration's first `wgmma` ignores them (scale-d 0; Triton's
    /// `OptimizeAccumulatorInit`), so that no move defines them where `ptxas` would see
    /// it between a `wgmma` and its wait (a loop that runs no iteration gives zeros).
    pub zero_init: bool,
    /// This iteration's number from 0 (i32).
    pub trip: Option<IntValue<'ctx>>,
    /// Where every copied tile is a tensor descriptor's block: TMA copies them, waited
    /// for on each stage's `mbarrier` (`tma.rs`).
    pub tma: Option<TmaStages>,
}

/// A carried scalar `arg` that starts at `init` and grows by `step` per iteration: a later
/// iteration's value is `arg + distance · step` (wrapping, as the adds would).
#[derive(Clone, Copy)]
pub(super) struct Induction {
    pub arg: Value,
    pub init: Value,
    pub step: Value,
}

/// One `dot` of a pipelined loop: its `a` and `b` tiles' layouts in stage 0 (`b` stored by
/// columns or not), and whether `a` is copied (else its A fragments are in registers).
pub(super) struct StagedDot<'f> {
    pub dot: &'f Inst,
    pub tiles: (Swizzled, Swizzled, bool),
    pub copies_a: bool,
}

impl<'ctx, 'f> Gen<'ctx, 'f> {
    /// The plan for pipelining a loop with `body`, if it can be (see the module docs).
    pub(super) fn pipeline_plan(
        &self,
        body: &'f Block,
        init: &[Value],
        ahead_is_exact: bool,
        stages: Option<u32>,
    ) -> Option<Pipelined<'ctx, 'f>> {
        // Triton keeps `num_stages - 1` buffers on Ampere and `num_stages` on Hopper.
        let buffers = match self.wgmma {
            true => stages.unwrap_or(self.num_stages),
            false => stages.unwrap_or(self.num_stages).saturating_sub(1),
        };
        let wanted = (buffers as usize).min(MAX_STAGES);
        if !ahead_is_exact || self.checks_in(body) || wanted < 2 {
            return None;
        }
        let inductions = self.inductions(body, init);
        let dots: Vec<&Inst> = (body.insts.iter())
            .filter(|i| matches!(i.op, Op::Dot { .. }))
            .collect();
        if dots.is_empty() || dots.iter().any(|d| self.mma_shape(d).is_none()) {
            return None;
        }
        let carried: HashSet<Value> = (body.args[1..].iter().copied())
            .filter(|a| !inductions.iter().any(|i| i.arg == *a))
            .collect();
        let body_values: HashSet<Value> =
            body.insts.iter().flat_map(|i| i.results.clone()).collect();
        let copyable = |x: Value| -> bool {
            let Some(load) = body.insts.iter().find(|i| i.results.first() == Some(&x)) else {
                return false;
            };
            let Op::Load {
                ptr, mask, other, ..
            } = &load.op
            else {
                return false;
            };
            let ok =
                |v: Value| self.is_index_value(v) && self.recomputable(v, &body_values, &carried);
            self.async_candidates.contains(&x)
                && ok(*ptr)
                && mask.is_none_or(ok)
                && other.is_none_or(ok)
        };
        if !self.uses_no_shared_memory(body) {
            return None;
        }
        let mut staged = Vec::new();
        let mut offset = self.shared_floor;
        for dot in &dots {
            let Op::Dot { a, b, .. } = &dot.op else {
                return None;
            };
            let a_in_registers =
                self.a_hoisted.contains_key(&dot.results[0]) || self.a_fragments_in_registers(dot);
            if !(a_in_registers || copyable(*a)) || !copyable(*b) {
                return None;
            }
            let (a_tile, b_tile, columns) = self.operand_tiles(dot, true, a_in_registers);
            let shift = |t: Swizzled| t.at(t.offset - self.shared_floor + offset);
            let tiles = (shift(a_tile), shift(b_tile), columns);
            offset = (tiles.1.offset + tiles.1.bytes()).next_multiple_of(self.tile_alignment());
            staged.push(StagedDot {
                dot,
                tiles,
                copies_a: !a_in_registers,
            });
        }
        let stage_bytes = offset - self.shared_floor;
        let tma = staged.iter().all(|d| {
            let Op::Dot { a, b, .. } = &d.dot.op else {
                return false;
            };
            let (a_tile, b_tile, columns) = &d.tiles;
            (!d.copies_a || self.tma_copies(*a, a_tile, false))
                && self.tma_copies(*b, b_tile, *columns)
        });
        // The stages' barriers (TMA, Hopper only: at most 64 bytes) come out of the 3 KiB
        // that `HOPPER_SHARED_BUDGET` leaves below the hardware's 227 KiB, as Triton's
        // do: a loop of three 64 KiB stages after a 32 KiB `q` still takes three.
        let scratch = self.body_scratch(body);
        let stages = (2..=wanted).rev().find(|s| {
            let budget = match self.wgmma {
                true => HOPPER_SHARED_BUDGET,
                false => SHARED_BUDGET,
            };
            self.shared_floor + s * stage_bytes + scratch <= budget
        })?;
        const { assert!(MAX_STAGES * MBARRIER_BYTES <= 227 * 1024 - HOPPER_SHARED_BUDGET) };
        let tma = tma.then_some(TmaStages {
            barriers: self.shared_floor + stages * stage_bytes,
        });
        let carried_acc = Self::carried_accumulator(body, &dots)
            .filter(|_| self.wgmma_in_loop(&staged[0], stage_bytes));
        let zero_init = carried_acc.is_some_and(|j| self.is_positive_zero(init[j]));
        Some(Pipelined {
            carried_acc,
            zero_init,
            trip: None,
            dots: staged,
            stage_bytes,
            stages,
            iv: body.args[0],
            body_values,
            inductions,
            stage: None,
            phase: None,
            ahead: None,
            tma,
        })
    }

    /// Whether the staged `dot` of a pipelined loop runs on `wgmma` (as `Gen::mma_dot`
    /// decides it, from the same tiles).
    fn wgmma_in_loop(&self, staged: &StagedDot<'f>, stage_bytes: usize) -> bool {
        let Some((_, [m, n, _])) = self.mma_shape(staged.dot) else {
            return false;
        };
        let layout = self.mma_layout(staged.dot, m, n);
        let (a_tile, b_tile, _) = staged.tiles;
        let a_shared = match self.a_hoisted.get(&staged.dot.results[0]) {
            Some(super::dot::HoistedA::Shared(t)) => Some(*t),
            Some(super::dot::HoistedA::Registers(_)) => None,
            None if self.a_fragments_in_registers(staged.dot) => None,
            None => Some(a_tile),
        };
        self.wgmma_fits(layout, a_shared.as_ref(), &b_tile, stage_bytes)
    }

    /// See [`Pipelined::carried_acc`]: the body's one `dot` takes carried value `j` as its
    /// accumulator and its result is yielded as value `j`, each used nowhere else.
    fn carried_accumulator(body: &Block, dots: &[&Inst]) -> Option<usize> {
        let [dot] = dots else {
            return None;
        };
        let Op::Dot { acc, .. } = &dot.op else {
            return None;
        };
        let r = dot.results[0];
        let j = body.args[1..].iter().position(|a| a == acc)?;
        let uses = |v: Value| {
            (body.insts.iter())
                .flat_map(|i| i.op.operands())
                .filter(|o| *o == v)
                .count()
        };
        (body.yields().get(j) == Some(&r) && uses(*acc) == 1 && uses(r) == 1).then_some(j)
    }

    /// Whether a loop body uses no shared memory but for its tensor-core `dot`s' tiles
    /// (which may then be in flight, or kept, across its other ops) and the few scratch
    /// bytes of reductions to a scalar ([`Self::body_scratch`], above those tiles): loads
    /// of slots, index and scalar ops, ops on values held in fragments (whose operands are
    /// held alike: `held.rs`) and tensor-core `dot`s whose accumulator and operands need
    /// no conversion use none, and no carried value changes layout at the end of an
    /// iteration.
    pub(super) fn uses_no_shared_memory(&self, body: &Block) -> bool {
        let quiet = body
            .insts
            .iter()
            .all(|i| self.inst_uses_no_shared_memory(i));
        let settled = (body.args[1..].iter().zip(body.yields()))
            .all(|(arg, y)| self.held(*arg) == self.held(*y) || self.ty(*y).is_scalar());
        quiet && settled
    }

    /// Whether the op `i` (no loop, no branch) uses no shared memory (see
    /// [`Self::uses_no_shared_memory`]).
    fn inst_uses_no_shared_memory(&self, i: &Inst) -> bool {
        // Operands that would go to slots (or to fragments) through shared memory.
        let in_slots = |v: &Value| self.held(*v) == Held::Slots;
        let dot_in_place = match &i.op {
            Op::Dot { a, b, acc } => {
                self.mma_shape(i).is_some()
                    && (self.held(*acc) == self.held(i.results[0]) || self.is_uniform_tile(*acc))
                    && (in_slots(a) || self.a_fragments_in_registers(i))
                    && in_slots(b)
            }
            Op::Load { .. } => i.op.operands().iter().all(in_slots),
            _ => false,
        };
        // A reduction to a scalar across warps meets its warps' partials in a few bytes
        // of scratch (above a pipelined loop's stages: `scratch_floor`, counted in its
        // budget by `body_scratch`); one of a value held in fragments is converted to
        // slots through shared memory first.
        let reduced_through_shared = match &i.op {
            Op::Reduce { x, .. } => {
                i.results.iter().any(|r| self.ty(*r).is_scalar()) && !in_slots(x)
            }
            _ => false,
        };
        dot_in_place
            || matches!(i.op, Op::Yield(_) | Op::ProgramId(_) | Op::NumPrograms(_))
            || (i.op.regions().is_empty()
                && !reduced_through_shared
                && (i.op.is_elementwise() || matches!(i.op, Op::Reduce { .. }))
                && i.results.iter().all(|r| {
                    self.ty(*r).is_scalar()
                        || self.is_index_value(*r)
                        || self.held(*r) != Held::Slots
                }))
    }

    /// The scratch bytes a body [`Self::uses_no_shared_memory`] accepts takes above its
    /// tiles: its reductions to a scalar across warps' (of their operand's dtype).
    fn body_scratch(&self, body: &Block) -> usize {
        if self.threads <= 32 {
            return 0;
        }
        (body.insts.iter())
            .filter_map(|i| match &i.op {
                Op::Reduce { x, .. } if self.ty(i.results[0]).is_scalar() => {
                    let d = self.ty(*x).dtype()?;
                    Some(self.scalar_reduce_scratch(d).1)
                }
                _ => None,
            })
            .max()
            .unwrap_or(0)
    }

    /// The carried scalars of a loop that advance by a step the same at every iteration:
    /// yielded as `arg + step` where `step` is defined before the loop, or in the body
    /// from constants and values defined before it (`BK * stride` written in the body, as
    /// tutorial 03 advances its pointers).
    fn inductions(&self, body: &Block, init: &[Value]) -> Vec<Induction> {
        let inner: HashSet<Value> = body.insts.iter().flat_map(|i| i.results.clone()).collect();
        // The same at every iteration: computable again for a later one, from neither the
        // counter nor a carried value.
        let args: HashSet<Value> = body.args.iter().copied().collect();
        (body.args[1..].iter().zip(body.yields()).zip(init))
            .filter_map(|((arg, y), init)| {
                let def = self.defs.get(y)?;
                let Op::Binary(BinOp::Add, x, step) = def.op else {
                    return None;
                };
                let invariant = self.recomputable(step, &inner, &args);
                (x == *arg && self.ty(*arg).is_scalar() && invariant).then_some(Induction {
                    arg: *arg,
                    init: *init,
                    step,
                })
            })
            .collect()
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
            // A scalar made from a tile (a one-element tile reshaped to a scalar):
            // `scalar_at` computes a scalar again from scalars only.
            op if self.ty(v).is_scalar()
                && op.operands().iter().any(|o| !self.ty(*o).is_scalar()) =>
            {
                false
            }
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
                // A shape op from a scalar to a scalar (a `reshape` of one): the value
                // itself (`element` computes elementwise ops only).
                Op::Reshape(x) | Op::Broadcast(x) | Op::Permute { x, .. } | Op::Flip { x, .. } => {
                    self.scalar_at(*x)?
                }
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
    ///
    /// The loop's inductions take their values `distance` iterations after `from`'s (the
    /// body's arguments, or in the prologue the initial values).
    pub(super) fn issue_stage(
        &mut self,
        iv: BasicValueEnum<'ctx>,
        runs: IntValue<'ctx>,
        stage: IntValue<'ctx>,
        (distance, from_init): (u64, bool),
    ) -> Result<()> {
        let (copies, stage_bytes, iv_value) = {
            let p = self.pipelined.as_ref().expect("a pipelined loop");
            let mut copies = Vec::new();
            for d in &p.dots {
                let Op::Dot { a, b, .. } = &d.dot.op else {
                    unreachable!("the plan's dots")
                };
                let (a_tile, b_tile, columns) = d.tiles;
                if d.copies_a {
                    copies.push((*a, a_tile, false));
                }
                copies.push((*b, b_tile, columns));
            }
            (copies, p.stage_bytes, p.iv)
        };
        let inductions = self
            .pipelined
            .as_ref()
            .map_or(Vec::new(), |p| p.inductions.clone());
        let mut later = HashMap::from([(iv_value, iv)]);
        for ind in inductions {
            let base = self.scalar(if from_init { ind.init } else { ind.arg })?;
            self.iteration = HashMap::from([(iv_value, iv)]);
            let step = self.scalar_at(ind.step);
            self.iteration.clear();
            let d = self.ty(ind.arg).dtype().expect("a numeric induction");
            let times = self.const_value(tritium_dsl::ir::Const::Int(distance as i128), d);
            let advance = self.binary(BinOp::Mul, d, step?, times)?;
            later.insert(ind.arg, self.binary(BinOp::Add, d, base, advance)?);
        }
        let base = self
            .b
            .build_int_mul(stage, self.i32c(stage_bytes as u64), "stage")?;
        let tma = self.pipelined.as_ref().and_then(|p| p.tma);
        self.when(Some(runs), &mut |g| {
            g.iteration = later.clone();
            let out = match tma {
                Some(t) => {
                    let tiles: Vec<_> = copies.iter().map(|(x, tile, _)| (*x, *tile)).collect();
                    g.tma_issue(t, stage, base, &tiles)
                }
                None => (copies.iter())
                    .try_for_each(|(x, tile, columns)| g.copy_operand(*x, *tile, *columns, base)),
            };
            g.iteration.clear();
            out
        })?;
        match tma {
            Some(_) => Ok(()),
            None => self.commit_copies(),
        }
    }

    /// The loop's prologue: the copies of its first `stages - 1` iterations.
    pub(super) fn pipeline_prologue(&mut self, count: &LoopCounter<'ctx>) -> Result<()> {
        let stages = self.pipelined.as_ref().map_or(0, |p| p.stages);
        if let Some(t) = self.pipelined.as_ref().and_then(|p| p.tma) {
            self.tma_init(t, stages)?;
        }
        for d in 0..stages - 1 {
            let iv = count.ahead(&self.emit(), count.lo, d as u64)?;
            let runs = count.runs(&self.emit(), iv)?;
            let value = count.body_value(&self.emit(), iv)?;
            self.issue_stage(value, runs, self.i32c(d as u64), (d as u64, true))?;
        }
        Ok(())
    }
}
