//! `for` loop induction variables that never wrap.

use super::Emit;
use crate::llvm::Result;
use inkwell::basic_block::BasicBlock;
use inkwell::values::{BasicValueEnum, FunctionValue, IntValue};
use inkwell::IntPredicate;
use tritium_dsl::ir::DType;

/// The induction variable of a `for` loop, counted so that it never wraps: the loop runs
/// while `iv < hi` (or `iv > hi` for a negative step) exactly as the interpreter's
/// unbounded integers do, even with `hi` near the dtype's maximum.
///
/// A unit step (the constant 1, or -1 of a signed dtype: most loops) is counted in the
/// bounds' own dtype: while the loop runs, `iv < hi <= MAX` (or `iv > hi >= MIN`), so
/// `iv + step` stays in range (on GPUs a 64-bit counter costs a carry and a wider compare
/// per trip). Other bounds narrower than 64 bits are counted in i64 (sign- or
/// zero-extended), where `iv + step` cannot overflow; the body sees `iv` truncated back.
/// Other 64-bit bounds are counted in place and an overflowing `iv + step` leaves the loop.
pub(crate) struct LoopCounter<'ctx> {
    /// The first value, in the counter's type.
    pub lo: IntValue<'ctx>,
    hi: IntValue<'ctx>,
    step: IntValue<'ctx>,
    /// The bounds' dtype, when it is narrower than the counter (i64).
    narrow: Option<DType>,
    /// Unsigned bounds counted in place: unsigned compares and overflow.
    unsigned: bool,
    /// The step is a unit (see the type's docs): `iv + step` never overflows while the
    /// loop runs.
    unit: bool,
}

impl<'ctx> LoopCounter<'ctx> {
    /// A counter over `[lo, hi, step]`, values of the integer dtype `dtype`.
    pub(crate) fn new(
        e: &Emit<'_, 'ctx>,
        dtype: DType,
        bounds: [IntValue<'ctx>; 3],
    ) -> Result<Self> {
        let [lo, hi, step] = bounds;
        let unit = match step.get_sign_extended_constant() {
            Some(1) => true,
            Some(-1) => dtype.is_signed_int(),
            _ => false,
        };
        if dtype.bits() >= 64 || unit {
            return Ok(LoopCounter {
                lo,
                hi,
                step,
                narrow: None,
                unsigned: dtype.is_unsigned_int(),
                unit,
            });
        }
        let i64t = e.ctx.i64_type();
        let widen = |v: IntValue<'ctx>| {
            if dtype.is_unsigned_int() {
                e.b.build_int_z_extend(v, i64t, "")
            } else {
                e.b.build_int_s_extend(v, i64t, "")
            }
        };
        Ok(LoopCounter {
            lo: widen(lo)?,
            hi: widen(hi)?,
            step: widen(step)?,
            narrow: Some(dtype),
            unsigned: false,
            unit: false,
        })
    }

    /// Whether [`Self::ahead`] runs exactly where the loop would: the counter is wider
    /// than the bounds (i64 for narrower dtypes), or its step a unit.
    pub(crate) fn ahead_is_exact(&self) -> bool {
        self.narrow.is_some() || self.unit
    }

    /// `iv + d · step` (`d` small), where [`Self::runs`] holds exactly when the loop would
    /// run that iteration: exact for a counter wider than the bounds (no i64 overflow);
    /// for a unit step saturated at the dtype's end, which no iteration reaches past
    /// (`iv + d` beyond `MAX` is beyond `hi`).
    pub(crate) fn ahead(
        &self,
        e: &Emit<'_, 'ctx>,
        iv: IntValue<'ctx>,
        d: u64,
    ) -> Result<IntValue<'ctx>> {
        let t = self.step.get_type();
        if self.unit {
            let down = self.step.get_sign_extended_constant() == Some(-1);
            let name = match (self.unsigned, down) {
                (true, _) => "llvm.uadd.sat",
                (false, false) => "llvm.sadd.sat",
                (false, true) => "llvm.ssub.sat",
            };
            let d = t.const_int(d, false);
            let r = e.intrinsic(name, &[t.into()], &[iv.into(), d.into()])?;
            return Ok(r.into_int_value());
        }
        let steps = e.b.build_int_mul(self.step, t.const_int(d, false), "")?;
        Ok(e.b.build_int_add(iv, steps, "ahead")?)
    }

    /// True while the loop runs: `iv < hi` counting up, `iv > hi` counting down.
    pub(crate) fn runs(&self, e: &Emit<'_, 'ctx>, iv: IntValue<'ctx>) -> Result<IntValue<'ctx>> {
        let b = e.b;
        let zero = self.step.get_type().const_zero();
        let (up, below, above) = if self.unsigned {
            (IntPredicate::UGT, IntPredicate::ULT, IntPredicate::UGT)
        } else {
            (IntPredicate::SGT, IntPredicate::SLT, IntPredicate::SGT)
        };
        let go_up = b.build_int_compare(up, self.step, zero, "")?;
        let go_up = b.build_and(go_up, b.build_int_compare(below, iv, self.hi, "")?, "")?;
        if self.unsigned {
            return Ok(go_up);
        }
        let down = b.build_int_compare(IntPredicate::SLT, self.step, zero, "")?;
        let go_down = b.build_and(down, b.build_int_compare(above, iv, self.hi, "")?, "")?;
        Ok(b.build_or(go_up, go_down, "")?)
    }

    /// The induction variable as the body sees it: a value of the bounds' dtype.
    pub(crate) fn body_value(
        &self,
        e: &Emit<'_, 'ctx>,
        iv: IntValue<'ctx>,
    ) -> Result<BasicValueEnum<'ctx>> {
        match self.narrow {
            Some(d) => {
                let t = e.ctx.custom_width_int_type(d.bits());
                Ok(e.b.build_int_truncate(iv, t, "")?.into())
            }
            None => Ok(iv.into()),
        }
    }

    /// `iv + step`, and for 64-bit bounds whether it overflowed (then the loop is over: the
    /// next value lies beyond every value of the dtype, hence beyond `hi`).
    fn add_step(
        &self,
        e: &Emit<'_, 'ctx>,
        iv: IntValue<'ctx>,
    ) -> Result<(IntValue<'ctx>, Option<IntValue<'ctx>>)> {
        if self.narrow.is_some() {
            return Ok((e.b.build_int_nsw_add(iv, self.step, "")?, None));
        }
        if self.unit {
            // In range while the loop runs (`iv` is short of `hi`).
            let next = match self.unsigned {
                true => e.b.build_int_nuw_add(iv, self.step, "")?,
                false => e.b.build_int_nsw_add(iv, self.step, "")?,
            };
            return Ok((next, None));
        }
        let name = if self.unsigned {
            "llvm.uadd.with.overflow"
        } else {
            "llvm.sadd.with.overflow"
        };
        let pair = e
            .intrinsic(
                name,
                &[iv.get_type().into()],
                &[iv.into(), self.step.into()],
            )?
            .into_struct_value();
        let next = e.b.build_extract_value(pair, 0, "")?.into_int_value();
        let overflow = e.b.build_extract_value(pair, 1, "")?.into_int_value();
        Ok((next, Some(overflow)))
    }

    /// `iv + step`; for 64-bit bounds an overflow branches to `exit`.
    pub(crate) fn advance(
        &self,
        e: &Emit<'_, 'ctx>,
        func: FunctionValue<'ctx>,
        iv: IntValue<'ctx>,
        exit: BasicBlock<'ctx>,
    ) -> Result<IntValue<'ctx>> {
        let (next, overflow) = self.add_step(e, iv)?;
        if let Some(overflow) = overflow {
            let go_on = e.ctx.append_basic_block(func, "for.next");
            e.b.build_conditional_branch(overflow, exit, go_on)?;
            e.b.position_at_end(go_on);
        }
        Ok(next)
    }

    /// True (an `i1`) when the iteration at `iv` is the loop's last: `iv + step` does not
    /// run (or overflows the 64-bit bounds' dtype). Branch-free, unlike
    /// [`advance`](Self::advance).
    pub(crate) fn is_last(&self, e: &Emit<'_, 'ctx>, iv: IntValue<'ctx>) -> Result<IntValue<'ctx>> {
        let (next, overflow) = self.add_step(e, iv)?;
        let stop = e.b.build_not(self.runs(e, next)?, "")?;
        match overflow {
            Some(o) => Ok(e.b.build_or(o, stop, "")?),
            None => Ok(stop),
        }
    }
}
