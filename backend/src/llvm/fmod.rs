//! C's `fmod` for one f32 or f64 element from adds, multiplies by powers of two and
//! compares, exactly, for targets with no libm (NVPTX, whose own `frem` lowering,
//! `x - trunc(x / y) · y`, loses the sign of a zero result and the low bits once the
//! quotient passes the mantissa).
//!
//! With `a = |y|`, `t = a · 2^k` doubled up to the largest not above `|x|`, then halved back
//! down to `a`, subtracting `t` from the remainder `r` whenever `t <= r`: each subtraction
//! has `t <= r < 2t`, so it is exact (Sterbenz), as is every doubling and halving of `t`
//! (a power of two times `a`, at least `a`). The remainder takes `x`'s sign.

use super::Emit;
use crate::llvm::{Positioned, Result};
use inkwell::values::{BasicValueEnum, FloatValue};
use inkwell::FloatPredicate;

impl<'ctx> Emit<'_, 'ctx> {
    /// `fmod(x, y)` for scalar floats of one type: NaN when `x` is infinite, `y` is 0 or
    /// either is NaN; `x` when `|x| < |y|` (`y` infinite included).
    pub(crate) fn exact_fmod(
        &self,
        x: FloatValue<'ctx>,
        y: FloatValue<'ctx>,
    ) -> Result<BasicValueEnum<'ctx>> {
        let (b, t) = (self.b, x.get_type());
        let abs = |v: FloatValue<'ctx>| -> Result<FloatValue<'ctx>> {
            Ok(self
                .intrinsic("llvm.fabs", &[t.into()], &[v.into()])?
                .into_float_value())
        };
        let cmp = |p, l: FloatValue<'ctx>, r: FloatValue<'ctx>| b.build_float_compare(p, l, r, "");
        let (ax, ay) = (abs(x)?, abs(y)?);
        let inf = t.const_float(f64::INFINITY);
        let nan = t.const_float(f64::NAN);
        // `ax` past every finite `ay` doubled: NaN and inf inputs never enter the loops.
        let bad = b.build_or(
            cmp(FloatPredicate::UEQ, ax, inf)?,
            b.build_or(
                cmp(FloatPredicate::UEQ, ay, t.const_zero())?,
                cmp(FloatPredicate::UNO, ax, ay)?,
                "",
            )?,
            "",
        )?;
        let reduce = b.build_and(b.build_not(bad, "")?, cmp(FloatPredicate::OGE, ax, ay)?, "")?;

        // What no reduction changes: NaN, or `x` itself below `|y|`.
        let passed = b.build_select(bad, nan, x, "")?.into_float_value();
        let func = b.current_function()?;
        let entry = b.current_block()?;
        let grow = self.ctx.append_basic_block(func, "fmod.grow");
        let shrink = self.ctx.append_basic_block(func, "fmod.shrink");
        let done = self.ctx.append_basic_block(func, "fmod.done");
        b.build_conditional_branch(reduce, grow, done)?;

        // t = ay · 2^k, doubled while 2t <= ax (2t = inf stops it).
        b.position_at_end(grow);
        let tg = b.build_phi(t, "t")?;
        tg.add_incoming(&[(&ay, entry)]);
        let tv = tg.as_basic_value().into_float_value();
        let twice = b.build_float_add(tv, tv, "")?;
        tg.add_incoming(&[(&twice, grow)]);
        let again = cmp(FloatPredicate::OLE, twice, ax)?;
        let grown = b.current_block()?;
        b.build_conditional_branch(again, grow, shrink)?;

        // r -= t where t <= r, t halved until below ay.
        b.position_at_end(shrink);
        let ts = b.build_phi(t, "t")?;
        let rs = b.build_phi(t, "r")?;
        ts.add_incoming(&[(&tv, grown)]);
        rs.add_incoming(&[(&ax, grown)]);
        let (tv, rv) = (
            ts.as_basic_value().into_float_value(),
            rs.as_basic_value().into_float_value(),
        );
        let take = cmp(FloatPredicate::OLE, tv, rv)?;
        let less = b.build_float_sub(rv, tv, "")?;
        let r_next = b.build_select(take, less, rv, "")?.into_float_value();
        let t_next = b.build_float_mul(tv, t.const_float(0.5), "")?;
        ts.add_incoming(&[(&t_next, shrink)]);
        rs.add_incoming(&[(&r_next, shrink)]);
        let more = cmp(FloatPredicate::OGE, t_next, ay)?;
        let shrunk = b.current_block()?;
        b.build_conditional_branch(more, shrink, done)?;

        b.position_at_end(done);
        let r = b.build_phi(t, "fmod")?;
        r.add_incoming(&[(&passed, entry), (&r_next, shrunk)]);
        // The remainder has x's sign (a zero one too); `passed` already has it.
        self.intrinsic(
            "llvm.copysign",
            &[t.into()],
            &[r.as_basic_value(), x.into()],
        )
    }
}
