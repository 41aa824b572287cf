//! Packing a `dot` operand into the scratch layout its micro-kernel reads.
//!
//! `a` is packed row-major. `b` is packed in panels of the micro-kernel's width (`NR`
//! columns, two vector registers) when its rows would crowd L1: the micro-kernel reads one
//! panel from top to bottom, whose rows are then `NR` elements apart instead of the tile's
//! width. In a row-major `64 × 128` f32 tile the rows are 512 bytes apart and a panel's 64
//! rows fall on 8 of L1's 64 sets, 8 rows per set, a whole set's ways; at 256 columns 16
//! rows per set, more than it holds. Panels put a panel's rows in consecutive lines, so
//! wider tiles (fewer copies of `a` and `b` per flop) run at the narrow ones' speed:
//! tutorial 03 with 96 × 128 blocks runs at 0.80–0.96 of OpenBLAS at 1024³ (0.69–0.76
//! with rows; 96 × 64 blocks 0.76–0.84).
//! Narrow tiles keep rows: 64 f32 columns put 4 rows in a set, and attention with a head
//! dimension of 64 ran 2–15% slower with panels.

use super::base::Packing;
use super::edge_copy::EdgeLoad;
use crate::cpu::codegen::{Gen, Lv};
use crate::llvm::{Emitter, Result};
use inkwell::values::{IntValue, PointerValue};
use tritium_dsl::ir::{DType, Elem, Type, Value};

impl<'ctx> Gen<'ctx, '_> {
    /// `v` as a buffer of dtype `d` (compute form, which is the storage form) laid out as
    /// `packing`; a tile already in a row-major buffer of that dtype is used as is. The
    /// all-true copy is kept in `cache` across programs (see `panel_cache`), a partial box
    /// of the load `edge` is copied by rows (see `edge_copy`).
    pub(super) fn packed(
        &mut self,
        v: Value,
        d: DType,
        packing: Packing,
        cache: Option<&super::panel_cache::PanelCache<'ctx>>,
        edge: Option<&EdgeLoad<'ctx>>,
    ) -> Result<PointerValue<'ctx>> {
        let vt = self.ty(v).clone();
        if let (Some(Lv::Buf(p)), Packing::Rows { .. }) = (self.lv.get(&v), packing) {
            if vt.dtype() == Some(d) {
                return Ok(*p);
            }
        }
        let from = vt.dtype().expect("numbers");
        let ty = Type::tile(Elem::Scalar(d), vt.shape.clone());
        let buf = self.alloc_buf(&ty)?;
        let et = self.compute_ty(d);
        let mask = self.load_mask_in(v);
        let lanes = crate::cpu::codegen::vector_lanes::vector_bytes() / d.size_bytes().max(1);
        // Rows of the source, the last loop over consecutive elements on both sides: a
        // panel's row is a run of the source's row.
        let nest = match packing {
            Packing::Rows { .. } => vt.shape.clone(),
            Packing::Panels { width, .. } => vec![vt.shape[0], vt.shape[1] / width, width],
        };
        // Plain copies' rows are vectorized already: unrolling them only adds code (matmul
        // compiles 20% faster, runs no slower). Converting copies (f16, bf16) keep it.
        let lane_copy = |g: &mut Self, buf: PointerValue<'ctx>| {
            let mut copy = |g: &mut Self, idx: &[IntValue<'ctx>]| {
                let (p, at) = match (packing, idx) {
                    (Packing::Panels { width, .. }, &[r, panel, within]) => {
                        let c = g.b.build_int_mul(panel, g.i64c(width as u64), "")?;
                        let c = g.b.build_int_add(c, within, "")?;
                        (packing.panel_elem(g, buf, et, panel, r, within)?, [r, c])
                    }
                    (_, &[r, c]) => (packing.elem(g, buf, et, r, c)?, [r, c]),
                    _ => unreachable!("a dot operand is a matrix"),
                };
                let x = g.lane(v, &at)?;
                let x = g.cast(x, from, d)?;
                g.b.build_store(p, x)?;
                Ok(())
            };
            match from == d {
                true => g.loop_nest_rows_rolled(&nest, &mut copy),
                false => g.loop_nest(&nest, &mut copy),
            }
        };
        let mut copy_into = |g: &mut Self, to: PointerValue<'ctx>| {
            let mut into = |g: &mut Self| lane_copy(g, to);
            if g.pack_transposed(v, d, to, packing, lanes, &mut into)? {
                return Ok(());
            }
            lane_copy(g, to)
        };
        if cache.is_none() && edge.is_none() {
            self.versioned(mask, (&[v], &[]), &mut |g| copy_into(g, buf))?;
            return Ok(buf);
        }
        // Where this program's copy went: the cache's slot or `buf`.
        let ptr_t = self.ctx.ptr_type(Default::default());
        let at = self.entry_alloca(ptr_t.into())?;
        let mut general = |g: &mut Self| {
            g.versioned(mask, (&[v], &[]), &mut |g| {
                let to = match cache.filter(|c| g.may_use(c)) {
                    Some(cache) => g.cached_copy(cache, buf, &mut copy_into)?,
                    None => {
                        copy_into(g, buf)?;
                        buf
                    }
                };
                g.b.build_store(at, to)?;
                Ok(())
            })
        };
        match edge {
            Some(e) => {
                let partial_box = self.edge_copy_applies(e)?;
                let mut by_rows = |g: &mut Self| {
                    g.edge_copy(e, d, packing, buf)?;
                    g.b.build_store(at, buf)?;
                    Ok(())
                };
                self.when_else(partial_box, &mut by_rows, &mut general)?;
            }
            None => general(self)?,
        }
        Ok(self.b.build_load(ptr_t, at, "packed")?.into_pointer_value())
    }
}
