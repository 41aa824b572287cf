//! A `dot`'s `a` read where it lies.
//!
//! The micro-kernels read `a` one element of each of `MR` rows per step (broadcasts),
//! which a row-major source serves as well as a packed copy: the copy only moved `a`'s
//! rows closer together. Tutorial 03 copied each program's `BM × BK` slice of `a` at every
//! K step, 6% of matmul's time at 1000³ (perf), and each of a column's programs copied
//! the same rows again.
//!
//! So where the tile is a plain load whose rows are runs of consecutive elements and no
//! conversion is needed, the micro-kernels take each row's first element from the pointer
//! tile and read the row in place, when every element they read is loaded:
//! - an unmasked load: always;
//! - a load under an exact box mask (`box_mask`, at tutorial 03's edges): rows past the
//!   box read a row of the load's `other` instead, and the K loop must stop inside the
//!   box's columns (a whole box; or `dot`'s `k_steps`, which stops tutorial 03's last K
//!   step where `a`'s and `b`'s boxes end).
//!
//! Anywhere else (columns past the box that the K loop reads, a run that wraps) they read
//! the packed copy as before.

use super::edge_copy::EdgeLoad;
use crate::cpu::codegen::custom::Direct;
use crate::cpu::codegen::{Gen, LoopUnroll};
use crate::llvm::{Emitter, Result};
use inkwell::types::BasicTypeEnum;
use inkwell::values::{IntValue, PointerValue};
use inkwell::IntPredicate;
use tritium_dsl::ir::{DType, Elem, Op, Type, Value};

/// An operand the micro-kernels read in place when `flag` holds at run time.
pub(super) struct InPlaceRows<'ctx> {
    /// The load's pointer tile: its lane `(r, 0)` is row `r`'s first element, and the
    /// row's element `c` lies `c` elements on.
    ptr: Value,
    /// Under a box mask: the rows below its bound are the source's, the others read this
    /// row of the load's `other`.
    box_rows: Option<(IntValue<'ctx>, PointerValue<'ctx>)>,
    /// Every element the micro-kernels read is loaded from runs (else the packed copy is
    /// read).
    pub flag: IntValue<'ctx>,
}

impl<'ctx> Gen<'ctx, '_> {
    /// `v` (a `dot` operand of compute dtype `d` whose K loop runs `k_steps` of `k` steps,
    /// with its edge form `edge`) as rows the micro-kernels may read in place; `None` where
    /// they never may: checked code (which checks each lane it copies), a volatile or
    /// converting load, a mask other than a box.
    pub(super) fn in_place_rows(
        &mut self,
        v: Value,
        d: DType,
        edge: Option<&EdgeLoad<'ctx>>,
        (k_steps, k): (Option<IntValue<'ctx>>, usize),
    ) -> Result<Option<InPlaceRows<'ctx>>> {
        if self.reads_checked(v) || self.opts.race_check || self.dtype_of(v) != d {
            return Ok(None);
        }
        if let Some(e) = edge {
            // The K loop reads no column past the box.
            let steps = k_steps.unwrap_or(self.i64c(k as u64));
            let inside = self
                .b
                .build_int_compare(IntPredicate::ULE, steps, e.bounds.p[1], "")?;
            let flag = self.b.build_and(e.exact_runs, inside, "")?;
            let fill = self.alloc_buf(&Type::tile(Elem::Scalar(d), vec![k]))?;
            let et = self.compute_ty(d);
            self.counted_loop(k, LoopUnroll::Never, &mut |g, c| {
                let p = g.elem_ptr(fill, et, g.i64c(0), k, c)?;
                g.b.build_store(p, e.other)?;
                Ok(())
            })?;
            return Ok(Some(InPlaceRows {
                ptr: e.ptr,
                box_rows: Some((e.bounds.p[0], fill)),
                flag,
            }));
        }
        let Some(Op::Load {
            ptr, mask, hints, ..
        }) = self.lazy_op(v).cloned()
        else {
            return Ok(None);
        };
        let unmasked = mask.is_none_or(|m| self.true_masks.contains(&m));
        if !unmasked || hints.volatile || self.lazy_op(ptr).is_none() {
            return Ok(None);
        }
        let Some(run) = self.row_run(ptr) else {
            return Ok(None);
        };
        let flag = self.run_holds(&Direct { mask: None, ..run })?;
        Ok(Some(InPlaceRows {
            ptr,
            box_rows: None,
            flag,
        }))
    }

    /// The first element of row `row` of `a`: in place when `rows` says so, else in the
    /// packed copy `packed` (rows of `k` elements of type `et`).
    pub(super) fn a_row(
        &mut self,
        rows: Option<&InPlaceRows<'ctx>>,
        packed: PointerValue<'ctx>,
        et: BasicTypeEnum<'ctx>,
        k: usize,
        row: IntValue<'ctx>,
    ) -> Result<PointerValue<'ctx>> {
        let copy = self.elem_ptr(packed, et, row, k, self.i64c(0))?;
        let Some(rows) = rows else {
            return Ok(copy);
        };
        let zero = self.i64c(0);
        let mut source = self.lane(rows.ptr, &[row, zero])?.into_pointer_value();
        if let Some((bound, fill)) = rows.box_rows {
            let inside = self
                .b
                .build_int_compare(IntPredicate::SLT, row, bound, "")?;
            source = self
                .b
                .build_select(inside, source, fill, "")?
                .into_pointer_value();
        }
        Ok(self
            .b
            .build_select(rows.flag, source, copy, "a.row.in_place")?
            .into_pointer_value())
    }
}
