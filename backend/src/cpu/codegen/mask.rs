//! "Is every lane of this mask true?" — the test in front of a mask-versioned loop.
//!
//! Masks are usually bounds checks on index tiles (`pid * B + arange(0, B) < n`, and `&` of
//! such on 2-D tiles). For those the answer has a closed form: the range of the index tile
//! follows from interval arithmetic on its scalar inputs, and the mask is all true when the
//! whole range compares true. The interval arithmetic uses overflow-checked operations, and
//! any overflow answers "no" (the masked copy of the loop then runs, which is always
//! correct): when no interval bound overflows, no lane's value wraps either, so every lane
//! lies inside the computed range. Anything else falls back to a loop over the lanes.

use super::{Gen, Lv};
use crate::llvm::{Emitter, Result};
use inkwell::values::{BasicValueEnum, IntValue};
use inkwell::IntPredicate;
use tritium_dsl::ir::{BinOp, CmpPred, Const, DType, Elem, Op, Value};

/// The range of an integer tile: every lane is in `[lo, hi]` when `ok` holds.
struct Range<'ctx> {
    lo: IntValue<'ctx>,
    hi: IntValue<'ctx>,
    ok: IntValue<'ctx>,
}

impl<'ctx> Gen<'ctx, '_> {
    /// An i1 that is true when every lane of the bool tile `m` (of `shape`) is true.
    pub(super) fn all_lanes_true(&mut self, m: Value, shape: &[usize]) -> Result<IntValue<'ctx>> {
        Ok(self.all_lanes_true_form(m, shape)?.0)
    }

    /// [`all_lanes_true`](Self::all_lanes_true), and whether the test has a closed form
    /// (`m` is a bounds check on index tiles, true everywhere but in edge blocks).
    pub(super) fn all_lanes_true_form(
        &mut self,
        m: Value,
        shape: &[usize],
    ) -> Result<(IntValue<'ctx>, bool)> {
        if let Some(all) = self.all_true_closed_form(m)? {
            return Ok((all, true));
        }
        let all = self.entry_alloca(self.ctx.bool_type().into())?;
        self.b
            .build_store(all, self.ctx.bool_type().const_all_ones())?;
        self.loop_nest(shape, &mut |g, idx| {
            let x = g.lane(m, idx)?.into_int_value();
            let acc = g.b.build_load(g.ctx.bool_type(), all, "")?.into_int_value();
            let acc = g.b.build_and(acc, x, "")?;
            g.b.build_store(all, acc)?;
            Ok(())
        })?;
        let all = self.b.build_load(self.ctx.bool_type(), all, "all")?;
        Ok((all.into_int_value(), false))
    }

    /// The value of a lazily computed tile's defining op, `None` when `v` is materialized.
    pub(super) fn lazy_op(&self, v: Value) -> Option<&Op> {
        match self.lv.get(&v) {
            Some(Lv::Lazy) => Some(&self.defs.get(&v)?.op),
            _ => None,
        }
    }

    pub(super) fn scalar_of(&self, v: Value) -> Option<BasicValueEnum<'ctx>> {
        match self.lv.get(&v) {
            Some(Lv::Scalar(s)) if self.ty(v).is_scalar() => Some(*s),
            _ => None,
        }
    }

    /// Emits the closed-form test, or `None` when the mask is not of a known form (what
    /// was emitted on the way is pure and dead).
    fn all_true_closed_form(&mut self, m: Value) -> Result<Option<IntValue<'ctx>>> {
        if self.true_masks.contains(&m) {
            return Ok(Some(self.ctx.bool_type().const_all_ones()));
        }
        if let Some(s) = self.scalar_of(m) {
            return Ok(Some(s.into_int_value()));
        }
        let Some(op) = self.lazy_op(m).cloned() else {
            return Ok(None);
        };
        Ok(match op {
            Op::Const(Const::Int(c)) => {
                Some(self.ctx.bool_type().const_int((c != 0) as u64, false))
            }
            Op::Splat(x)
            | Op::Broadcast(x)
            | Op::ExpandDims { x, .. }
            | Op::Reshape(x)
            | Op::Permute { x, .. }
            | Op::Flip { x, .. }
            | Op::Hint { x, .. } => self.all_true_closed_form(x)?,
            Op::Binary(BinOp::And, a, b) => {
                let Some(a) = self.all_true_closed_form(a)? else {
                    return Ok(None);
                };
                let Some(b) = self.all_true_closed_form(b)? else {
                    return Ok(None);
                };
                Some(self.b.build_and(a, b, "")?)
            }
            Op::Cmp(pred, a, b) => {
                let Some(d) = self.ty(a).dtype().filter(|d| d.is_int()) else {
                    return Ok(None);
                };
                let Some(ra) = self.range(a)? else {
                    return Ok(None);
                };
                let Some(rb) = self.range(b)? else {
                    return Ok(None);
                };
                let signed = d.is_signed_int();
                let (p, x, y) = match pred {
                    CmpPred::Lt => (IntPredicate::SLT, ra.hi, rb.lo),
                    CmpPred::Le => (IntPredicate::SLE, ra.hi, rb.lo),
                    CmpPred::Gt => (IntPredicate::SGT, ra.lo, rb.hi),
                    CmpPred::Ge => (IntPredicate::SGE, ra.lo, rb.hi),
                    CmpPred::Eq | CmpPred::Ne => return Ok(None),
                };
                let p = if signed { p } else { unsigned(p) };
                let bl = self.b;
                let holds = bl.build_int_compare(p, x, y, "")?;
                let ok = bl.build_and(ra.ok, rb.ok, "")?;
                Some(bl.build_and(holds, ok, "")?)
            }
            _ => None,
        })
    }

    /// The range of integer value `v` over all lanes.
    fn range(&mut self, v: Value) -> Result<Option<Range<'ctx>>> {
        let d = match self.ty(v).elem {
            Elem::Scalar(d) if d.is_int() => d,
            _ => return Ok(None),
        };
        let yes = self.ctx.bool_type().const_all_ones();
        if let Some(s) = self.scalar_of(v) {
            let s = s.into_int_value();
            return Ok(Some(Range {
                lo: s,
                hi: s,
                ok: yes,
            }));
        }
        let Some(op) = self.lazy_op(v).cloned() else {
            return Ok(None);
        };
        let it = self.compute_ty(d).into_int_type();
        Ok(match op {
            Op::Const(Const::Int(c)) => {
                let c = it.const_int(c as u64, false);
                Some(Range {
                    lo: c,
                    hi: c,
                    ok: yes,
                })
            }
            Op::Arange { start, end } if end > start => Some(Range {
                lo: it.const_int(start as u64, false),
                hi: it.const_int((end - 1) as u64, false),
                ok: yes,
            }),
            Op::Splat(x)
            | Op::Broadcast(x)
            | Op::ExpandDims { x, .. }
            | Op::Reshape(x)
            | Op::Permute { x, .. }
            | Op::Flip { x, .. }
            | Op::Hint { x, .. } => self.range(x)?,
            Op::Cast(x) => {
                let Some(from) = self.ty(x).dtype().filter(|f| f.is_int()) else {
                    return Ok(None);
                };
                let Some(r) = self.range(x)? else {
                    return Ok(None);
                };
                let widening = from.bits() < d.bits() || (from.bits() == d.bits() && from == d);
                let same_sign = from.is_signed_int() == d.is_signed_int();
                // Signed → signed sign-extends, unsigned → anything wider zero-extends:
                // both keep every value, so the range maps bound by bound.
                if !(widening && (same_sign || (!from.is_signed_int() && from.bits() < d.bits()))) {
                    return Ok(None);
                }
                let ext = |x: IntValue<'ctx>| {
                    self.b
                        .build_int_cast_sign_flag(x, it, from.is_signed_int(), "")
                };
                Some(Range {
                    lo: ext(r.lo)?,
                    hi: ext(r.hi)?,
                    ok: r.ok,
                })
            }
            Op::Binary(op @ (BinOp::Add | BinOp::Sub | BinOp::Mul), a, b) => {
                let Some(ra) = self.range(a)? else {
                    return Ok(None);
                };
                let Some(rb) = self.range(b)? else {
                    return Ok(None);
                };
                let ok = self.b.build_and(ra.ok, rb.ok, "")?;
                Some(match op {
                    BinOp::Add => {
                        let (lo, o1) = self.checked("add", d, ra.lo, rb.lo)?;
                        let (hi, o2) = self.checked("add", d, ra.hi, rb.hi)?;
                        self.range_of(lo, hi, ok, &[o1, o2])?
                    }
                    BinOp::Sub => {
                        let (lo, o1) = self.checked("sub", d, ra.lo, rb.hi)?;
                        let (hi, o2) = self.checked("sub", d, ra.hi, rb.lo)?;
                        // Unsigned: lo - hi may be "negative" for some lanes: overflow says no.
                        self.range_of(lo, hi, ok, &[o1, o2])?
                    }
                    _ => {
                        let corners = [
                            self.checked("mul", d, ra.lo, rb.lo)?,
                            self.checked("mul", d, ra.lo, rb.hi)?,
                            self.checked("mul", d, ra.hi, rb.lo)?,
                            self.checked("mul", d, ra.hi, rb.hi)?,
                        ];
                        let (smin, smax) = if d.is_signed_int() {
                            ("llvm.smin", "llvm.smax")
                        } else {
                            ("llvm.umin", "llvm.umax")
                        };
                        let mut lo = corners[0].0;
                        let mut hi = corners[0].0;
                        for (c, _) in &corners[1..] {
                            lo = self
                                .intrinsic(smin, &[it.into()], &[lo.into(), (*c).into()])?
                                .into_int_value();
                            hi = self
                                .intrinsic(smax, &[it.into()], &[hi.into(), (*c).into()])?
                                .into_int_value();
                        }
                        let flags: Vec<IntValue> = corners.iter().map(|c| c.1).collect();
                        self.range_of(lo, hi, ok, &flags)?
                    }
                })
            }
            _ => None,
        })
    }

    /// A range whose bounds came from checked ops with overflow flags `overflows`.
    fn range_of(
        &self,
        lo: IntValue<'ctx>,
        hi: IntValue<'ctx>,
        mut ok: IntValue<'ctx>,
        overflows: &[IntValue<'ctx>],
    ) -> Result<Range<'ctx>> {
        for o in overflows {
            let fine = self.b.build_not(*o, "")?;
            ok = self.b.build_and(ok, fine, "")?;
        }
        Ok(Range { lo, hi, ok })
    }

    /// `a op b` with LLVM's overflow-checking intrinsics: (result, overflowed).
    fn checked(
        &self,
        op: &str,
        d: DType,
        a: IntValue<'ctx>,
        b: IntValue<'ctx>,
    ) -> Result<(IntValue<'ctx>, IntValue<'ctx>)> {
        let sign = if d.is_signed_int() { "s" } else { "u" };
        let name = format!("llvm.{sign}{op}.with.overflow");
        let r = self
            .intrinsic(&name, &[a.get_type().into()], &[a.into(), b.into()])?
            .into_struct_value();
        let v = self.b.build_extract_value(r, 0, "")?.into_int_value();
        let o = self.b.build_extract_value(r, 1, "")?.into_int_value();
        Ok((v, o))
    }
}

fn unsigned(p: IntPredicate) -> IntPredicate {
    match p {
        IntPredicate::SLT => IntPredicate::ULT,
        IntPredicate::SLE => IntPredicate::ULE,
        IntPredicate::SGT => IntPredicate::UGT,
        IntPredicate::SGE => IntPredicate::UGE,
        p => p,
    }
}
