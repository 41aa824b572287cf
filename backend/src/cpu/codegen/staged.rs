//! Software-pipelined lane loops. A lane loop whose lanes compute long dependency chains
//! (an f32 `pow`, `erfinv` or `erf` per lane: about a hundred cycles from the loads to
//! the store) runs at about the rate its chains' latency allows the out-of-order window
//! to overlap, not at the rate the core issues its instructions: on Zen 4, `pow`'s loop
//! took twice its issue time. So such a loop is cut into [`STAGES`] stages, each a part of
//! the chain of at least [`STAGE_CYCLES`]; chunk `c` (of [`CHUNK`] lanes) runs its stage
//! `s` in the iteration where chunk `c + 1` runs stage `s − 1`, so that the stages in
//! flight are independent. Each value goes in the stage where it is needed at the latest
//! (a side branch beside its reader); the values a later stage reads (those above
//! [`RECOMPUTE_DEPTH`]; cheaper ones are computed again where read) go through per-stage
//! rings of scratch, one slot per chunk in flight. Lanes are computed by the same
//! operations in any order, so the results are the same bits. In cache, one thread:
//! `erf` 0.85 of its time unstaged, `erfinv` 0.86, `pow` 0.86, `acosh` 0.9
//! (`bench_table libm`); loops of shorter chains or more crossing values are left as they
//! are (see the constants).

use super::prefetch::CHUNK;
use super::prefix::PrefixSplit;
use super::{Gen, LoopUnroll, Lv};
use crate::llvm::{Emitter, Positioned, Result};
use inkwell::values::{IntValue, PointerValue};
use inkwell::IntPredicate;
use std::collections::{HashMap, HashSet};
use tritium_dsl::ir::{BinOp, DType, Elem, Op, UnOp, Value};

/// Stages (and chunks in flight) of a staged loop.
const STAGES: usize = 4;

/// The dependency chain (in cycles of [`latency`]) each stage needs at least: shorter
/// chains (two or three stages of them) gained nothing over the f32 libm functions, or
/// lost up to a tenth.
const STAGE_CYCLES: u32 = 24;

/// At most this many values cross the cuts, all together: each costs a store and a load
/// per vector (`lgamma`, 25 of them, ran at half its speed staged; `tgamma`, 22, lost a
/// tenth; `erf`, 14, gained 6%).
const MAX_CROSSING: usize = 15;

/// Values whose chain is this short are computed again in each stage that reads them
/// (loads, index arithmetic) rather than kept in scratch.
const RECOMPUTE_DEPTH: u32 = 8;

/// A walk deeper than this gives up staging: the walk recurses, and a compile may run on
/// a thread of a small stack (`pow`'s deepest path is about 100 values).
const MAX_WALK: usize = 512;

/// How a lane loop's values are split into [`STAGES`] stages.
pub(super) struct StagePlan {
    /// For each stage but the last, the values it computes for later ones.
    outputs: Vec<Vec<Value>>,
}

impl StagePlan {
    /// How many values cross a cut.
    fn crossing(&self) -> usize {
        self.outputs.iter().map(Vec::len).sum()
    }
}

/// A plan with the scratch ring of each output ([`STAGES`] slots of [`CHUNK`] lanes).
struct Staged<'ctx> {
    plan: StagePlan,
    rings: HashMap<Value, PointerValue<'ctx>>,
}

/// The copy for chunks where some `likely` hint fails, and the ring of each chunk's flag
/// (whether its hints hold: tested once, when the chunk enters its first stage).
struct RareCopy<'ctx> {
    staged: Staged<'ctx>,
    flags: PointerValue<'ctx>,
}

/// Where a stage runs: the chunk's first lane and ring slot, and the split of the masked
/// copy being generated (the staged chunks are below its `p`).
#[derive(Clone, Copy)]
struct Stage<'a, 'ctx> {
    split: Option<&'a PrefixSplit<'ctx>>,
    slot: IntValue<'ctx>,
    base: IntValue<'ctx>,
}

/// The depth of each value a lane loop computes (the cycles from its inputs to it) and
/// who reads it, as [`Gen::stage_dag`] walks it.
#[derive(Default)]
struct Dag {
    depth: HashMap<Value, u32>,
    /// Bool values the copy being generated knows, or folds to a constant.
    constant: HashMap<Value, bool>,
    /// `(user, operand)` pairs, both computed in the loop, each pushed after every pair
    /// of the operand's own.
    edges: Vec<(Value, Value)>,
    /// The latency of each op computed in the loop (see [`latency`]).
    latency: HashMap<Value, u32>,
    /// Values this does not stage, with everything they read: those read at other lanes'
    /// indices (a flip, a gather, a broadcast of a smaller tile…), masked loads, calls and
    /// float remainders (loops of their own). Their lanes are computed wherever read, as
    /// in a plain lane loop, never kept in a ring (a ring holds a chunk's own lanes only).
    opaque: HashSet<Value>,
}

/// The cycles from a lane op's operands to its result, about as on a recent x86 core with
/// 512-bit vectors.
fn latency(op: &Op, operand: Option<DType>, result: Option<DType>) -> u32 {
    let float = |d: Option<DType>| d.is_some_and(|d| d.is_float());
    let wide = |d: Option<DType>| d.is_some_and(|d| d.size_bytes() == 8);
    match op {
        Op::Binary(BinOp::Div, ..) if float(operand) => 11 + 3 * u32::from(wide(operand)),
        Op::Binary(BinOp::Div | BinOp::Rem, ..) => 20,
        Op::Binary(BinOp::Max | BinOp::Min, ..) if float(operand) => 2,
        Op::Binary(BinOp::Mul, ..) => 3,
        Op::Binary(..) if float(operand) => 3,
        Op::Binary(..) => 1,
        Op::Fma(..) => 4,
        Op::Cmp(..) if float(operand) => 3,
        Op::Unary(UnOp::Sqrt | UnOp::Rsqrt, _) => 15,
        Op::Unary(UnOp::Exp | UnOp::Exp2 | UnOp::Log | UnOp::Log2 | UnOp::Sin | UnOp::Cos, _) => 40,
        Op::Unary(UnOp::Floor | UnOp::Ceil | UnOp::Trunc | UnOp::Round | UnOp::Rint, _) => 3,
        Op::Cast(_) if float(operand) || float(result) => 3,
        Op::Hint { .. } => 0,
        Op::Load { .. } => 5,
        _ => 1,
    }
}

impl<'ctx> Gen<'ctx, '_> {
    /// Emits a lane loop over the leading chunks of the rank-1 `shape` (whole chunks) that
    /// computes `roots` and runs `body` at each lane, software-pipelined, when its chains
    /// are long enough to gain (see the module docs), and gives how many chunks it ran
    /// (an i64: all of them, or in the masked copy of an index mask split at `p`, those
    /// below `p`, where the mask is known true); `None` (nothing emitted) otherwise.
    /// Each chunk requests its share of the next program's `spans`. `body`'s result (a
    /// fused sum's term) is not used: no sums are fused into such a loop.
    pub(super) fn staged_lane_loop(
        &mut self,
        shape: &[usize],
        roots: &[Value],
        spans: &[super::prefetch::Span<'ctx>],
        body: &mut super::prefetch::LaneBody<'_, 'ctx, Self>,
    ) -> Result<Option<IntValue<'ctx>>> {
        let chunks = shape[0] / CHUNK;
        let split = self.split_for(shape[0]);
        let prefix_elsewhere = self.prefix.is_some() && split.is_none();
        if self.opts.bounds_check || prefix_elsewhere || chunks < STAGES {
            return Ok(None);
        }
        let hints = self.chunk_likely.clone();
        // The split's masks are true at every lane of the staged chunks, each read at its
        // own index: the walks take them as known.
        let before = (self.true_masks.clone(), self.false_lanes.clone());
        if let Some(split) = &split {
            self.true_masks.extend(split.masks());
        }
        // The copy for chunks whose hints hold, and (with hints) the one reading them.
        let rare = (!hints.is_empty()).then(|| self.stage_dag(roots, shape));
        for &(h, value) in &hints {
            self.know(h, value);
        }
        let usual = self.stage_dag(roots, shape);
        let masks = std::mem::replace(&mut self.true_masks, before.0);
        self.false_lanes = before.1;
        // (A walk that went too deep stages neither copy.)
        let (Some(usual), Some(rare)) = (usual, rare.map_or(Some(None), |d| d.map(Some))) else {
            return Ok(None);
        };
        if deepest(&usual, roots) < STAGES as u32 * STAGE_CYCLES {
            return Ok(None);
        }
        let storable = |g: &Self, v: Value| {
            matches!(g.lv.get(&v), Some(Lv::Lazy))
                && !masks.contains(&v)
                && g.ty(v).shape == shape
                && matches!(g.ty(v).elem, Elem::Scalar(_))
        };
        let usual = plan_stages(&usual, roots, |v| storable(self, v));
        let rare = rare.map(|dag| plan_stages(&dag, roots, |v| storable(self, v)));
        // No value crossing: the earlier stages would be empty loops (a root read at
        // other lanes, through a flip, say, is computed whole in the last).
        let plans = [Some(&usual), rare.as_ref()];
        if usual.crossing() == 0 || plans.iter().flatten().any(|p| p.crossing() > MAX_CROSSING) {
            return Ok(None);
        }
        let usual = self.with_rings(usual)?;
        let stages = STAGES;
        let bool_ty = self.ctx.bool_type();
        let rare = match rare {
            Some(plan) => Some(RareCopy {
                staged: self.with_rings(plan)?,
                flags: self.entry_alloca(bool_ty.array_type(stages as u32).into())?,
            }),
            None => None,
        };
        let full = match &split {
            None => self.i64c(chunks as u64),
            Some(split) => {
                self.b
                    .build_int_unsigned_div(split.p, self.i64c(CHUNK as u64), "full")?
            }
        };
        let i64t = self.ctx.i64_type();
        let any = self
            .b
            .build_int_compare(IntPredicate::NE, full, self.i64c(0), "")?;
        let pre = self.ctx.append_basic_block(self.func, "stage.pre");
        let header = self.ctx.append_basic_block(self.func, "stage.chunk");
        let done = self.ctx.append_basic_block(self.func, "stage.end");
        self.b.build_conditional_branch(any, pre, done)?;
        self.b.position_at_end(pre);
        self.b.build_unconditional_branch(header)?;
        self.b.position_at_end(header);
        let c = self.b.build_phi(i64t, "c")?;
        c.add_incoming(&[(&self.i64c(0), pre)]);
        let cv = c.as_basic_value().into_int_value();
        let at = Stage {
            split: split.as_ref(),
            slot: self.i64c(0),
            base: self.i64c(0),
        };
        // The oldest chunk's last stage first: its store does not wait for the others.
        for s in (0..stages).rev() {
            let chunk = self.b.build_int_sub(cv, self.i64c(s as u64), "")?;
            let live = self
                .b
                .build_int_compare(IntPredicate::ULT, chunk, full, "")?;
            let run = self.ctx.append_basic_block(self.func, "stage");
            let next = self.ctx.append_basic_block(self.func, "stage.next");
            self.b.build_conditional_branch(live, run, next)?;
            self.b.position_at_end(run);
            let at = Stage {
                base: self.b.build_int_mul(chunk, self.i64c(CHUNK as u64), "")?,
                slot: self
                    .b
                    .build_int_unsigned_rem(chunk, self.i64c(stages as u64), "")?,
                ..at
            };
            match &rare {
                Some(rare) => {
                    // SAFETY (of the generated code): `slot < stages`, the array's length.
                    let flag = unsafe { self.b.build_gep(bool_ty, rare.flags, &[at.slot], "") }?;
                    if s == 0 {
                        let holds = self.chunk_holds(at.base, &hints)?;
                        self.b.build_store(flag, holds)?;
                    }
                    let holds = self.b.build_load(bool_ty, flag, "")?.into_int_value();
                    self.two_copies_told(holds, &hints, &mut |g, known| {
                        let copy = if known { &usual } else { &rare.staged };
                        g.emit_stage(copy, s, &at, body)
                    })?;
                }
                None => self.emit_stage(&usual, s, &at, body)?,
            }
            self.b.build_unconditional_branch(next)?;
            self.b.position_at_end(next);
        }
        self.prefetch_chunk_share(spans, cv, chunks)?;
        let c_next = self.b.build_int_add(cv, self.i64c(1), "")?;
        c.add_incoming(&[(&c_next, self.b.current_block()?)]);
        let total = self
            .b
            .build_int_add(full, self.i64c(stages as u64 - 1), "")?;
        let more = self
            .b
            .build_int_compare(IntPredicate::ULT, c_next, total, "")?;
        self.b.build_conditional_branch(more, header, done)?;
        self.b.position_at_end(done);
        Ok(Some(full))
    }

    /// Stage `s` of the chunk at lane `base`, whose rings' slot is `slot`: the outputs of
    /// earlier stages read from their rings, this stage's written to theirs (the last
    /// stage runs `body`).
    fn emit_stage(
        &mut self,
        staged: &Staged<'ctx>,
        s: usize,
        at: &Stage<'_, 'ctx>,
        body: &mut super::prefetch::LaneBody<'_, 'ctx, Self>,
    ) -> Result<()> {
        let (slot, base) = (at.slot, at.base);
        let mut saved = Vec::new();
        for v in staged.plan.outputs[..s].iter().flatten() {
            // Lane `i` of the chunk at `base` is element `i − base` of the slot.
            let at = self.slot_start(staged, *v, slot)?;
            let ty = self.elem_storage_ty(self.ty(*v).elem);
            let back = self.b.build_int_neg(base, "")?;
            // SAFETY (of the generated code): read back at lanes `base..base + CHUNK`.
            let shifted = unsafe { self.b.build_gep(ty, at, &[back], "") }?;
            saved.push((*v, self.lv.insert(*v, Lv::Buf(shifted))));
        }
        let result = self.counted_loop(CHUNK, LoopUnroll::SingleCopy, &mut |g, j| {
            let i = g.b.build_int_add(base, j, "")?;
            match at.split {
                Some(split) => {
                    g.in_prefix_at(split, i, |g| g.stage_lane(staged, s, at, (i, j), body))
                }
                None => g.stage_lane(staged, s, at, (i, j), body),
            }
        });
        for (v, lv) in saved.into_iter().rev() {
            match lv {
                Some(lv) => self.lv.insert(v, lv),
                None => self.lv.remove(&v),
            };
        }
        result
    }

    /// Lane `i = base + j` of stage `s` (see [`emit_stage`](Self::emit_stage)).
    fn stage_lane(
        &mut self,
        staged: &Staged<'ctx>,
        s: usize,
        at: &Stage<'_, 'ctx>,
        (i, j): (IntValue<'ctx>, IntValue<'ctx>),
        body: &mut super::prefetch::LaneBody<'_, 'ctx, Self>,
    ) -> Result<()> {
        let g = self;
        let slot = at.slot;
        if s + 1 == STAGES {
            // `body` memoizes its lanes itself (see `lane_loop`).
            body(g, &[i])?;
            return Ok(());
        }
        {
            g.lane_memo.clear();
            let outer = std::mem::replace(&mut g.lane_memo_on, true);
            for v in &staged.plan.outputs[s] {
                let x = g.lane(*v, &[i])?;
                let elem = g.ty(*v).elem;
                let stored = g.to_storage(x, elem)?;
                let at = g.slot_start(staged, *v, slot)?;
                let ty = g.elem_storage_ty(elem);
                // SAFETY (of the generated code): `j < CHUNK`, the slot's length.
                let p = unsafe { g.b.build_gep(ty, at, &[j], "") }?;
                g.b.build_store(p, stored)?;
            }
            g.lane_memo_on = outer;
            g.lane_memo.clear();
            Ok(())
        }
    }

    /// The first element of slot `slot` of `v`'s ring.
    fn slot_start(
        &self,
        staged: &Staged<'ctx>,
        v: Value,
        slot: IntValue<'ctx>,
    ) -> Result<PointerValue<'ctx>> {
        let ty = self.elem_storage_ty(self.ty(v).elem);
        let first = self.b.build_int_mul(slot, self.i64c(CHUNK as u64), "")?;
        // SAFETY (of the generated code): `slot < stages`, the ring's slot count.
        Ok(unsafe { self.b.build_gep(ty, staged.rings[&v], &[first], "") }?)
    }

    /// `plan` with a scratch ring for each of its outputs.
    fn with_rings(&mut self, plan: StagePlan) -> Result<Staged<'ctx>> {
        let mut rings = HashMap::new();
        for v in plan.outputs.iter().flatten() {
            let bytes = STAGES * CHUNK * self.elem_size(self.ty(*v).elem);
            rings.insert(*v, self.alloc_bytes(bytes)?);
        }
        Ok(Staged { plan, rings })
    }

    /// The values a lane loop over `shape` computes for `roots` in the copy being
    /// generated (known bools and the operands they fold away left out), with their
    /// depths and those it does not stage; `None` where the walk goes too deep.
    fn stage_dag(&self, roots: &[Value], shape: &[usize]) -> Option<Dag> {
        let mut dag = Dag::default();
        for &r in roots {
            self.walk(r, shape, &mut dag, 0)?;
        }
        Some(dag)
    }

    /// [`stage_dag`](Self::stage_dag)'s walk from `v`: its depth.
    fn walk(&self, v: Value, shape: &[usize], dag: &mut Dag, level: usize) -> Option<u32> {
        if let Some(&d) = dag.depth.get(&v) {
            return Some(d);
        }
        if level > MAX_WALK {
            return None;
        }
        let depth = self.walk_op(v, shape, dag, level)?;
        dag.depth.insert(v, depth);
        Some(depth)
    }

    /// Marks `v` and every lazy value it reads opaque (see [`Dag::opaque`]); its depth, 0.
    fn opaque(&self, v: Value, dag: &mut Dag) -> u32 {
        let mut stack = vec![v];
        while let Some(x) = stack.pop() {
            if !dag.opaque.insert(x) {
                continue;
            }
            if let (Some(Lv::Lazy), Some(inst)) = (self.lv.get(&x), self.defs.get(&x)) {
                stack.extend(inst.op.operands());
            }
        }
        0
    }

    /// The depth of `v`, its operands walked.
    fn walk_op(&self, v: Value, shape: &[usize], dag: &mut Dag, level: usize) -> Option<u32> {
        for (set, value) in [(&self.true_masks, true), (&self.false_lanes, false)] {
            if set.contains(&v) {
                dag.constant.insert(v, value);
                return Some(0);
            }
        }
        let (Some(Lv::Lazy), Some(inst)) = (self.lv.get(&v), self.defs.get(&v)) else {
            return Some(0);
        };
        // Lanes that need none of the loop's own: computed again wherever read.
        let outside =
            |o: &Value| !matches!(self.lv.get(o), Some(Lv::Lazy)) || self.ty(*o).is_scalar();
        let leaf = match &inst.op {
            Op::Const(_) | Op::Arange { .. } => true,
            Op::Splat(x) | Op::Broadcast(x) | Op::ExpandDims { x, .. } | Op::Reshape(x) => {
                outside(x)
            }
            _ => false,
        };
        if leaf {
            return Some(0);
        }
        if self.ty(v).shape != shape {
            return Some(self.opaque(v, dag));
        }
        let walk = |o: Value, dag: &mut Dag| self.walk(o, shape, dag, level + 1);
        let bool_of = |o: &Value, dag: &Dag| dag.constant.get(o).copied();
        // Bool ops fold where LLVM folds them: a known operand of a `not`, an `and` or an
        // `or`, a `select` on a known condition.
        let read: Vec<Value> = match &inst.op {
            Op::Unary(UnOp::Not, x) | Op::Hint { x, .. } => {
                walk(*x, dag)?;
                if let Some(b) = bool_of(x, dag) {
                    let not = matches!(inst.op, Op::Unary(..));
                    dag.constant.insert(v, b != not);
                    return Some(0);
                }
                vec![*x]
            }
            Op::Binary(op @ (BinOp::And | BinOp::Or), a, b)
                if self.ty(v).dtype() == Some(DType::Bool) =>
            {
                walk(*a, dag)?;
                walk(*b, dag)?;
                let absorbing = matches!(op, BinOp::Or);
                let (x, y) = (bool_of(a, dag), bool_of(b, dag));
                let folded = match (x, y) {
                    (Some(x), _) if x == absorbing => Some(absorbing),
                    (_, Some(y)) if y == absorbing => Some(absorbing),
                    (Some(_), Some(_)) => Some(!absorbing),
                    _ => None,
                };
                if let Some(value) = folded {
                    dag.constant.insert(v, value);
                    return Some(0);
                }
                vec![*a, *b]
            }
            Op::Select(c, a, b) => {
                walk(*c, dag)?;
                match bool_of(c, dag) {
                    Some(true) => vec![*a],
                    Some(false) => vec![*b],
                    None => vec![*c, *a, *b],
                }
            }
            Op::Load { ptr, mask, .. } => {
                if mask.is_some_and(|m| !self.true_masks.contains(&m)) {
                    return Some(self.opaque(v, dag));
                }
                vec![*ptr]
            }
            Op::Binary(BinOp::Rem, a, _) if self.ty(*a).dtype().is_some_and(|d| d.is_float()) => {
                return Some(self.opaque(v, dag));
            }
            op if op.is_pointwise() => op.operands(),
            _ => return Some(self.opaque(v, dag)),
        };
        let mut depth = 0;
        for o in read {
            depth = depth.max(walk(o, dag)?);
            if !dag.constant.contains_key(&o) {
                dag.edges.push((v, o));
            }
        }
        let operand = inst.op.operands().first().and_then(|o| self.ty(*o).dtype());
        let own = latency(&inst.op, operand, self.ty(v).dtype());
        dag.latency.insert(v, own);
        Some(depth + own)
    }
}

/// Splits `dag` into `stages` by when each value is needed (see [`needed`]): stage `s`
/// holds the values needed after the `s`-th cut and by the next (see [`cuts`]). A stage's
/// outputs are its values that a later stage reads (or that are roots, which the last
/// stage reads) and that `storable` allows, but for those cheap enough to compute again.
fn plan_stages(dag: &Dag, roots: &[Value], storable: impl Fn(Value) -> bool) -> StagePlan {
    let stages = STAGES;
    let kept = |v: &Value| dag.depth.get(v).is_some_and(|d| *d > RECOMPUTE_DEPTH) && storable(*v);
    let needed = needed(dag, roots);
    let cuts = cuts(dag, roots, &needed, &kept);
    let stage = |v: &Value| {
        let t = needed.get(v).copied().unwrap_or(0);
        cuts.iter().filter(|c| **c < t).count()
    };
    let mut outputs = vec![Vec::new(); stages - 1];
    let mut chosen = HashSet::new();
    let reads = dag
        .edges
        .iter()
        .map(|(u, o)| (stage(u), *o))
        .chain(roots.iter().map(|r| (stages - 1, *r)));
    for (reader, v) in reads {
        let s = stage(&v);
        if s < reader && kept(&v) && chosen.insert(v) {
            outputs[s].push(v);
        }
    }
    StagePlan { outputs }
}

/// When each value is needed, at the latest, for the deepest root to end at its depth:
/// that depth less the longest chain from the value to a root. On the critical chain that
/// is its depth; a side branch (`tgamma`'s reflection divisor, `pow`'s odd-exponent test)
/// is computed just before the op that reads it, in that op's stage, instead of at its
/// inputs' and kept in rings across the stages between.
fn needed(dag: &Dag, roots: &[Value]) -> HashMap<Value, u32> {
    let deepest = deepest(dag, roots);
    // The chain from each value's result to a root's; readers come later in `edges`.
    let mut tail: HashMap<Value, u32> = roots.iter().map(|r| (*r, 0)).collect();
    for (u, o) in dag.edges.iter().rev() {
        let after = tail.get(u).copied().unwrap_or(0) + dag.latency.get(u).copied().unwrap_or(0);
        let t = tail.entry(*o).or_insert(0);
        *t = (*t).max(after);
    }
    dag.depth
        .keys()
        .map(|v| {
            (
                *v,
                deepest.saturating_sub(tail.get(v).copied().unwrap_or(0)),
            )
        })
        .collect()
}

/// The deepest root's depth (at least 1).
fn deepest(dag: &Dag, roots: &[Value]) -> u32 {
    roots
        .iter()
        .filter_map(|r| dag.depth.get(r))
        .max()
        .copied()
        .unwrap_or(1)
        .max(1)
}

/// The times (as [`needed`] gives them) at which the [`STAGES`] stages part: near the even
/// split of the deepest root's chain, where the fewest `kept` values cross (each crossing
/// value costs a store and a load per vector: cutting through a polynomial's evaluation
/// keeps its powers and partial sums, beside it only its argument).
fn cuts(
    dag: &Dag,
    roots: &[Value],
    needed: &HashMap<Value, u32>,
    kept: &dyn Fn(&Value) -> bool,
) -> Vec<u32> {
    let deepest = deepest(dag, roots);
    let at = |v: &Value| needed.get(v).copied().unwrap_or(0);
    // Each kept value's life: from when it is needed to when its last reader is.
    let mut last_read: HashMap<Value, u32> = HashMap::new();
    for (u, o) in &dag.edges {
        let e = last_read.entry(*o).or_insert(0);
        *e = (*e).max(at(u));
    }
    for r in roots {
        last_read.insert(*r, u32::MAX);
    }
    let lives: Vec<(u32, u32)> = last_read
        .iter()
        .filter(|(v, _)| kept(v))
        .map(|(v, end)| (at(v), *end))
        .collect();
    let crossing = |t: u32| lives.iter().filter(|(d, end)| *d <= t && t < *end).count();
    let stages = STAGES as u32;
    let step = deepest / stages;
    (1..stages)
        .map(|k| {
            let even = k * deepest / stages;
            let window = (even - step / 4)..=(even + step / 4);
            // Fewest crossing, then nearest the even split.
            window
                .min_by_key(|t| (crossing(*t), t.abs_diff(even)))
                .unwrap_or(even)
        })
        .collect()
}
