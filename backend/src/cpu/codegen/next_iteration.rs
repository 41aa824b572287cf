//! Prefetching the operand tiles of a `dot`'s next loop iteration while the dot runs.
//!
//! A K loop (`for kb in …: acc = dot(load(a + kb·BK…), load(b + kb·BK·stride…), acc)`)
//! reads two fresh tiles per iteration from rows far apart in memory: a few cache lines per
//! row, which the hardware prefetchers do not follow. Their misses stall the packing of the
//! next iteration's operands. So while the micro-kernels of this iteration run, each
//! requests a share of the rows of the next iteration's tiles.
//!
//! The next iteration's pointer tile is the same expression with the induction variable
//! advanced by the step and each carried integer (a block pointer's offsets) replaced by
//! what the body yields for it: the values of the loop body that depend on them are
//! swapped out of `lv`, they are bound to their next values, and the pointer tile's first
//! two runs are recomputed (pure ops only; a tile that needs anything else is not
//! prefetched), which gives every run's address (the tile is affine). A loop-carried
//! pointer tile's next value is the one the body yields. A tile is prefetched as runs of
//! contiguous memory: its rows, or its columns (`kᵀ`).

use super::{Gen, Lv};
use crate::llvm::{Emitter, Positioned, Result};
use inkwell::values::IntValue;
use std::collections::HashSet;
use tritium_dsl::ir::{affine_lanes, Block, Op, Value};

/// The innermost `for` loop being generated.
pub(super) struct LoopFrame<'ctx, 'f> {
    /// Its body.
    pub body: &'f Block,
    /// The induction variable's value in the next iteration.
    pub next_iv: IntValue<'ctx>,
    /// The iteration's number, from 0 (i64).
    pub trip: IntValue<'ctx>,
}

/// Where the next iteration's operand tiles of one `dot` lie.
pub(super) struct NextTiles<'ctx> {
    /// Rank-2 pointer tiles made of contiguous runs.
    tiles: Vec<Runs<'ctx>>,
}

/// A rank-2 pointer tile whose rows (or columns) are each one contiguous run of memory,
/// the same distance apart.
#[derive(Clone, Copy)]
struct Runs<'ctx> {
    /// The address of the first run and the distance to the next (i64).
    first: IntValue<'ctx>,
    step: IntValue<'ctx>,
    /// How many runs.
    count: usize,
    /// Bytes in each.
    bytes: usize,
}

impl<'ctx> NextTiles<'ctx> {
    /// Runs of every tile together.
    pub fn runs(&self) -> usize {
        self.tiles.iter().map(|t| t.count).sum()
    }
}

impl<'ctx, 'f> Gen<'ctx, 'f> {
    /// Where the next iteration's copies of the dot operands `operands` lie (loads in the
    /// innermost loop whose rows or columns are contiguous). `None` when there is none, in
    /// checked mode, or outside a loop.
    pub(super) fn next_tiles(&mut self, operands: &[Value]) -> Result<Option<NextTiles<'ctx>>> {
        if self.opts.bounds_check {
            return Ok(None);
        }
        let Some(frame) = self.loops.last() else {
            return Ok(None);
        };
        let (body, next_iv) = (frame.body, frame.next_iv);
        let Some(&iv) = body.args.first() else {
            return Ok(None);
        };
        let yields = body.yields();
        // Carried integers whose next value the body yields (block pointers' offsets).
        let carried: Vec<(Value, Value)> = body.args[1..]
            .iter()
            .zip(yields)
            .filter(|(a, _)| self.ty(**a).dtype().is_some_and(|d| d.is_int()))
            .map(|(a, y)| (*a, *y))
            .collect();
        let roots: HashSet<Value> = carried.iter().map(|c| c.0).chain([iv]).collect();
        let moved = dependents(body, &roots);
        // The load pointers, and what stands for each next iteration.
        let mut wanted = Vec::new();
        for &v in operands {
            if !matches!(self.lv.get(&v), Some(Lv::Lazy)) {
                continue;
            }
            let Some(Op::Load { ptr, hints, .. }) = self.defs.get(&v).map(|i| &i.op) else {
                continue;
            };
            let t = self.ty(*ptr).clone();
            let size = t.elem.pointee().map_or(0, |d| d.size_bytes());
            let strides = affine_lanes(self.f, &self.defs, *ptr).map(|a| a.strides);
            let rows = match strides.as_deref() {
                _ if hints.volatile || t.rank() != 2 => continue,
                Some([_, Some(1)]) => true,
                Some([Some(1), _]) => false,
                _ => continue,
            };
            let (count, run) = if rows {
                (t.shape[0], t.shape[1])
            } else {
                (t.shape[1], t.shape[0])
            };
            // A carried tile's next value is what the body yields for it, computed from its
            // current value (not from the induction variable, which is advanced below).
            let next = match body.args[1..].iter().position(|a| a == ptr) {
                Some(i) => yields.get(i).copied().filter(|y| !moved.contains(y)),
                // The next iteration's copy of a tile that does not move is the same tile.
                None => moved.contains(ptr).then_some(*ptr),
            };
            if let Some(tile) = next {
                wanted.push((tile, count, run * size, rows));
            }
        }
        if wanted.is_empty() {
            return Ok(None);
        }
        // The carried integers' next values, computed from their current ones (what that
        // added to `lv` goes again: the body computes those values where they are).
        let mut next_values = vec![(iv, next_iv.into())];
        let mut computed = Vec::new();
        for (arg, y) in carried {
            if self.make_available(y, &mut computed)? {
                if let Some(Lv::Scalar(x)) = self.lv.get(&y) {
                    next_values.push((arg, *x));
                }
            }
        }
        for v in computed {
            self.lv.remove(&v);
        }
        let mut added = Vec::new();
        // Swap out what depends on them; bind them to their next values.
        let mut saved: Vec<(Value, Option<Lv<'ctx>>)> = Vec::new();
        for v in moved.iter().chain(&roots) {
            saved.push((*v, self.lv.remove(v)));
        }
        for (v, x) in next_values {
            self.lv.insert(v, Lv::Scalar(x));
        }
        // The first run's address and the distance between runs: the tile is affine.
        let i64t = self.ctx.i64_type();
        let mut tiles = Vec::new();
        let mut seen = HashSet::new();
        for (tile, count, bytes, rows) in wanted {
            if !seen.insert(tile) || !self.make_available(tile, &mut added)? {
                continue;
            }
            let address = |g: &mut Self, k: u64| -> Result<_> {
                let idx = if rows {
                    [g.i64c(k), g.i64c(0)]
                } else {
                    [g.i64c(0), g.i64c(k)]
                };
                let p = g.lane(tile, &idx)?.into_pointer_value();
                Ok(g.b.build_ptr_to_int(p, i64t, "")?)
            };
            let first = address(self, 0)?;
            let second = address(self, 1.min(count as u64 - 1))?;
            let step = self.b.build_int_sub(second, first, "")?;
            tiles.push(Runs {
                first,
                step,
                count,
                bytes,
            });
        }
        // Back to this iteration's values.
        for v in added {
            self.lv.remove(&v);
        }
        for (v, lv) in saved {
            match lv {
                Some(lv) => self.lv.insert(v, lv),
                None => self.lv.remove(&v),
            };
        }
        Ok((!tiles.is_empty()).then_some(NextTiles { tiles }))
    }

    /// Prefetches share `t` of `total` of the runs of `next` (`t` counts from 0).
    pub(super) fn prefetch_next_share(
        &mut self,
        next: &NextTiles<'ctx>,
        t: IntValue<'ctx>,
        total: usize,
    ) -> Result<()> {
        let rows = next.runs() as u64;
        let bl = self.b;
        let i64t = self.ctx.i64_type();
        let share = |s: &Self, k: IntValue<'ctx>| -> Result<_> {
            let x = bl.build_int_mul(k, s.i64c(rows), "")?;
            Ok(bl.build_int_unsigned_div(x, s.i64c(total as u64), "")?)
        };
        let lo = share(self, t)?;
        let t1 = bl.build_int_add(t, self.i64c(1), "")?;
        let hi = share(self, t1)?;
        let mut first = 0u64;
        for &Runs {
            first: run0,
            step,
            count: tile_rows,
            bytes,
            ..
        } in &next.tiles
        {
            // Runs `lo..hi` of all tiles together, this tile's part of them.
            let begin = self.i64c(first);
            let end = self.i64c(first + tile_rows as u64);
            let umax = |a, b| self.intrinsic("llvm.umax", &[i64t.into()], &[a, b]);
            let umin = |a, b| self.intrinsic("llvm.umin", &[i64t.into()], &[a, b]);
            let from = umax(lo.into(), begin.into())?.into_int_value();
            let to = umin(hi.into(), end.into())?.into_int_value();
            let pre = bl.current_block()?;
            let body = self.ctx.append_basic_block(self.func, "next.rows");
            let done = self.ctx.append_basic_block(self.func, "next.rows.end");
            let any = bl.build_int_compare(inkwell::IntPredicate::ULT, from, to, "")?;
            bl.build_conditional_branch(any, body, done)?;
            bl.position_at_end(body);
            let r = bl.build_phi(i64t, "row")?;
            r.add_incoming(&[(&from, pre)]);
            let row = r.as_basic_value().into_int_value();
            let local = bl.build_int_sub(row, begin, "")?;
            let a = bl.build_int_mul(local, step, "")?;
            let a = bl.build_int_add(run0, a, "")?;
            // Every line of the row's run, its last byte's included.
            let mut offsets: Vec<u64> = (0..bytes as u64).step_by(64).collect();
            offsets.push(bytes as u64 - 1);
            for off in offsets {
                let at = bl.build_int_add(a, self.i64c(off), "")?;
                // Into L2: the next tiles together outgrow L1, where this iteration's
                // packed operands are being read.
                self.prefetch_line_to(at, false, 2)?;
            }
            let row1 = bl.build_int_add(row, self.i64c(1), "")?;
            r.add_incoming(&[(&row1, bl.current_block()?)]);
            let more = bl.build_int_compare(inkwell::IntPredicate::ULT, row1, to, "")?;
            let back = bl.build_conditional_branch(more, body, done)?;
            // A few rows per share: unrolling it would only add code to compile.
            self.emit().unroll_hint(back, 1);
            bl.position_at_end(done);
            first += tile_rows as u64;
        }
        Ok(())
    }
}

/// The values defined at the top of `body` that depend on `roots`, directly or not
/// (through an operand or a use inside a region).
fn dependents(body: &Block, roots: &HashSet<Value>) -> HashSet<Value> {
    fn uses_any(b: &Block, dep: &HashSet<Value>) -> bool {
        b.insts.iter().any(|i| {
            i.op.operands().iter().any(|o| dep.contains(o))
                || i.op.regions().into_iter().any(|r| uses_any(r, dep))
        })
    }
    let mut dep = roots.clone();
    for inst in &body.insts {
        let uses = inst.op.operands().iter().any(|o| dep.contains(o))
            || inst.op.regions().into_iter().any(|r| uses_any(r, &dep));
        if uses {
            dep.extend(inst.results.iter().copied());
        }
    }
    dep.retain(|v| !roots.contains(v));
    dep
}
