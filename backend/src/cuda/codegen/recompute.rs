//! Broadcasts of index expressions, computed in place.
//!
//! A broadcast moves elements between threads, through shared memory and two barriers.
//! When the broadcast value depends on indices alone (aranges, constants, scalars and
//! elementwise ops over them, as masks like `offs_m[:, None] < m` and pointer offsets
//! are), each slot of the result evaluates it at its own index instead: no exchange, no
//! barrier. This is what Triton's slice layouts give an `arange`.

use super::Gen;
use crate::llvm::{Emitter, Result};
use inkwell::values::{BasicValueEnum, IntValue};
use std::collections::HashSet;
use tritium_dsl::ir::{Op, Value};

/// The most ops an expression recomputed per slot may have (larger ones are exchanged);
/// hints are not ops, and an op used twice (a tensor descriptor's index, compared with
/// 0 and with the dim's size) is counted once, as LLVM computes it once.
const MAX_OPS: usize = 32;

impl<'ctx> Gen<'ctx, '_> {
    /// Defines `r`, the broadcast of `x`, by evaluating `x` at every slot's index when `x`
    /// is an index expression; false (nothing emitted) otherwise.
    pub(super) fn broadcast_in_place(&mut self, r: Value, x: Value) -> Result<bool> {
        if self.ty(x).is_scalar() || !self.is_index_value(x) {
            return Ok(false);
        }
        let (rs, xs) = (self.ty(r).shape.clone(), self.ty(x).shape.clone());
        let numel = self.ty(r).numel();
        let slots = (0..self.slots(numel))
            .map(|j| {
                let lin = self.clamped_lin(numel, j)?;
                let idx = self.unravel(&rs, lin)?;
                let at = self.broadcast_source(&xs, &idx);
                self.eval_at(x, &at)
            })
            .collect::<Result<_>>()?;
        self.define(r, slots);
        Ok(true)
    }

    /// The index into a broadcast's input of shape `xs` that element `idx` of the result
    /// reads: dims aligned on the right, size-1 dims at 0.
    pub(super) fn broadcast_source(
        &self,
        xs: &[usize],
        idx: &[IntValue<'ctx>],
    ) -> Vec<IntValue<'ctx>> {
        let off = idx.len() - xs.len();
        xs.iter()
            .enumerate()
            .map(|(k, d)| if *d == 1 { self.i32c(0) } else { idx[off + k] })
            .collect()
    }

    /// Whether `v` is computed from indices, constants and scalars alone, in at most
    /// `MAX_OPS` ops: [`Self::eval_at`] gives any of its elements.
    pub(super) fn is_index_value(&self, v: Value) -> bool {
        let mut budget = MAX_OPS;
        self.is_index_expression(v, &mut budget, &mut HashSet::new())
    }

    /// Whether `v` is computed from indices, constants and scalars alone, in at most
    /// `budget` ops besides those in `seen` (each counted once).
    fn is_index_expression(&self, v: Value, budget: &mut usize, seen: &mut HashSet<Value>) -> bool {
        if self.ty(v).is_scalar() || !seen.insert(v) {
            return true;
        }
        let Some(inst) = self.defs.get(&v) else {
            // A loop-carried value or a block argument.
            return false;
        };
        // A hint (`multiple_of`, `max_contiguous`) is its operand at run time: no op.
        if let Op::Hint { x, .. } = &inst.op {
            return self.is_index_expression(*x, budget, seen);
        }
        if *budget == 0 {
            return false;
        }
        *budget -= 1;
        match &inst.op {
            Op::Arange { .. } | Op::Const(_) | Op::Splat(_) => true,
            Op::ExpandDims { x, .. } | Op::Broadcast(x) | Op::Reshape(x) => {
                self.is_index_expression(*x, budget, seen)
            }
            op if op.is_pointwise() => inst
                .op
                .operands()
                .iter()
                .all(|o| self.is_index_expression(*o, budget, seen)),
            _ => false,
        }
    }

    /// The element of index expression `v` at multi-index `idx` (of `v`'s shape).
    pub(super) fn eval_at(
        &mut self,
        v: Value,
        idx: &[IntValue<'ctx>],
    ) -> Result<BasicValueEnum<'ctx>> {
        if self.ty(v).is_scalar() {
            return self.scalar_at(v);
        }
        let inst = self.defs[&v];
        match &inst.op {
            Op::Arange { start, .. } => Ok(self
                .b
                .build_int_add(idx[0], self.i32c(*start as u64), "")?
                .into()),
            Op::Const(c) => {
                let d = self.ty(v).dtype().expect("numeric constant");
                Ok(self.const_value(*c, d))
            }
            Op::Splat(x) => Ok(self.scalar_at(*x)?),
            Op::ExpandDims { x, axis } => {
                let mut at = idx.to_vec();
                at.remove(*axis as usize);
                self.eval_at(*x, &at)
            }
            Op::Hint { x, .. } => self.eval_at(*x, idx),
            Op::Broadcast(x) => {
                let xs = self.ty(*x).shape.clone();
                let at = self.broadcast_source(&xs, idx);
                self.eval_at(*x, &at)
            }
            // The same row-major element in another shape.
            Op::Reshape(x) => {
                let (rs, xs) = (self.ty(v).shape.clone(), self.ty(*x).shape.clone());
                let lin = self.ravel(&rs, idx)?;
                let at = self.unravel(&xs, lin)?;
                self.eval_at(*x, &at)
            }
            op => {
                let args: Vec<BasicValueEnum<'ctx>> = op
                    .operands()
                    .iter()
                    .map(|o| self.eval_at(*o, idx))
                    .collect::<Result<_>>()?;
                self.element(inst, &args)
            }
        }
    }
}
