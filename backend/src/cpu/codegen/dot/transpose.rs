//! Packing a `dot` operand that is stored transposed: a load whose lanes run down the
//! columns (`kᵀ` in attention, `b.T` in a matmul) is copied into the row-major buffer the
//! micro-kernel reads by square blocks, each read as one vector per column and transposed
//! in registers, instead of one gathered element per lane.
//!
//! The lanes are `first + r + c·s` (`dsl::ir::affine`: unit stride along the rows, any
//! stride along the columns), so column `c` of a block is the vector at lane `(r0, c)`'s
//! address. Narrow offsets that are widened on the way are checked at run time not to wrap
//! (as for Simd custom ops' in-place inputs); the mask is left to the caller's versioning
//! (its all-true copy), checked mode always copies lane by lane.

use super::base::Packing;
use crate::cpu::codegen::custom::Direct;
use crate::cpu::codegen::Gen;
use crate::llvm::{Emitter, Result};
use inkwell::types::VectorType;
use inkwell::values::{IntValue, PointerValue, VectorValue};
use tritium_dsl::ir::{affine_lanes, Affine, DType, Value};

impl<'ctx> Gen<'ctx, '_> {
    /// Fills `buf` (laid out as `packing` says, of dtype `d`) with tile `v` by transposed
    /// blocks of up to `lanes` (a vector of `d`, which divides a panel's width) when `v` is
    /// such a load, behind the run-time checks, with `lane_copy` where they fail; returns
    /// false, emitting nothing, when it is not.
    pub(super) fn pack_transposed(
        &mut self,
        v: Value,
        d: DType,
        buf: PointerValue<'ctx>,
        packing: Packing,
        lanes: usize,
        lane_copy: &mut dyn FnMut(&mut Self) -> Result<()>,
    ) -> Result<bool> {
        let shape = self.ty(v).shape.clone();
        // Square blocks of the widest power of two up to a vector that divides both dims.
        let mut w = lanes;
        while w > 4 && shape.iter().any(|n| n % w != 0) {
            w /= 2;
        }
        let Some(direct) = self.transposed_load(v, d, w) else {
            return Ok(false);
        };
        let ok = self.run_holds(&direct)?;
        let (rows, cols) = (shape[0], shape[1]);
        let mut copy = |g: &mut Self| {
            g.counted_loop(cols / w, super::LoopUnroll::Never, &mut |g, cb| {
                g.counted_loop(rows / w, super::LoopUnroll::Never, &mut |g, rb| {
                    g.transpose_block(direct.ptr, d, buf, packing, [rb, cb], w)
                })
            })
        };
        self.when_else(ok, &mut copy, lane_copy)?;
        Ok(true)
    }

    /// `v` as a load whose lanes are `first + r + c·s` with `s ≠ 1` (the row-major case
    /// needs no transposing; `s` may be known only at run time, as a matmul's `stride_bn`),
    /// all of them accessed (no mask left), of dtype `d` in memory (no conversion), with
    /// both dims multiples of `lanes` (at least 4), in unchecked code.
    fn transposed_load(&self, v: Value, d: DType, lanes: usize) -> Option<Direct> {
        let t = self.ty(v);
        let shape_ok = t.rank() == 2 && t.shape.iter().all(|n| n % lanes == 0);
        if lanes < 4 || !shape_ok {
            return None;
        }
        let (ptr, mut a) = self.unmasked_load(v, d)?;
        // A widened offset equal down each column (`cols · stride` with a run-time stride)
        // moves a whole column alike, and each column's address is computed as its lane's
        // is, so the runs down the columns hold whether it wraps or not: only the offsets
        // that vary down a column are checked (as `row_run` does along a row).
        a.widened.retain(|w| w.varies_along.first() != Some(&false));
        let transposed = a.is_checkable() && a.strides[0] == Some(1) && a.strides[1] != Some(1);
        transposed.then_some(Direct {
            ptr,
            mask: None,
            widened: a.widened,
        })
    }

    /// `v`'s pointer operand and lanes when `v` is a lazy, non-volatile load of dtype `d`
    /// with no mask left (none, or one this copy of the code knows is all true), in
    /// unchecked code (the caller sees that its widened offsets can be checked).
    fn unmasked_load(&self, v: Value, d: DType) -> Option<(Value, Affine)> {
        let (ptr, mask, _) = self.plain_load(v, d)?;
        if !self.all_true(mask) {
            return None;
        }
        Some((ptr, affine_lanes(self.f, &self.defs, ptr)?))
    }

    /// Rows `rb·W..` and columns `cb·W..` (`W = lanes`) of the buffer from the `W` column
    /// vectors at `ptr`'s lanes `(rb·W, cb·W + j)`. A row of the block is `W` consecutive
    /// elements of the buffer in either packing (a panel is a multiple of `W` wide).
    fn transpose_block(
        &mut self,
        ptr: Value,
        d: DType,
        buf: PointerValue<'ctx>,
        packing: Packing,
        [rb, cb]: [IntValue<'ctx>; 2],
        lanes: usize,
    ) -> Result<()> {
        let et = self.compute_ty(d);
        let vt = crate::cpu::codegen::vector_lanes::vec_type(et, lanes);
        let size = d.size_bytes() as u32;
        let w = self.i64c(lanes as u64);
        let r0 = self.b.build_int_mul(rb, w, "")?;
        let c0 = self.b.build_int_mul(cb, w, "")?;
        let mut columns: Vec<VectorValue> = Vec::with_capacity(lanes);
        for j in 0..lanes {
            let c = self.b.build_int_add(c0, self.i64c(j as u64), "")?;
            let p = self.lane(ptr, &[r0, c])?.into_pointer_value();
            columns.push(self.load_vec(vt, p, size)?);
        }
        for (k, row) in self.transpose(columns)?.into_iter().enumerate() {
            let r = self.b.build_int_add(r0, self.i64c(k as u64), "")?;
            let p = packing.elem(self, buf, et, r, c0)?;
            let st = self.b.build_store(p, row)?;
            st.set_alignment(size)?;
        }
        Ok(())
    }

    /// The transpose of the square matrix whose rows are `rows` (a power of two of them):
    /// at each step `h = W/2, W/4, …, 1`, rows `i` and `i + h` (`i & h == 0`) exchange
    /// lanes: row `i` takes row `i + h`'s lanes `k - h` where `k & h ≠ 0`, row `i + h` takes
    /// row `i`'s lanes `k + h` where `k & h = 0`. That swaps the off-diagonal `h × h`
    /// blocks of every `2h × 2h` block; after the step with `h = 1` every element `(j, k)`
    /// is at `(k, j)`. `W·log2(W)` two-vector shuffles in all.
    fn transpose(&self, mut rows: Vec<VectorValue<'ctx>>) -> Result<Vec<VectorValue<'ctx>>> {
        let w = rows.len();
        debug_assert!(w.is_power_of_two());
        let i32t = self.ctx.i32_type();
        let mask = |f: &dyn Fn(usize) -> usize| {
            VectorType::const_vector(
                &(0..w)
                    .map(|k| i32t.const_int(f(k) as u64, false))
                    .collect::<Vec<_>>(),
            )
        };
        let mut h = w / 2;
        while h >= 1 {
            // Lane k of the new row i: row i's own lane k when k & h == 0, else row i+h's
            // lane k - h (index w + k - h of the two-vector shuffle); the new row i+h the
            // mirror image.
            let low = mask(&|k| if k & h == 0 { k } else { w + k - h });
            let high = mask(&|k| if k & h == 0 { k + h } else { w + k });
            for i in (0..w).filter(|i| i & h == 0) {
                let (a, b) = (rows[i], rows[i + h]);
                rows[i] = self.b.build_shuffle_vector(a, b, low, "transposed")?;
                rows[i + h] = self.b.build_shuffle_vector(a, b, high, "transposed")?;
            }
            h /= 2;
        }
        Ok(rows)
    }
}
