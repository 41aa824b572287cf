//! `w` consecutive lanes along the last axis of a tile as one LLVM vector, for reductions
//! that combine a vector of lanes at a time and for what masks and `other` values are made
//! of. Known ops are computed on vectors: constants, splats, aranges, broadcasts and
//! `expand_dims` (a size-1 last axis repeats one lane), `select`, compares (as `compare`
//! does one pair), `i32`/`i64` add, sub and mul, and/or of bools, f32/f64 add, sub, mul
//! and div (one IEEE operation per lane either way), and reads of scratch buffers (one
//! vector load of the row). Any other op's lanes are computed one by one and inserted (the
//! same values, more code): before, attention's `max(where(valid, qk, -1e6), 1)` built
//! every vector that way, and LLVM turned each lane's select of a buffer read into a branch.

use super::{Gen, Lv};
use crate::llvm::{Emitter, Result};
use inkwell::types::{BasicTypeEnum, VectorType};
use inkwell::values::{BasicValueEnum, IntValue, VectorValue};
use tritium_dsl::ir::{BinOp, DType, Elem, Op, Value};

impl<'ctx> Gen<'ctx, '_> {
    /// Lanes `base..base + w` of the rank-1 tile `v`, in compute form.
    pub(super) fn vector_lanes(
        &mut self,
        v: Value,
        base: IntValue<'ctx>,
        w: usize,
    ) -> Result<VectorValue<'ctx>> {
        self.row_lanes(v, &[base], w)
    }

    /// Lanes `(idx[0], …, idx[r-1] + j)` for `j < w` of the rank-`r` tile `v` (`r ≥ 1`; the
    /// caller keeps them inside the last axis), in compute form.
    pub(super) fn row_lanes(
        &mut self,
        v: Value,
        idx: &[IntValue<'ctx>],
        w: usize,
    ) -> Result<VectorValue<'ctx>> {
        if let Some(x) = self.row_as_vector(v, idx, w)? {
            return Ok(x);
        }
        let et = self.compute_ty(self.dtype_of(v));
        let mut out = vec_type(et, w).get_poison();
        let last = idx.len() - 1;
        let mut at = idx.to_vec();
        for j in 0..w {
            at[last] = self.b.build_int_add(idx[last], self.i64c(j as u64), "")?;
            let x = self.lane(v, &at)?;
            let j = self.ctx.i32_type().const_int(j as u64, false);
            out = self.b.build_insert_element(out, x, j, "")?;
        }
        Ok(out)
    }

    /// `w` copies of the scalar `x`.
    fn splat_vector(&self, x: BasicValueEnum<'ctx>, w: usize) -> Result<VectorValue<'ctx>> {
        self.splat(x, vec_type(x.get_type(), w), w)
    }

    /// [`row_lanes`](Self::row_lanes) computed on vectors when `v` is made of the ops it
    /// knows (its operands may still be inserted lane by lane).
    fn row_as_vector(
        &mut self,
        v: Value,
        idx: &[IntValue<'ctx>],
        w: usize,
    ) -> Result<Option<VectorValue<'ctx>>> {
        if self.true_masks.contains(&v) || self.false_lanes.contains(&v) {
            let t = self
                .ctx
                .bool_type()
                .const_int(self.true_masks.contains(&v) as u64, false);
            return Ok(Some(self.splat_vector(t.into(), w)?));
        }
        let ty = self.ty(v).clone();
        let Elem::Scalar(d) = ty.elem else {
            return Ok(None);
        };
        let inst = match self.lv.get(&v).copied() {
            Some(Lv::Scalar(s)) => return Ok(Some(self.splat_vector(s, w)?)),
            // A row of a scratch buffer is contiguous; read it whole where memory holds
            // the compute form (not bools, not f16/bf16/fp8).
            Some(Lv::Buf(buf)) if self.storage_ty(d) == self.compute_ty(d) => {
                let p = self.buf_elem(buf, &ty, idx)?;
                let vt = vec_type(self.compute_ty(d), w);
                return Ok(Some(self.load_vec(vt, p, d.size_bytes() as u32)?));
            }
            Some(Lv::Lazy) => self.defs[&v],
            _ => return Ok(None),
        };
        let last = idx.len() - 1;
        let int = |d: DType| matches!(d, DType::I32 | DType::I64);
        let exact_float = |d: DType| matches!(d, DType::F32 | DType::F64);
        Ok(match &inst.op {
            Op::Const(c) => Some(self.splat_vector(self.const_value(*c, d), w)?),
            Op::Splat(x) if self.ty(*x).is_scalar() => {
                let x = self.lane(*x, &[])?;
                Some(self.splat_vector(x, w)?)
            }
            Op::Hint { x, .. } => Some(self.row_lanes(*x, idx, w)?),
            Op::Arange { start, .. } => {
                // Lane `i` is `i + start` truncated to i32, as `op_lane` computes it.
                let first = self.b.build_int_add(idx[0], self.i64c(*start as u64), "")?;
                let i32t = self.ctx.i32_type();
                let first = self.b.build_int_truncate(first, i32t, "")?;
                let steps: Vec<_> = (0..w).map(|j| i32t.const_int(j as u64, false)).collect();
                let first = self.splat_vector(first.into(), w)?;
                let steps = VectorType::const_vector(&steps);
                Some(self.b.build_int_add(first, steps, "")?)
            }
            Op::Broadcast(x) => {
                let mapped = self.broadcast_index(*x, idx);
                if self.ty(*x).shape.last().is_none_or(|n| *n == 1) {
                    let x = self.lane(*x, &mapped)?;
                    Some(self.splat_vector(x, w)?)
                } else {
                    Some(self.row_lanes(*x, &mapped, w)?)
                }
            }
            Op::ExpandDims { x, axis } if (*axis as usize) < last => {
                let mut mapped = idx.to_vec();
                mapped.remove(*axis as usize);
                Some(self.row_lanes(*x, &mapped, w)?)
            }
            Op::Select(c, a, b) => {
                let c = self.row_lanes(*c, idx, w)?;
                let (x, y) = (self.row_lanes(*a, idx, w)?, self.row_lanes(*b, idx, w)?);
                Some(self.b.build_select(c, x, y, "")?.into_vector_value())
            }
            Op::Binary(op, a, b) => {
                let known = match op {
                    BinOp::Add | BinOp::Sub | BinOp::Mul => int(d) || exact_float(d),
                    BinOp::Div => exact_float(d),
                    BinOp::And | BinOp::Or => d == DType::Bool,
                    _ => false,
                };
                if !known {
                    return Ok(None);
                }
                let (x, y) = (self.row_lanes(*a, idx, w)?, self.row_lanes(*b, idx, w)?);
                let bl = self.b;
                Some(match op {
                    BinOp::Add if d.is_float() => bl.build_float_add(x, y, "")?,
                    BinOp::Sub if d.is_float() => bl.build_float_sub(x, y, "")?,
                    BinOp::Mul if d.is_float() => bl.build_float_mul(x, y, "")?,
                    BinOp::Div => bl.build_float_div(x, y, "")?,
                    BinOp::Add => bl.build_int_add(x, y, "")?,
                    BinOp::Sub => bl.build_int_sub(x, y, "")?,
                    BinOp::Mul => bl.build_int_mul(x, y, "")?,
                    BinOp::And => bl.build_and(x, y, "")?,
                    _ => bl.build_or(x, y, "")?,
                })
            }
            Op::Cmp(p, a, b) if matches!(self.ty(*a).elem, Elem::Scalar(_)) => {
                // Lanes in compute form, compared as `compare` compares one pair.
                let (x, y) = (self.row_lanes(*a, idx, w)?, self.row_lanes(*b, idx, w)?);
                Some(self.emit().compare_vectors(*p, self.dtype_of(*a), x, y)?)
            }
            _ => None,
        })
    }
}

/// Bytes in one vector register of the host CPU.
pub(super) fn vector_bytes() -> usize {
    let features = inkwell::targets::TargetMachine::get_host_cpu_features().to_string();
    let has = |f: &str| features.split(',').any(|x| x == f);
    if has("+avx512f") {
        64
    } else if has("+avx") {
        32
    } else {
        16
    }
}

/// The LLVM vector of `lanes` elements of `et` (a number type).
pub(super) fn vec_type(et: BasicTypeEnum<'_>, lanes: usize) -> VectorType<'_> {
    match et {
        BasicTypeEnum::FloatType(t) => t.vec_type(lanes as u32),
        BasicTypeEnum::IntType(t) => t.vec_type(lanes as u32),
        _ => unreachable!("vectors of numbers only"),
    }
}
