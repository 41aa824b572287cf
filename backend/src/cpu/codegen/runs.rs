//! Pointer tiles whose lanes along the last axis are consecutive elements, in the all-true
//! copy of a masked region (see `Gen::versioned`).
//!
//! `x + off + arange(0, B)` with an `i32` `off` computes every lane's address from a
//! sign-extended `off + j`, which may wrap for all LLVM knows: it loads the lanes with a
//! gather. `dsl::ir::affine` proves such a tile is `first + j` along its last axis unless a
//! narrow offset wraps, and [`run_holds`](Gen::run_holds) checks that at run time. Where the
//! check holds, the fast copy computes lane `(…, j)` as lane `(…, 0)` plus `j` elements, so
//! the accesses are plain vector loads and stores; where it fails, the masked copy runs.

use super::custom::Direct;
use super::{Gen, Lv};
use crate::llvm::Result;
use inkwell::values::{BasicValueEnum, IntValue};
use std::collections::HashSet;
use tritium_dsl::ir::{affine_lanes, DType, Op, Value};

impl<'ctx> Gen<'ctx, '_> {
    /// The pointer tiles accessed in a region that evaluates `roots` (and accesses
    /// `pointers` directly), under no mask or one of `masks`, that are runs along their last
    /// axis given [`run_holds`](Self::run_holds); none in checked code.
    pub(super) fn runs_in(
        &self,
        roots: &[Value],
        pointers: &[Value],
        masks: &[Value],
    ) -> Vec<Direct> {
        if self.opts.bounds_check {
            return Vec::new();
        }
        let mut found: Vec<Value> = pointers.to_vec();
        let mut seen = HashSet::new();
        let mut todo = roots.to_vec();
        while let Some(v) = todo.pop() {
            if !seen.insert(v) || !matches!(self.lv.get(&v), Some(Lv::Lazy)) {
                continue;
            }
            let Some(inst) = self.defs.get(&v) else {
                continue;
            };
            if let Op::Load { ptr, mask, .. } = &inst.op {
                if mask.is_none_or(|m| masks.contains(&m)) {
                    found.push(*ptr);
                }
            }
            todo.extend(inst.op.operands());
        }
        found.sort_by_key(|v| v.0);
        found.dedup();
        // A checked access goes lane by lane through its check.
        found.retain(|p| !self.checked_pointer(*p));
        found
            .into_iter()
            .filter_map(|ptr| self.run_along_rows(ptr))
            .collect()
    }

    /// `ptr` as a lazy pointer tile that is a run along its last axis.
    fn run_along_rows(&self, ptr: Value) -> Option<Direct> {
        let lazy = matches!(self.lv.get(&ptr), Some(Lv::Lazy));
        if !lazy || self.ty(ptr).rank() == 0 {
            return None;
        }
        self.row_run(ptr)
    }

    /// `ptr` as a pointer tile whose last axis has unit stride (`dsl::ir::affine`), with
    /// widened offsets that [`run_holds`](Self::run_holds) can check. Offsets equal along
    /// the last axis (`rk[:, None] * ldb` with a run-time `ldb`) need no check: each line's
    /// lanes get the same one, wrapped or not.
    pub(super) fn row_run(&self, ptr: Value) -> Option<Direct> {
        let mut a = affine_lanes(self.f, &self.defs, ptr)?;
        a.widened.retain(|w| w.varies_along.last() != Some(&false));
        let unit = a.strides.last() == Some(&Some(1));
        (unit && a.is_checkable()).then_some(Direct {
            ptr,
            mask: None,
            widened: a.widened,
        })
    }

    /// Lane `idx` of the run `v` (in [`Gen::runs`]): lane `(…, 0)` plus the last index in
    /// elements. `None` for lane `(…, 0)` itself, which the caller computes as usual.
    pub(super) fn run_lane(
        &mut self,
        v: Value,
        idx: &[IntValue<'ctx>],
    ) -> Result<Option<BasicValueEnum<'ctx>>> {
        let Some((last, lead)) = idx.split_last() else {
            return Ok(None);
        };
        if last.get_zero_extended_constant() == Some(0) {
            return Ok(None);
        }
        let mut first_idx = lead.to_vec();
        first_idx.push(self.i64c(0));
        let first = self.lane(v, &first_idx)?.into_pointer_value();
        let size = self.ty(v).elem.pointee().map_or(1, |d| d.size_bytes());
        let bytes = self.b.build_int_mul(*last, self.i64c(size as u64), "")?;
        // SAFETY (of the generated code): `run_holds` proved lane `idx` is this address.
        let p = unsafe {
            self.b
                .build_gep(self.ctx.i8_type(), first, &[bytes], "lane.run")?
        };
        Ok(Some(p.into()))
    }

    /// `v` as a load whose lanes along its last axis are consecutive elements, all of them
    /// accessed (no mask left), of dtype `d` in memory, in unchecked code: `w` lanes from
    /// a multiple of `w` are one vector at the first one's pointer (given
    /// [`run_holds`](Self::run_holds)).
    pub(super) fn rows_load(&self, v: Value, d: DType) -> Option<Direct> {
        let (ptr, mask, _) = self.plain_load(v, d)?;
        self.all_true(mask).then(|| self.row_run(ptr)).flatten()
    }

    /// `v` as a rank-1 load whose lanes are consecutive elements and whose mask is not
    /// known all true here, with its mask and `other` (the mask's lanes then select
    /// between a masked vector load and `other`); in unchecked code.
    pub(super) fn masked_rows_load(&self, v: Value, d: DType) -> Option<(Direct, Value, Value)> {
        let (ptr, Some(mask), Some(other)) = self.plain_load(v, d)? else {
            return None;
        };
        (self.ty(v).rank() == 1)
            .then(|| self.row_run(ptr))
            .flatten()
            .map(|run| (run, mask, other))
    }

    /// The pointer, mask and `other` of `v` when it is a lazy, non-volatile load of dtype
    /// `d` in memory, in unchecked code.
    pub(super) fn plain_load(
        &self,
        v: Value,
        d: DType,
    ) -> Option<(Value, Option<Value>, Option<Value>)> {
        if self.reads_checked(v) || !matches!(self.lv.get(&v), Some(Lv::Lazy)) {
            return None;
        }
        let Op::Load {
            ptr,
            mask,
            other,
            hints,
        } = &self.defs.get(&v)?.op
        else {
            return None;
        };
        (!hints.volatile && self.ty(v).dtype() == Some(d)).then_some((*ptr, *mask, *other))
    }

    /// No mask, or one this copy of the code knows is all true.
    pub(super) fn all_true(&self, mask: Option<Value>) -> bool {
        mask.is_none_or(|m| self.true_masks.contains(&m))
    }
}
