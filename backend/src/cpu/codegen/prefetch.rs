//! Prefetches of the next program's tiles. In streaming and row-wise kernels program
//! `p + 1` works on the memory right after program `p`'s tiles, so that memory is requested
//! while this program computes (hardware prefetchers stop at page boundaries and wait for
//! demand misses). A prefetch never faults and never writes, so a wrong guess costs only
//! bandwidth; spans above 16 KiB are not prefetched, nor anything in checked mode.
//!
//! Where the hints go matters as much as what they ask for: a burst of them at one point
//! fills the core's miss buffers and stalls it, while the same hints spread over a long
//! loop overlap the transfers with the computation. So the prefetches are planned once per
//! kernel ([`plan_spread`]): the rank-1 pointer tiles of the top-level stores and of the
//! top-level loads read more than once or by a compute-bound loop (or, failing those, of
//! the loads and stores in each top-level `for` body, each tile in the first body that
//! touches its parameter) are prefetched a few cache lines at a time from inside the most
//! expensive lane loop of that block, strip-mined into chunks of [`CHUNK`] lanes; in a
//! `for` body that loop may be the in-place write of a carried tile (`acc += load(…)`, see
//! `control`). Only tiles whose address depends on the program id are planned (the next
//! program's copy of any other is the same tile). Other tiles get a burst where they are
//! accessed.

use super::reduce::FusedSum;
use super::{Gen, LoopUnroll, Lv};
use crate::llvm::{Positioned, Result};
use inkwell::values::{BasicValueEnum, IntValue, PointerValue};
use inkwell::IntPredicate;
use std::collections::{HashMap, HashSet};
use tritium_dsl::ir::{BinOp, Block, Function, Inst, Op, UnOp, Value};

/// A lane loop's body: computes the lane at an index and returns the value the fused sums
/// accumulate, if any.
pub(super) type LaneBody<'a, 'ctx, G> =
    dyn FnMut(&mut G, &[IntValue<'ctx>]) -> Result<Option<BasicValueEnum<'ctx>>> + 'a;

/// Lanes per chunk of a strip-mined loop (two cache lines of f32); a `likely` hint is
/// tested chunk by chunk (the fuzzer draws hints that hold by such chunks).
pub const CHUNK: usize = 32;

/// Whether a lane loop over `shape` can run in chunks: a rank-1 tile of whole chunks.
pub(super) fn chunkable(shape: &[usize]) -> bool {
    shape.len() == 1 && shape[0].is_multiple_of(CHUNK)
}

/// Largest span (bytes) of a tile whose next-program copy is prefetched.
const MAX_SPAN: u64 = 16 << 10;

/// Smallest span (bytes) worth prefetching.
const MIN_SPAN: usize = 256;

/// The [`lane_cost`] from which a lane loop is compute-bound: about one transcendental
/// function per lane (`exp` over f32 streams at memory speed on two cores; `log10`, a
/// logarithm and a product, already computes longer than its memory takes).
const COMPUTE_BOUND: u32 = 16;

/// Where a kernel's next-program prefetches are spread (see the module docs).
pub(super) struct SpreadPlan {
    /// The top-level store or materialized elementwise op whose lane loop carries them.
    pub at: *const Inst,
    /// The pointer tiles prefetched there, each with "for writing".
    pub targets: Vec<(Value, bool)>,
}

/// Plans the spread prefetches of `f`, whose lazily computed tiles are `lazy` (none when no
/// tile qualifies or no loop can carry them). The kernel's top-level block is tried first;
/// failing that, each body of its top-level `for` loops gets its own plan, for the targets
/// no earlier body has (as in layer norm, which walks its row in blocks several times: the
/// next row's input is requested from the first walk on, its output from the last).
pub(super) fn plan_spread(f: &Function, lazy: &HashSet<Value>) -> Vec<SpreadPlan> {
    let mut defs: HashMap<Value, &Inst> = HashMap::new();
    let mut uses: HashMap<Value, usize> = HashMap::new();
    index(&f.body, &mut defs, &mut uses);
    let params: HashSet<Value> = f.params.iter().map(|p| p.value).collect();
    let ctx = Ctx {
        f,
        lazy,
        defs: &defs,
        uses: &uses,
    };
    if let Some(p) = plan_block(&ctx, &f.body, &params, true) {
        return vec![p];
    }
    // Each body gets the targets no earlier body has (by the parameters they point into):
    // the next program's memory is requested once, from the first walk over it on.
    let roots = f.pointer_roots();
    let root_of = |t: &(Value, bool)| (roots.get(&t.0).cloned().unwrap_or_default(), t.1);
    let mut seen = HashSet::new();
    let mut plans = Vec::new();
    for inst in &f.body.insts {
        if let Op::For { body, .. } = &inst.op {
            let mut known = params.clone();
            known.extend(body.args.iter().copied());
            if let Some(mut p) = plan_block(&ctx, body, &known, false) {
                p.targets.retain(|t| seen.insert(root_of(t)));
                if !p.targets.is_empty() {
                    plans.push(p);
                }
            }
        }
    }
    plans
}

struct Ctx<'a> {
    f: &'a Function,
    lazy: &'a HashSet<Value>,
    defs: &'a HashMap<Value, &'a Inst>,
    uses: &'a HashMap<Value, usize>,
}

/// The spread plan of one block: targets among its loads and stores whose pointers are
/// pure functions of `known` values that depend on the program id, carried by its most
/// expensive lane loop. At the top level, a load whose tile is read once counts only when
/// that loop is compute-bound ([`COMPUTE_BOUND`]): a streaming pass in a memory-bound loop
/// is left to the hardware prefetcher (software hints there only compete with it), while a
/// long computation per lane lets a page's first lines miss each time the hardware
/// prefetcher stops at a page boundary, and its dependent chains leave the out-of-order
/// window too short to hide that latency (`tgamma`, `lgamma` over 2^24 f32: 9% faster).
fn plan_block(
    cx: &Ctx<'_>,
    block: &Block,
    known: &HashSet<Value>,
    top: bool,
) -> Option<SpreadPlan> {
    let (f, lazy, defs) = (cx.f, cx.lazy, cx.defs);
    let mut targets = Vec::new();
    // Top-level loads read once: targets only if the carrying loop is compute-bound.
    let mut streamed = Vec::new();
    let mut best: Option<(u32, *const Inst)> = None;
    for inst in &block.insts {
        let mut once = false;
        let (target, lanes) = match &inst.op {
            Op::Store { ptr, value, .. } => (Some((*ptr, true)), Some((*value, 1))),
            Op::Load { ptr, .. } => {
                let reread = cx.uses.get(&inst.results[0]).copied().unwrap_or(0) > 1;
                once = top && !reread;
                let own = (!lazy.contains(&inst.results[0])).then_some((inst.results[0], 0));
                (Some((*ptr, false)), own)
            }
            op if op.is_elementwise() && !lazy.contains(&inst.results[0]) => {
                (None, Some((inst.results[0], 0)))
            }
            // A carried tile computed lazily is written by the loop's assignment, in place.
            Op::Yield(vals) if !top => {
                let v = vals.iter().copied().find(|v| {
                    lazy.contains(v) && {
                        let t = f.ty(*v);
                        t.rank() == 1 && t.numel() >= 2 * CHUNK && t.numel().is_multiple_of(CHUNK)
                    }
                });
                (None, v.map(|v| (v, 0)))
            }
            _ => (None, None),
        };
        if let Some((ptr, write)) = target {
            let t = f.ty(ptr);
            let bytes = t.numel() * t.elem.pointee().map_or(0, |d| d.size_bytes());
            if t.rank() == 1
                && bytes >= MIN_SPAN
                && pure_from(ptr, defs, known)
                && depends_on_pid(ptr, defs)
            {
                let list = if once { &mut streamed } else { &mut targets };
                if !list.contains(&(ptr, write)) {
                    list.push((ptr, write));
                }
            }
        }
        if let Some((v, extra)) = lanes {
            let t = f.ty(v);
            if t.rank() == 1 && t.numel() >= 2 * CHUNK && t.numel().is_multiple_of(CHUNK) {
                let root = match &inst.op {
                    Op::Store { .. } | Op::Yield(_) => lane_cost(v, lazy, defs),
                    op => op_cost(f, op) + operand_costs(&inst.op, lazy, defs),
                };
                let cost = root + extra;
                if best.is_none_or(|(c, _)| cost > c) {
                    best = Some((cost, inst as *const Inst));
                }
            }
        }
    }
    let (cost, at) = best?;
    if cost >= COMPUTE_BOUND {
        for t in streamed {
            if !targets.contains(&t) {
                targets.push(t);
            }
        }
    }
    (!targets.is_empty()).then_some(SpreadPlan { at, targets })
}

fn index<'f>(b: &'f Block, defs: &mut HashMap<Value, &'f Inst>, uses: &mut HashMap<Value, usize>) {
    for i in &b.insts {
        for r in &i.results {
            defs.insert(*r, i);
        }
        for o in i.op.operands() {
            *uses.entry(o).or_default() += 1;
        }
        for r in i.op.regions() {
            index(r, defs, uses);
        }
    }
}

/// True when `v` is computed by pure elementwise ops from `known` values (parameters, the
/// loop's own induction variable), program ids and constants only: it can be computed
/// anywhere in its block.
fn pure_from(v: Value, defs: &HashMap<Value, &Inst>, known: &HashSet<Value>) -> bool {
    if known.contains(&v) {
        return true;
    }
    let Some(inst) = defs.get(&v) else {
        return false;
    };
    is_pure(&inst.op)
        && inst
            .op
            .operands()
            .into_iter()
            .all(|o| pure_from(o, defs, known))
}

/// True when `v` depends on a program id: the next program's copy of a tile that does not
/// is the same tile.
fn depends_on_pid(v: Value, defs: &HashMap<Value, &Inst>) -> bool {
    let Some(inst) = defs.get(&v) else {
        return false;
    };
    matches!(inst.op, Op::ProgramId(_))
        || inst
            .op
            .operands()
            .into_iter()
            .any(|o| depends_on_pid(o, defs))
}

pub(super) fn is_pure(op: &Op) -> bool {
    matches!(op, Op::ProgramId(_) | Op::NumPrograms(_))
        || (op.is_elementwise() && !matches!(op, Op::Load { .. }))
}

/// A rough cost of one lane of `op` (transcendental functions dominate).
fn op_cost(f: &Function, op: &Op) -> u32 {
    let float = |v: &Value| f.ty(*v).dtype().is_some_and(|d| d.is_float());
    match op {
        Op::Unary(UnOp::Sqrt | UnOp::Rsqrt, _) | Op::Binary(BinOp::Div | BinOp::Rem, ..) => 4,
        Op::Unary(
            UnOp::Abs
            | UnOp::Neg
            | UnOp::Not
            | UnOp::Floor
            | UnOp::Ceil
            | UnOp::Trunc
            | UnOp::Round
            | UnOp::Rint,
            x,
        ) => float(x) as u32,
        Op::Unary(_, _) => 16,
        Op::Binary(_, x, _) | Op::Fma(x, ..) => float(x) as u32,
        Op::Load { .. } => 1,
        _ => 0,
    }
}

/// The cost of computing one lane of `v` where it is used: every lazy op it is computed
/// from, once (a lane several of them share is computed once, see `Gen::lane`).
fn lane_cost(v: Value, lazy: &HashSet<Value>, defs: &HashMap<Value, &Inst>) -> u32 {
    dag_cost(vec![v], lazy, defs)
}

fn operand_costs(op: &Op, lazy: &HashSet<Value>, defs: &HashMap<Value, &Inst>) -> u32 {
    dag_cost(op.operands(), lazy, defs)
}

/// The summed cost of the distinct lazy ops `roots` are computed from.
fn dag_cost(mut stack: Vec<Value>, lazy: &HashSet<Value>, defs: &HashMap<Value, &Inst>) -> u32 {
    let mut seen = HashSet::new();
    let mut cost = 0u32;
    while let Some(v) = stack.pop() {
        if !lazy.contains(&v) || !seen.insert(v) {
            continue;
        }
        let Some(inst) = defs.get(&v) else { continue };
        // Index arithmetic costs nothing that matters here.
        cost = cost.saturating_add(match &inst.op {
            Op::Unary(UnOp::Sqrt | UnOp::Rsqrt, _) | Op::Binary(BinOp::Div | BinOp::Rem, ..) => 4,
            Op::Unary(
                UnOp::Exp | UnOp::Exp2 | UnOp::Log | UnOp::Log2 | UnOp::Sin | UnOp::Cos,
                _,
            ) => 16,
            Op::Load { .. } | Op::Binary(..) | Op::Fma(..) | Op::Unary(..) => 1,
            _ => 0,
        });
        stack.extend(inst.op.operands());
    }
    cost
}

/// The next-program span of one target: where it starts, its length (0: none) and whether
/// it is prefetched for writing.
pub(super) struct Span<'ctx> {
    end: IntValue<'ctx>,
    len: IntValue<'ctx>,
    write: bool,
    lines: usize,
}

impl<'ctx> Gen<'ctx, '_> {
    /// The spread targets carried by the loop of top-level `inst` (empty for any other).
    pub(super) fn spread_here(&self, inst: &Inst) -> Vec<(Value, bool)> {
        match self.spread.iter().find(|s| std::ptr::eq(s.at, inst)) {
            Some(s) if !self.opts.bounds_check => s.targets.clone(),
            _ => Vec::new(),
        }
    }

    /// True when `ptr` is prefetched by the spread loop instead of at its access.
    fn spread_covers(&self, ptr: Value) -> bool {
        self.spread
            .iter()
            .any(|s| s.targets.iter().any(|(p, _)| *p == ptr))
    }

    /// Emits a loop over `shape` whose `body` computes one lane and returns the value the
    /// fused `sums` accumulate, if any. With `spread` targets or `likely` hints to test per
    /// chunk (a rank-1 shape, a multiple of [`CHUNK`] lanes), the loop runs in chunks of
    /// [`CHUNK`] lanes with the sums kept in [`CHUNK`] partial accumulators, and each chunk
    /// prefetches its share of the targets' next-program spans.
    pub(super) fn lane_loop(
        &mut self,
        shape: &[usize],
        (roots, sums): (&[Value], &[FusedSum<'ctx>]),
        spread: &[(Value, bool)],
        body: &mut LaneBody<'_, 'ctx, Self>,
    ) -> Result<()> {
        // Each emitted copy of the body memoizes the lanes of lazy pure ops (see
        // `Gen::lane`): one copy computes one lane index, with one binding of every value.
        let mut memoized = |g: &mut Self, idx: &[IntValue<'ctx>]| {
            g.lane_memo.clear();
            let outer = std::mem::replace(&mut g.lane_memo_on, true);
            let r = body(g, idx);
            g.lane_memo_on = outer;
            g.lane_memo.clear();
            r
        };
        let body: &mut LaneBody<'_, 'ctx, Self> = &mut memoized;
        // The spans once, for the staged chunks and the rest (a loop nest carries none).
        let spans = match chunkable(shape) {
            true => self.spread_spans(spread)?,
            false => Vec::new(),
        };
        let staged = match sums.is_empty() && chunkable(shape) {
            true => self.staged_lane_loop(shape, roots, &spans, body)?,
            false => None,
        };
        let chunks = shape.first().map_or(1, |n| n / CHUNK);
        if staged.is_some_and(|s| s.get_zero_extended_constant() == Some(chunks as u64)) {
            return Ok(());
        }
        if staged.is_none()
            && ((spread.is_empty() && self.chunk_likely.is_empty()) || !chunkable(shape))
        {
            return self.loop_nest(shape, &mut |g, idx| {
                if let Some(x) = body(g, idx)? {
                    g.fused_sums_step(sums, x)?;
                }
                Ok(())
            });
        }
        let parts = self.fused_sums_partials(sums, CHUNK)?;
        let i64t = self.ctx.i64_type();
        // The chunks the staged loop left (those past the split's `p`), or all.
        let first = staged.unwrap_or(self.i64c(0));
        let done = self.ctx.append_basic_block(self.func, "chunk.end");
        let pre = self.b.current_block()?;
        let outer = self.ctx.append_basic_block(self.func, "chunk");
        match staged {
            Some(first) => {
                let left = self.b.build_int_compare(
                    IntPredicate::ULT,
                    first,
                    self.i64c(chunks as u64),
                    "",
                )?;
                self.b.build_conditional_branch(left, outer, done)?;
            }
            None => {
                self.b.build_unconditional_branch(outer)?;
            }
        }
        self.b.position_at_end(outer);
        let c = self.b.build_phi(i64t, "c")?;
        c.add_incoming(&[(&first, pre)]);
        let cv = c.as_basic_value().into_int_value();
        let base = self.b.build_int_mul(cv, self.i64c(CHUNK as u64), "")?;
        // A chunk inside an index mask's true prefix runs with the mask known true (see
        // `prefix`); the partial sums are the same either way. A chunk whose lanes all
        // have the `likely` hints' values runs with them known (see `likely`).
        self.versioned_chunk(base, &mut |g| match g.split_for(shape[0]) {
            None => g.chunk_lanes(base, sums, &parts, None, body),
            Some(split) => {
                let end = g.b.build_int_add(base, g.i64c(CHUNK as u64), "")?;
                let full = g.b.build_int_compare(IntPredicate::SLE, end, split.p, "")?;
                let yes = g.ctx.append_basic_block(g.func, "chunk.prefix");
                let no = g.ctx.append_basic_block(g.func, "chunk.masked");
                let join = g.ctx.append_basic_block(g.func, "chunk.join");
                g.b.build_conditional_branch(full, yes, no)?;
                for (at, split) in [(yes, Some(&split)), (no, None)] {
                    g.b.position_at_end(at);
                    g.chunk_lanes(base, sums, &parts, split, body)?;
                    g.b.build_unconditional_branch(join)?;
                }
                g.b.position_at_end(join);
                Ok(())
            }
        })?;
        let after = self.ctx.append_basic_block(self.func, "chunk.prefetch");
        self.b.build_unconditional_branch(after)?;
        self.b.position_at_end(after);
        self.prefetch_chunk_share(&spans, cv, chunks)?;
        let c_next = self.b.build_int_add(cv, self.i64c(1), "")?;
        c.add_incoming(&[(&c_next, self.b.current_block()?)]);
        let more =
            self.b
                .build_int_compare(IntPredicate::ULT, c_next, self.i64c(chunks as u64), "")?;
        self.b.build_conditional_branch(more, outer, done)?;
        self.b.position_at_end(done);
        self.fused_sums_fold(sums, &parts, CHUNK)
    }

    /// The next program's spans of the `spread` targets (those that are one).
    pub(super) fn spread_spans(&mut self, spread: &[(Value, bool)]) -> Result<Vec<Span<'ctx>>> {
        let mut spans = Vec::new();
        for (p, w) in spread {
            if let Some(s) = self.next_span(*p, *w)? {
                spans.push(s);
            }
        }
        Ok(spans)
    }

    /// Chunk `cv`'s share (of `chunks`) of the prefetches of `spans` (a chunk past the
    /// last asks for the spans' first lines again).
    pub(super) fn prefetch_chunk_share(
        &mut self,
        spans: &[Span<'ctx>],
        cv: IntValue<'ctx>,
        chunks: usize,
    ) -> Result<()> {
        for s in spans {
            let per = s.lines.div_ceil(chunks);
            for t in 0..per {
                let line = self.b.build_int_mul(cv, self.i64c(per as u64), "")?;
                let line = self.b.build_int_add(line, self.i64c(t as u64), "")?;
                let off = self.b.build_int_mul(line, self.i64c(64), "")?;
                let inside = self
                    .b
                    .build_int_compare(IntPredicate::ULT, off, s.len, "")?;
                let off = self
                    .b
                    .build_select(inside, off, self.i64c(0), "")?
                    .into_int_value();
                let a = self.b.build_int_add(s.end, off, "")?;
                self.prefetch_line(a, s.write)?;
            }
        }
        Ok(())
    }

    /// The lanes `base..base + CHUNK` of a [`lane_loop`](Self::lane_loop) chunk, with the
    /// masks of `split` known true at each lane when given.
    fn chunk_lanes(
        &mut self,
        base: IntValue<'ctx>,
        sums: &[FusedSum<'ctx>],
        parts: &[PointerValue<'ctx>],
        split: Option<&super::prefix::PrefixSplit<'ctx>>,
        body: &mut LaneBody<'_, 'ctx, Self>,
    ) -> Result<()> {
        // A chunk is a few vectors: interleaved or unrolled, its loop would only copy its
        // body (softmax's exp four times) for LLVM to compile.
        self.counted_loop(CHUNK, LoopUnroll::SingleCopy, &mut |g, j| {
            let i = g.b.build_int_add(base, j, "")?;
            let x = match split {
                Some(split) => g.in_prefix_at(split, i, |g| body(g, &[i]))?,
                None => body(g, &[i])?,
            };
            if let Some(x) = x {
                g.fused_sums_step_partial(sums, parts, j, x)?;
            }
            Ok(())
        })
    }

    /// Where the next program's copy of the rank-1 pointer tile `ptr` starts and how many
    /// bytes it spans (0 when it is not one contiguous run of at most 16 KiB), computed
    /// here even when `ptr` is defined later in the block (it is a pure function of values
    /// known here, see [`plan_spread`]).
    fn next_span(&mut self, ptr: Value, write: bool) -> Result<Option<Span<'ctx>>> {
        let mut added = Vec::new();
        let ok = self.make_available(ptr, &mut added)?;
        let span = ok
            .then(|| -> Result<_> {
                let (end, len) = self.span_after(ptr)?;
                let pt = self.ty(ptr);
                let bytes = pt.numel() * pt.elem.pointee().map_or(0, |d| d.size_bytes());
                Ok(Span {
                    end,
                    len,
                    write,
                    lines: bytes.div_ceil(64),
                })
            })
            .transpose()?;
        for v in added {
            self.lv.remove(&v);
        }
        Ok(span)
    }

    /// Makes the pure value `v` computable here (see [`pure_from`]), recording
    /// every value it had to add to `lv`.
    pub(super) fn make_available(&mut self, v: Value, added: &mut Vec<Value>) -> Result<bool> {
        if self.lv.contains_key(&v) {
            return Ok(true);
        }
        let Some(inst) = self.defs.get(&v).copied() else {
            return Ok(false);
        };
        if !is_pure(&inst.op) {
            return Ok(false);
        }
        for o in inst.op.operands() {
            if !self.make_available(o, added)? {
                return Ok(false);
            }
        }
        let lv = if self.ty(v).is_scalar() {
            Lv::Scalar(self.op_lane(inst, &[])?)
        } else {
            Lv::Lazy
        };
        self.lv.insert(v, lv);
        added.push(v);
        Ok(true)
    }

    /// The address right after the last lane of the rank-1 pointer tile `ptr`, and the
    /// tile's span in bytes (0 unless it is at most 16 KiB with the last lane last).
    fn span_after(&mut self, ptr: Value) -> Result<(IntValue<'ctx>, IntValue<'ctx>)> {
        let pt = self.ty(ptr).clone();
        let size = pt.elem.pointee().map_or(1, |d| d.size_bytes()) as u64;
        let i64t = self.ctx.i64_type();
        let addr = |g: &mut Self, i: u64| -> Result<_> {
            let p = g.lane(ptr, &[g.i64c(i)])?.into_pointer_value();
            Ok(g.b.build_ptr_to_int(p, i64t, "")?)
        };
        let first = addr(self, 0)?;
        let last = addr(self, pt.numel() as u64 - 1)?;
        let end = self.b.build_int_add(last, self.i64c(size), "")?;
        let span = self.b.build_int_sub(end, first, "")?;
        // An unsigned comparison also rejects tiles whose last lane comes first.
        let ok = self
            .b
            .build_int_compare(IntPredicate::ULE, span, self.i64c(MAX_SPAN), "")?;
        let span = self
            .b
            .build_select(ok, span, self.i64c(0), "")?
            .into_int_value();
        Ok((end, span))
    }

    /// One prefetch hint for the cache line at address `a` (keep in all cache levels).
    pub(super) fn prefetch_line(&mut self, a: IntValue<'ctx>, write: bool) -> Result<()> {
        self.prefetch_line_to(a, write, 3)
    }

    /// One prefetch hint for the cache line at address `a`, kept down to `locality`
    /// (LLVM's: 3 keeps it in every level, 2 from L2 on, 1 from L3 on).
    pub(super) fn prefetch_line_to(
        &mut self,
        a: IntValue<'ctx>,
        write: bool,
        locality: u64,
    ) -> Result<()> {
        let p: PointerValue =
            self.b
                .build_int_to_ptr(a, self.ctx.ptr_type(inkwell::AddressSpace::default()), "")?;
        let i32t = self.ctx.i32_type();
        let prefetch = inkwell::intrinsics::Intrinsic::find("llvm.prefetch")
            .and_then(|i| i.get_declaration(self.module, &[p.get_type().into()]))
            .expect("LLVM 19 has llvm.prefetch");
        self.b.build_call(
            prefetch,
            &[
                p.into(),
                i32t.const_int(write as u64, false).into(),
                i32t.const_int(locality, false).into(),
                i32t.const_int(1, false).into(),
            ],
            "",
        )?;
        Ok(())
    }

    /// Prefetches the next program's copy of the rank-1 pointer tile `ptr` in one burst,
    /// here, unless the spread loop covers it.
    pub(super) fn prefetch_next(&mut self, ptr: Value, write: bool) -> Result<()> {
        if self.spread_covers(ptr) {
            return Ok(());
        }
        self.prefetch_next_burst(ptr, write)
    }

    /// [`prefetch_next`](Self::prefetch_next) even where the spread loop would cover `ptr`:
    /// for code that skips that loop (a store a Simd call wrote in place).
    pub(super) fn prefetch_next_burst(&mut self, ptr: Value, write: bool) -> Result<()> {
        let pt = self.ty(ptr).clone();
        let Some(d) = pt.elem.pointee() else {
            return Ok(());
        };
        if self.opts.bounds_check || pt.rank() != 1 || pt.numel() * d.size_bytes() < MIN_SPAN {
            return Ok(());
        }
        let (bl, i64t) = (self.b, self.ctx.i64_type());
        let (end, span) = self.span_after(ptr)?;
        let pre = bl.current_block()?;
        let body = self.ctx.append_basic_block(self.func, "prefetch");
        let done = self.ctx.append_basic_block(self.func, "prefetch.end");
        let any = bl.build_int_compare(IntPredicate::UGT, span, self.i64c(0), "")?;
        bl.build_conditional_branch(any, body, done)?;
        bl.position_at_end(body);
        let off = bl.build_phi(i64t, "off")?;
        off.add_incoming(&[(&self.i64c(0), pre)]);
        let o = off.as_basic_value().into_int_value();
        let a = bl.build_int_add(end, o, "")?;
        self.prefetch_line(a, write)?;
        let next = bl.build_int_add(o, self.i64c(64), "")?;
        off.add_incoming(&[(&next, body)]);
        let more = bl.build_int_compare(IntPredicate::ULT, next, span, "")?;
        bl.build_conditional_branch(more, body, done)?;
        bl.position_at_end(done);
        Ok(())
    }

    /// [`prefetch_next`](Self::prefetch_next) for a load whose tile is read more than once
    /// in the program (a single streaming pass is left to the hardware prefetcher, which
    /// software prefetches would only slow down, unless a compute-bound loop carries it:
    /// see [`plan_block`]).
    pub(super) fn prefetch_next_load(&mut self, loaded: Value, ptr: Value) -> Result<()> {
        if self.f.uses(loaded) > 1 {
            self.prefetch_next(ptr, false)?;
        }
        Ok(())
    }
}
