//! Loops versioned on `likely` hints (`HintKind::Likely`): a bool tile whose lanes are
//! usually all one value, as the f32 algorithms' case masks are (`lgamma`'s `x < 0`,
//! `pow`'s subnormal base). The lanes of such a function are branch-free, so a loop over
//! them pays for every case at every lane; behind a test that each hint read by the loop's
//! lanes has its likely value at every lane, a copy takes the hints as constants, and LLVM
//! folds away the selects they drive and the cases those selects leave unread (a
//! `lgamma` of positive arguments computes one logarithm instead of two). Both copies
//! compute every lane with the same operations, the constants only folded, so their
//! results are the same bits: which copy runs never shows.
//!
//! Where the region is one lane loop over a rank-1 tile of whole chunks (a store, a
//! materialized elementwise op), the test is per chunk of the loop ([`prefetch::CHUNK`]
//! lanes) instead of per tile: a chunk whose lanes all hold runs the copy with the hints
//! known, another the copy that reads them, so that rare lanes scattered over every tile
//! (`erfinv`'s tail, 1% of uniform arguments) cost only the chunks they fall in.

use super::{plan, prefetch, Gen, LoopUnroll, Lv};
use crate::llvm::Result;
use inkwell::basic_block::BasicBlock;
use inkwell::values::{IntValue, PointerValue};
use std::collections::HashSet;
use tritium_dsl::ir::{BinOp, Function, HintKind, Op, UnOp, Value};

impl<'ctx> Gen<'ctx, '_> {
    /// Emits `emit` behind a test that every `likely` hint its lanes read (from `roots`,
    /// through lazily computed values) has its likely value at every lane: that copy takes
    /// the hints as known, the other reads them. Without such hints, `emit` once. Where
    /// `emit` is one lane loop per copy over `lanes`, a rank-1 tile of whole chunks, the
    /// hints each lane reads at its own index are left to its chunks, which test them for
    /// themselves (see [`versioned_chunk`](Self::versioned_chunk)).
    pub(super) fn versioned_likely(
        &mut self,
        roots: &[Value],
        lanes: Option<&[usize]>,
        emit: &mut dyn FnMut(&mut Self) -> Result<()>,
    ) -> Result<()> {
        if !self.has_likely {
            return emit(self);
        }
        let (per_chunk, per_tile) = self.likely_hints(roots, lanes);
        // Set even when empty: a lane loop of this region never tests an outer one's.
        let mut chunked = |g: &mut Self| {
            let outer = std::mem::replace(&mut g.chunk_likely, per_chunk.clone());
            let result = emit(g);
            g.chunk_likely = outer;
            result
        };
        if per_tile.is_empty() {
            return chunked(self);
        }
        let all = self.all_hold(&per_tile)?;
        self.two_copies(all, &per_tile, &mut chunked)
    }

    /// A chunk of a lane loop (its lanes from `base`, [`prefetch::CHUNK`] of them) in two
    /// copies behind a test of the hints the loop's region reads (`chunk_likely`), or
    /// once where there are none.
    pub(super) fn versioned_chunk(
        &mut self,
        base: IntValue<'ctx>,
        emit: &mut dyn FnMut(&mut Self) -> Result<()>,
    ) -> Result<()> {
        let hints = self.chunk_likely.clone();
        if hints.is_empty() {
            return emit(self);
        }
        let all = self.chunk_holds(base, &hints)?;
        // Inside, no lane loop is left to test them again.
        let outer = std::mem::take(&mut self.chunk_likely);
        let result = self.two_copies(all, &hints, emit);
        self.chunk_likely = outer;
        result
    }

    /// An i1 that holds where each of `hints` has its likely value at every lane of the
    /// chunk at lane `base`.
    pub(super) fn chunk_holds(
        &mut self,
        base: IntValue<'ctx>,
        hints: &[(Value, bool)],
    ) -> Result<IntValue<'ctx>> {
        let test = self.ctx.append_basic_block(self.func, "likely.chunk");
        self.b.build_unconditional_branch(test)?;
        self.b.position_at_end(test);
        let acc = self.entry_alloca(self.ctx.bool_type().into())?;
        self.b
            .build_store(acc, self.ctx.bool_type().const_all_ones())?;
        self.counted_loop(prefetch::CHUNK, LoopUnroll::Free, &mut |g, j| {
            let i = g.b.build_int_add(base, j, "")?;
            g.and_holds(hints, acc, &[i])
        })?;
        Ok(self
            .b
            .build_load(self.ctx.bool_type(), acc, "")?
            .into_int_value())
    }

    /// `emit` twice: where `all` holds with `hints` known, else reading them.
    fn two_copies(
        &mut self,
        all: IntValue<'ctx>,
        hints: &[(Value, bool)],
        emit: &mut dyn FnMut(&mut Self) -> Result<()>,
    ) -> Result<()> {
        self.two_copies_told(all, hints, &mut |g, _| emit(g))
    }

    /// [`two_copies`](Self::two_copies), `emit` told which copy it emits (true: the one
    /// with the hints known).
    pub(super) fn two_copies_told(
        &mut self,
        all: IntValue<'ctx>,
        hints: &[(Value, bool)],
        emit: &mut dyn FnMut(&mut Self, bool) -> Result<()>,
    ) -> Result<()> {
        let fast = self.ctx.append_basic_block(self.func, "likely.hold");
        let slow = self.ctx.append_basic_block(self.func, "likely.mixed");
        let done = self.ctx.append_basic_block(self.func, "likely.done");
        self.b.build_conditional_branch(all, fast, slow)?;
        self.b.position_at_end(fast);
        let before = (self.true_masks.clone(), self.false_lanes.clone());
        for &(h, value) in hints {
            self.know(h, value);
        }
        let fast_result = emit(self, true);
        (self.true_masks, self.false_lanes) = before;
        fast_result?;
        self.b.build_unconditional_branch(done)?;
        self.b.position_at_end(slow);
        emit(self, false)?;
        self.b.build_unconditional_branch(done)?;
        self.b.position_at_end(done);
        Ok(())
    }

    /// ANDs into the bool at `acc` whether each hint `(h, value)` is `value` at lane `idx`.
    fn and_holds(
        &mut self,
        hints: &[(Value, bool)],
        acc: PointerValue<'ctx>,
        idx: &[IntValue<'ctx>],
    ) -> Result<()> {
        let mut holds = self
            .b
            .build_load(self.ctx.bool_type(), acc, "")?
            .into_int_value();
        for &(h, value) in hints {
            let x = self.lane(h, idx)?.into_int_value();
            let x = if value { x } else { self.b.build_not(x, "")? };
            holds = self.b.build_and(holds, x, "")?;
        }
        self.b.build_store(acc, holds)?;
        Ok(())
    }

    /// Takes the bool tile `v` as `value` at every lane, with every value computing the
    /// same lanes, and what follows: the operand of a hint or a `not`, both operands of a
    /// true `and` and of a false `or`. So a hint on `a & !b` makes `a` known true and `b`
    /// known false, and code may select on `b` itself.
    pub(super) fn know(&mut self, v: Value, value: bool) {
        for (c, value) in self.consequences(v, value) {
            match value {
                true => self.true_masks.insert(c),
                false => self.false_lanes.insert(c),
            };
        }
    }

    /// What knowing the bool tile `v` as `value` at every lane makes known (see
    /// [`know`](Self::know)), each with its value.
    fn consequences(&self, v: Value, value: bool) -> Hints {
        let mut known = Vec::new();
        let mut stack = vec![(v, value)];
        while let Some((v, value)) = stack.pop() {
            known.extend(plan::equivalents(self.f, v).into_iter().map(|e| (e, value)));
            let Some(inst) = self.defs.get(&v) else {
                continue;
            };
            match inst.op {
                Op::Hint { x, .. } => stack.push((x, value)),
                Op::Unary(UnOp::Not, x) => stack.push((x, !value)),
                Op::Binary(BinOp::And, a, b) if value => stack.extend([(a, true), (b, true)]),
                Op::Binary(BinOp::Or, a, b) if !value => stack.extend([(a, false), (b, false)]),
                _ => {}
            }
        }
        known
    }

    /// The `likely` hints (with their values) that the lanes of `roots` read through lazily
    /// computed values, but for those already known: those that a lane loop over `lanes`
    /// (when given and chunkable) reads only at the lane it computes, they and what follows
    /// from them, and the others. A lane reads its own index through pointwise ops and
    /// loads on operands of its shape; a flip, a gather, a broadcast or a reshape reads
    /// other lanes, which a chunk's test does not cover.
    fn likely_hints(&self, roots: &[Value], lanes: Option<&[usize]>) -> (Hints, Hints) {
        let lanes = lanes.filter(|s| prefetch::chunkable(s));
        let own = |v: Value| lanes.is_some_and(|s| self.ty(v).shape == s);
        // Each value is walked at most twice: at its own lanes, and at others'.
        let (mut at_own, mut elsewhere) = (HashSet::new(), HashSet::new());
        let mut stack: Vec<(Value, bool)> = roots.iter().map(|&r| (r, own(r))).collect();
        let mut hints: Hints = Vec::new();
        while let Some((v, own_lane)) = stack.pop() {
            let fresh = match own_lane {
                true => at_own.insert(v),
                false => elsewhere.insert(v),
            };
            if !fresh
                || !matches!(self.lv.get(&v), Some(Lv::Lazy))
                || self.true_masks.contains(&v)
                || self.false_lanes.contains(&v)
            {
                continue;
            }
            let Some(inst) = self.defs.get(&v) else {
                continue;
            };
            if let Op::Hint {
                kind: HintKind::Likely,
                values,
                ..
            } = &inst.op
            {
                if !hints.iter().any(|h| h.0 == v) {
                    hints.push((v, values[0] != 0));
                }
            }
            let lane_wise = own_lane && reads_own_lanes(&inst.op);
            for o in inst.op.operands() {
                stack.push((o, lane_wise && own(o)));
            }
        }
        // A chunk's copy knows a hint, and what follows from it, at every lane: only where
        // no lane reads any of it at another's index.
        hints.into_iter().partition(|&(h, value)| {
            self.consequences(h, value)
                .iter()
                .all(|(c, _)| !elsewhere.contains(c))
        })
    }

    /// An i1 that is true when every lane of each hint `(h, value)` is `value`: one loop
    /// over the lanes of the hints of each shape (most often all of them), which computes
    /// what they are made of once, left at the first chunk with a lane where one does not
    /// hold (a tile with rare lanes pays for a chunk or two of the test, not all of it).
    fn all_hold(&mut self, hints: &[(Value, bool)]) -> Result<IntValue<'ctx>> {
        let mut groups: Vec<(Vec<usize>, Hints)> = Vec::new();
        for &(h, value) in hints {
            let shape = &self.ty(h).shape;
            match groups.iter_mut().find(|g| &g.0 == shape) {
                Some(g) => g.1.push((h, value)),
                None => groups.push((shape.clone(), vec![(h, value)])),
            }
        }
        let bool_ty = self.ctx.bool_type();
        let result = self.entry_alloca(bool_ty.into())?;
        self.b.build_store(result, bool_ty.const_zero())?;
        let fail = self.ctx.append_basic_block(self.func, "likely.fail");
        let tested = self.ctx.append_basic_block(self.func, "likely.tested");
        for (shape, hints) in groups {
            self.hold_or_leave(&shape, &hints, fail)?;
        }
        self.b.build_store(result, bool_ty.const_all_ones())?;
        self.b.build_unconditional_branch(tested)?;
        self.b.position_at_end(fail);
        self.b.build_unconditional_branch(tested)?;
        self.b.position_at_end(tested);
        Ok(self.b.build_load(bool_ty, result, "")?.into_int_value())
    }

    /// The test of `hints` (all of `shape`) by chunks: [`CHUNK`] lanes of a rank-1 tile,
    /// a row of a larger rank, each chunk a loop LLVM vectorizes; branches to `fail` after
    /// a chunk where a lane does not hold.
    fn hold_or_leave(
        &mut self,
        shape: &[usize],
        hints: &[(Value, bool)],
        fail: BasicBlock<'ctx>,
    ) -> Result<()> {
        let acc = self.entry_alloca(self.ctx.bool_type().into())?;
        let (chunks, chunk) = match shape {
            [n] if n % CHUNK == 0 => (n / CHUNK, CHUNK),
            [n] => (1, *n),
            [] => (1, 1),
            [rows, ..] => (*rows, 0),
        };
        let body = &mut |g: &mut Self, idx: &[IntValue<'ctx>]| g.and_holds(hints, acc, idx);
        self.counted_loop(chunks, LoopUnroll::Never, &mut |g, c| {
            g.b.build_store(acc, g.ctx.bool_type().const_all_ones())?;
            match shape.len() {
                0 => body(g, &[])?,
                1 => {
                    let first = g.b.build_int_mul(c, g.i64c(chunk as u64), "")?;
                    g.counted_loop(chunk, LoopUnroll::Free, &mut |g, j| {
                        let i = g.b.build_int_add(first, j, "")?;
                        body(g, &[i])
                    })?
                }
                _ => g.loop_level_with(shape, &mut vec![c], LoopUnroll::Free, body)?,
            }
            let holds = g.b.build_load(g.ctx.bool_type(), acc, "")?.into_int_value();
            let next = g.ctx.append_basic_block(g.func, "likely.next");
            g.b.build_conditional_branch(holds, next, fail)?;
            g.b.position_at_end(next);
            Ok(())
        })
    }
}

/// Whether a lane of `op` reads its operands of its own shape at its own index only
/// (pointwise ops and loads; not a flip, a gather, a permute…): where a chunk's test of a
/// hint covers what the chunk reads.
pub(super) fn reads_own_lanes(op: &Op) -> bool {
    op.is_pointwise() || matches!(op, Op::Load { .. })
}

/// Whether `f` has a `likely` hint.
pub(super) fn any_in(f: &Function) -> bool {
    let mut any = false;
    f.walk(&mut |inst| {
        any |= matches!(
            inst.op,
            Op::Hint {
                kind: HintKind::Likely,
                ..
            }
        )
    });
    any
}

/// `likely` hints and their values.
type Hints = Vec<(Value, bool)>;

/// Lanes per chunk of a rank-1 tile's test (eight 512-bit vectors of f32).
const CHUNK: usize = 128;
