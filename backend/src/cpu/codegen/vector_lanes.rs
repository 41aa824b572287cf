//! `w` consecutive lanes of a rank-1 tile as one LLVM vector, for what masks and `other`
//! values are made of: constants, splats, aranges, `i32`/`i64` add, sub and mul, integer
//! compares, and/or of bools. Any other op's lanes are computed one by one and inserted
//! (the same values, more code).

use super::{Gen, Lv};
use crate::llvm::Result;
use inkwell::types::VectorType;
use inkwell::values::{BasicValueEnum, IntValue, VectorValue};
use inkwell::IntPredicate;
use tritium_dsl::ir::{BinOp, CmpPred, DType, Op, Value};

impl<'ctx> Gen<'ctx, '_> {
    /// Lanes `base..base + w` of the rank-1 tile `v`, in compute form.
    pub(super) fn vector_lanes(
        &mut self,
        v: Value,
        base: IntValue<'ctx>,
        w: usize,
    ) -> Result<VectorValue<'ctx>> {
        if let Some(x) = self.lanes_as_vector(v, base, w)? {
            return Ok(x);
        }
        let et = self.compute_ty(self.dtype_of(v));
        let mut out = super::dot::vec_type(et, w).get_poison();
        for j in 0..w {
            let i = self.b.build_int_add(base, self.i64c(j as u64), "")?;
            let x = self.lane(v, &[i])?;
            let at = self.ctx.i32_type().const_int(j as u64, false);
            out = self.b.build_insert_element(out, x, at, "")?;
        }
        Ok(out)
    }

    /// `w` copies of the scalar `x`.
    fn splat_vector(&self, x: BasicValueEnum<'ctx>, w: usize) -> Result<VectorValue<'ctx>> {
        self.splat(x, super::dot::vec_type(x.get_type(), w), w)
    }

    /// [`vector_lanes`](Self::vector_lanes) when `v` is made of the ops it knows.
    fn lanes_as_vector(
        &mut self,
        v: Value,
        base: IntValue<'ctx>,
        w: usize,
    ) -> Result<Option<VectorValue<'ctx>>> {
        if self.true_masks.contains(&v) {
            let t = self.ctx.bool_type().const_all_ones();
            return Ok(Some(self.splat_vector(t.into(), w)?));
        }
        if self.ty(v).rank() > 1 {
            return Ok(None);
        }
        let inst = match self.lv.get(&v).copied() {
            Some(Lv::Scalar(s)) => return Ok(Some(self.splat_vector(s, w)?)),
            Some(Lv::Lazy) => self.defs[&v],
            _ => return Ok(None),
        };
        let int = |d: DType| matches!(d, DType::I32 | DType::I64);
        Ok(match &inst.op {
            Op::Const(c) => {
                let x = self.const_value(*c, self.dtype_of(v));
                Some(self.splat_vector(x, w)?)
            }
            Op::Splat(x) if self.ty(*x).is_scalar() => {
                let x = self.lane(*x, &[])?;
                Some(self.splat_vector(x, w)?)
            }
            Op::Hint { x, .. } => self.lanes_as_vector(*x, base, w)?,
            Op::Arange { start, .. } => {
                // Lane `i` is `i + start` truncated to i32, as `op_lane` computes it.
                let first = self.b.build_int_add(base, self.i64c(*start as u64), "")?;
                let i32t = self.ctx.i32_type();
                let first = self.b.build_int_truncate(first, i32t, "")?;
                let steps: Vec<_> = (0..w).map(|j| i32t.const_int(j as u64, false)).collect();
                let first = self.splat_vector(first.into(), w)?;
                let steps = VectorType::const_vector(&steps);
                Some(self.b.build_int_add(first, steps, "")?)
            }
            Op::Binary(op, a, b) => {
                let d = self.dtype_of(v);
                let known = match op {
                    BinOp::Add | BinOp::Sub | BinOp::Mul => int(d),
                    BinOp::And | BinOp::Or => d == DType::Bool,
                    _ => false,
                };
                let (Some(x), Some(y)) = (
                    known
                        .then(|| self.lanes_as_vector(*a, base, w))
                        .transpose()?
                        .flatten(),
                    known
                        .then(|| self.lanes_as_vector(*b, base, w))
                        .transpose()?
                        .flatten(),
                ) else {
                    return Ok(None);
                };
                Some(match op {
                    BinOp::Add => self.b.build_int_add(x, y, "")?,
                    BinOp::Sub => self.b.build_int_sub(x, y, "")?,
                    BinOp::Mul => self.b.build_int_mul(x, y, "")?,
                    BinOp::And => self.b.build_and(x, y, "")?,
                    _ => self.b.build_or(x, y, "")?,
                })
            }
            Op::Cmp(p, a, b) if int(self.dtype_of(*a)) => {
                let (Some(x), Some(y)) = (
                    self.lanes_as_vector(*a, base, w)?,
                    self.lanes_as_vector(*b, base, w)?,
                ) else {
                    return Ok(None);
                };
                use IntPredicate as I;
                let pred = match p {
                    CmpPred::Eq => I::EQ,
                    CmpPred::Ne => I::NE,
                    CmpPred::Lt => I::SLT,
                    CmpPred::Le => I::SLE,
                    CmpPred::Gt => I::SGT,
                    CmpPred::Ge => I::SGE,
                };
                Some(self.b.build_int_compare(pred, x, y, "")?)
            }
            _ => None,
        })
    }
}
