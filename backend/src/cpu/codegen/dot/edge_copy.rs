//! A `dot` operand's copy at the edges of the matrices.
//!
//! Tutorial 03's tiles are loaded under box masks (`box_mask`): the last step of the K
//! loop and the last row or column of blocks are partial. Their packed copies ran lane by
//! lane under the mask (masked loads of gathered addresses), 4% of matmul's time at 1000³,
//! and a build that skipped them ran 5–6% faster. Where the box is exact and the tile's
//! rows are runs, the copy takes the box's rows as runs of `p1` consecutive elements and
//! writes the load's `other` everywhere else (LLVM makes most of its loops `memcpy` and
//! `memset`): 1000³ ran 1.8% faster (`bench_table -- matmul`, alternated).

use super::base::Packing;
use crate::cpu::codegen::box_mask::BoxMask;
use crate::cpu::codegen::{Gen, LoopUnroll};
use crate::llvm::{Emitter, Result};
use inkwell::values::{BasicValueEnum, IntValue, PointerValue};
use inkwell::IntPredicate;
use tritium_dsl::ir::{Const, DType, Elem, Op, Value};

/// A masked load of a matrix whose mask is a box and whose rows are runs.
pub(super) struct EdgeLoad<'ctx> {
    /// The pointer tile.
    pub ptr: Value,
    /// The mask's box.
    pub bounds: BoxMask<'ctx>,
    /// The box is exact and `ptr`'s rows are runs (i1, computed once where the load is
    /// taken as an edge load).
    pub exact_runs: IntValue<'ctx>,
    /// The box is the whole tile (i1).
    whole: IntValue<'ctx>,
    /// Every lane's `other` (compute form of `from`).
    pub other: BasicValueEnum<'ctx>,
    /// `other` is +0 (or integer 0): a `dot` may skip a step whose operands are all it.
    pub other_is_zero: bool,
    /// The loaded dtype.
    from: DType,
    rows: usize,
    cols: usize,
}

impl<'ctx> Gen<'ctx, '_> {
    /// `v` as an [`EdgeLoad`]: a lazy, non-volatile masked load of a matrix whose mask is a
    /// box, whose `other` is one value, and whose pointer tile is a run along its rows.
    /// None in checked code, which checks every lane.
    pub(super) fn edge_load(&mut self, v: Value) -> Result<Option<EdgeLoad<'ctx>>> {
        if self.reads_checked(v) || self.opts.race_check {
            return Ok(None);
        }
        let Some(Op::Load {
            ptr,
            mask: Some(m),
            other,
            hints,
        }) = self.lazy_op(v).cloned()
        else {
            return Ok(None);
        };
        let shape = self.ty(v).shape.clone();
        let (&[rows, cols], false) = (&shape[..], hints.volatile) else {
            return Ok(None);
        };
        if self.true_masks.contains(&m) {
            return Ok(None);
        }
        let from = self.dtype_of(v);
        let (other, other_is_zero) = match other {
            None => (self.const_value(Const::Int(0), from), true),
            Some(o) => match self.uniform_const(o) {
                Some(c) => (self.const_value(c, from), is_positive_zero(c)),
                None if matches!(self.lazy_op(o), Some(Op::Splat(x)) if self.ty(*x).is_scalar()) => {
                    (self.lane(o, &[])?, false)
                }
                None => return Ok(None),
            },
        };
        let Some(run) = self.row_run(ptr).filter(|_| self.lazy_op(ptr).is_some()) else {
            return Ok(None);
        };
        let Some(bounds) = self.box_mask(m)? else {
            return Ok(None);
        };
        let runs = self.run_holds(&run)?;
        let exact_runs = self.b.build_and(bounds.exact, runs, "")?;
        let mut whole = self.ctx.bool_type().const_all_ones();
        for (p, len) in bounds.p.iter().zip([rows, cols]) {
            let all = self
                .b
                .build_int_compare(IntPredicate::EQ, *p, self.i64c(len as u64), "")?;
            whole = self.b.build_and(whole, all, "")?;
        }
        Ok(Some(EdgeLoad {
            ptr,
            bounds,
            exact_runs,
            whole,
            other,
            other_is_zero,
            from,
            rows,
            cols,
        }))
    }

    /// Whether [`edge_copy`](Self::edge_copy) may run: the box is exact, the rows are runs,
    /// and the box is not the whole tile (the all-true copy's case).
    pub(super) fn edge_copy_applies(&mut self, e: &EdgeLoad<'ctx>) -> Result<IntValue<'ctx>> {
        let partial = self.b.build_not(e.whole, "")?;
        Ok(self.b.build_and(e.exact_runs, partial, "")?)
    }

    /// Packs the load `e` into `buf` (elements of dtype `d`, laid out as `packing`): the
    /// box's rows as runs, `other` past the box. Behind [`edge_copy_applies`].
    ///
    /// [`edge_copy_applies`]: Self::edge_copy_applies
    pub(super) fn edge_copy(
        &mut self,
        e: &EdgeLoad<'ctx>,
        d: DType,
        packing: Packing,
        buf: PointerValue<'ctx>,
    ) -> Result<()> {
        let et = self.compute_ty(d);
        let fill = self.cast(e.other, e.from, d)?;
        let (p0, p1) = (e.bounds.p[0], e.bounds.p[1]);
        let zero = self.i64c(0);
        let (rows, cols) = (self.i64c(e.rows as u64), self.i64c(e.cols as u64));
        // Columns `lo..hi` of a row, loaded from the run at `first` (in the box) or `other`.
        // One vector per iteration: LLVM makes most of these loops `memcpy` and `memset`.
        let columns = |g: &mut Self,
                       first: Option<PointerValue<'ctx>>,
                       lo: IntValue<'ctx>,
                       hi: IntValue<'ctx>,
                       to: &dyn Fn(&Self, IntValue<'ctx>) -> Result<PointerValue<'ctx>>|
         -> Result<()> {
            g.range_loop("edge.cols", lo, hi, LoopUnroll::SingleCopy, &mut |g, c| {
                let x = match first {
                    Some(first) => g.edge_lane(e, first, c, d)?,
                    None => fill,
                };
                g.b.build_store(to(g, c)?, x)?;
                Ok(())
            })
        };
        self.range_loop("edge.rows", zero, rows, LoopUnroll::Never, &mut |g, r| {
            let inside = g.b.build_int_compare(IntPredicate::SLT, r, p0, "")?;
            let first = g.lane(e.ptr, &[r, zero])?.into_pointer_value();
            // Past the box's rows, the whole row is `other`.
            let valid = g.b.build_select(inside, p1, zero, "")?.into_int_value();
            match packing {
                Packing::Rows { .. } => {
                    let to = |g: &Self, c: IntValue<'ctx>| packing.elem(g, buf, et, r, c);
                    columns(g, Some(first), zero, valid, &to)?;
                    columns(g, None, valid, cols, &to)
                }
                Packing::Panels { width, .. } => {
                    let w = g.i64c(width as u64);
                    g.counted_loop(e.cols / width, LoopUnroll::Never, &mut |g, q| {
                        let q0 = g.b.build_int_mul(q, w, "")?;
                        // Columns of this panel in the box: `clamp(valid - q0, 0, width)`.
                        let left = g.b.build_int_sub(valid, q0, "")?;
                        let left = g.clamp_lanes(left, w)?;
                        let st = g.storage_ty(e.from);
                        // SAFETY (of the generated code): the run's lanes, `q0` elements on.
                        let panel_first = unsafe { g.b.build_gep(st, first, &[q0], "")? };
                        let to =
                            |g: &Self, c: IntValue<'ctx>| packing.panel_elem(g, buf, et, q, r, c);
                        columns(g, Some(panel_first), zero, left, &to)?;
                        columns(g, None, left, w, &to)
                    })
                }
            }
        })
    }

    /// Element `c` of the run starting at `first`, loaded and converted to dtype `d`.
    fn edge_lane(
        &mut self,
        e: &EdgeLoad<'ctx>,
        first: PointerValue<'ctx>,
        c: IntValue<'ctx>,
        d: DType,
    ) -> Result<BasicValueEnum<'ctx>> {
        let st = self.storage_ty(e.from);
        // SAFETY (of the generated code): lane `c < p1` of a run inside the box.
        let p = unsafe { self.b.build_in_bounds_gep(st, first, &[c], "")? };
        let raw = self.b.build_load(st, p, "")?;
        let x = self.decode_storage(raw, Elem::Scalar(e.from))?;
        self.cast(x, e.from, d)
    }

    /// The constant every lane of `v` holds (a constant tile or a splat of a scalar one).
    fn uniform_const(&self, v: Value) -> Option<Const> {
        match &self.defs.get(&v)?.op {
            Op::Const(c) => Some(*c),
            Op::Splat(x) if self.ty(*x).is_scalar() => self.uniform_const(*x),
            _ => None,
        }
    }
}

/// +0.0, or an integer 0.
pub(super) fn is_positive_zero(c: Const) -> bool {
    match c {
        Const::Int(i) => i == 0,
        Const::Float(f) => f == 0.0 && f.is_sign_positive(),
    }
}
