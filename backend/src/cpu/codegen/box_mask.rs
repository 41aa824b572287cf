//! Box masks: a bounds check on every axis of a tile, true on a prefix of each.
//!
//! A 2-D load's mask is usually `(rows[:, None] < m) & (cols[None, :] < n)` (tutorial 03's
//! `a` and `b` tiles at the edges of the matrices): lane `(i, j)` is in when `i < p0` and
//! `j < p1`. Each factor is an index mask along one axis (see `prefix`: the rank-1 case),
//! broadcast to the tile; their conjunction is the box `0..p0 × 0..p1`. The box is exact,
//! every lane past it false, when no factor's index `i + c` wraps in i32 (checked at run
//! time: `i32::MIN <= c` and `c + len - 1 <= i32::MAX`).

use super::Gen;
use crate::llvm::Result;
use inkwell::values::IntValue;
use inkwell::IntPredicate;
use tritium_dsl::ir::{BinOp, Op, Value};

/// The box of a mask: lane `idx` is true exactly when `idx[a] < p[a]` on every axis `a`,
/// wherever `exact` holds.
pub(super) struct BoxMask<'ctx> {
    /// Per axis, the lanes `0..p` in (i64, in `0..=len`).
    pub p: Vec<IntValue<'ctx>>,
    /// The mask is the box: no factor's index wraps.
    pub exact: IntValue<'ctx>,
}

impl<'ctx> Gen<'ctx, '_> {
    /// The box of the bool tile `m` when it is a conjunction of index masks along single
    /// axes (broadcast to its shape); `None` for any other mask (what was emitted on the
    /// way is pure and dead).
    pub(super) fn box_mask(&mut self, m: Value) -> Result<Option<BoxMask<'ctx>>> {
        let shape = self.ty(m).shape.clone();
        let mut boxed = BoxMask {
            p: shape.iter().map(|n| self.i64c(*n as u64)).collect(),
            exact: self.ctx.bool_type().const_all_ones(),
        };
        Ok(self.box_factors(m, 0, &mut boxed)?.then_some(boxed))
    }

    /// Narrows `boxed` by the factors of `m`, whose axis `a` is the box's axis `offset + a`;
    /// false when a factor is not an index mask along one axis.
    fn box_factors(&mut self, m: Value, offset: usize, boxed: &mut BoxMask<'ctx>) -> Result<bool> {
        match self.lazy_op(m).cloned() {
            Some(Op::Binary(BinOp::And, a, b)) => {
                Ok(self.box_factors(a, offset, boxed)? && self.box_factors(b, offset, boxed)?)
            }
            // Missing leading axes are the new ones; size-1 axes repeat.
            Some(Op::Broadcast(x)) => {
                let extra = self.ty(m).rank() - self.ty(x).rank();
                self.box_factors(x, offset + extra, boxed)
            }
            // One lane (a row index of a one-row tile): all lanes in, or none.
            Some(Op::Cmp(..)) if self.ty(m).shape.iter().all(|n| *n == 1) => {
                let one: Vec<IntValue> = self.ty(m).shape.iter().map(|_| self.i64c(0)).collect();
                let x = self.lane(m, &one)?.into_int_value();
                let none = self.i64c(0);
                boxed.p[offset] = self
                    .b
                    .build_select(x, boxed.p[offset], none, "")?
                    .into_int_value();
                Ok(true)
            }
            Some(Op::Cmp(..)) => {
                let Some((axis, len)) = single_axis(&self.ty(m).shape) else {
                    return Ok(false);
                };
                let Some((p, _, c)) = self.true_prefix(m, len)? else {
                    return Ok(false);
                };
                let i64t = self.ctx.i64_type();
                let bl = self.b;
                let min = i64t.const_int(i32::MIN as i64 as u64, true);
                let max_c = i64t.const_int((i64::from(i32::MAX) - len as i64 + 1) as u64, true);
                let low = bl.build_int_compare(IntPredicate::SGE, c, min, "")?;
                let high = bl.build_int_compare(IntPredicate::SLE, c, max_c, "")?;
                let fits = bl.build_and(low, high, "")?;
                boxed.exact = bl.build_and(boxed.exact, fits, "")?;
                let at = offset + axis;
                boxed.p[at] = self.smin64(boxed.p[at], p)?;
                Ok(true)
            }
            _ => Ok(false),
        }
    }
}

/// The one axis of `shape` longer than 1, and its length.
pub(super) fn single_axis(shape: &[usize]) -> Option<(usize, usize)> {
    let mut long = shape.iter().enumerate().filter(|(_, n)| **n > 1);
    let (axis, len) = long.next()?;
    long.next().is_none().then_some((axis, *len))
}

/// The length of the one axis of `shape` that may be longer than 1: a rank-1 tile's, or
/// the long axis of a tile with one (`None` for scalars and tiles with two or more).
pub(super) fn long_axis_len(shape: &[usize]) -> Option<usize> {
    match shape {
        [n] => Some(*n),
        _ => single_axis(shape).map(|(_, n)| n),
    }
}
