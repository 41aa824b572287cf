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
use tritium_dsl::ir::{affine_lanes, Op, Value};

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
}
