//! A `dot`'s `a` read where it lies.
//!
//! The micro-kernels read `a` one element of each of `MR` rows per step (broadcasts),
//! which a row-major source serves as well as a packed copy: the copy only moved `a`'s
//! rows closer together. Tutorial 03 copied each program's `BM × BK` slice of `a` at every
//! K step, 6% of matmul's time at 1000³ (perf), and each of a column's programs copied
//! the same rows again. So where the tile is a plain load whose rows are runs of
//! consecutive elements, every lane of it loaded (no mask, or a box mask that is the whole
//! tile) and no conversion is needed, the micro-kernels take each row's first element
//! from the pointer tile and read the row in place; anywhere else (an edge tile, a run
//! that wraps) they read the packed copy as before.

use super::custom::Direct;
use super::edge_copy::EdgeLoad;
use super::Gen;
use crate::llvm::Result;
use inkwell::types::BasicTypeEnum;
use inkwell::values::{IntValue, PointerValue};
use tritium_dsl::ir::{DType, Op, Value};

/// An operand the micro-kernels read in place when `flag` holds at run time.
pub(super) struct InPlaceRows<'ctx> {
    /// The load's pointer tile: its lane `(r, 0)` is row `r`'s first element, and the
    /// row's element `c` lies `c` elements on.
    ptr: Value,
    /// Every lane is loaded and the rows are runs (else the packed copy is read).
    pub flag: IntValue<'ctx>,
}

impl<'ctx> Gen<'ctx, '_> {
    /// `v` (a `dot` operand of compute dtype `d`, with its edge form `edge`) as rows the
    /// micro-kernels may read in place; `None` where they never may: checked code (which
    /// checks each lane it copies), a volatile or converting load, a mask other than a box.
    pub(super) fn in_place_rows(
        &mut self,
        v: Value,
        d: DType,
        edge: Option<&EdgeLoad<'ctx>>,
    ) -> Result<Option<InPlaceRows<'ctx>>> {
        if self.opts.bounds_check || self.opts.race_check || self.dtype_of(v) != d {
            return Ok(None);
        }
        if let Some(e) = edge {
            let flag = self.whole_box(e)?;
            return Ok(Some(InPlaceRows { ptr: e.ptr, flag }));
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
        Ok(Some(InPlaceRows { ptr, flag }))
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
        let source = self.lane(rows.ptr, &[row, zero])?.into_pointer_value();
        Ok(self
            .b
            .build_select(rows.flag, source, copy, "a.row.in_place")?
            .into_pointer_value())
    }
}
