//! `ln x` and `log2 x` in f64: x = 2^e · m with m in [√½, √2) read from the bits
//! (subnormals scaled by 2^54 first), `ln m = 2 atanh(s)` with `s = (m-1)/(m+1)` in
//! double-double, |s| ≤ 0.1716, from the series `2s + 2s³ (1/3 + s²/5 + … + s^18/21)`
//! (the first term left out is below 2^-60 relative), and `e ln2` (or `e` for log2) added
//! with TwoSum so that one final rounding dominates.

use super::ops::{Ops, F};
use crate::llvm::Emit;
use inkwell::FloatPredicate;
use std::f64::consts::{LN_2, LOG2_E};

/// The part of ln 2 that the nearest f64 ([`LN_2`]) leaves out.
const LN2_LO: f64 = 2.319_046_813_846_299_6e-17;
/// The part of log2(e) that the nearest f64 ([`LOG2_E`]) leaves out.
const LOG2E_LO: f64 = 2.035_527_374_093_103_3e-17;
/// The bits of the f64 nearest √½: subtracting them from x's bits moves the exponent
/// boundary so that the mantissa lands in [√½, √2).
const SQRT_HALF_BITS: i64 = 0x3FE6_A09E_667F_3BCD;

/// `1/(2n+1)` for n = 10 down to 1: the series of (atanh(s) - s) / s³ in s², through s^18.
fn atanh_series() -> Vec<f64> {
    (1..=10).rev().map(|n| 1.0 / f64::from(2 * n + 1)).collect()
}

/// `ln x = e · ln2 + (lead + tail)` for a finite positive x.
struct LogParts<'ctx> {
    /// The binary exponent, as an f64 (exact).
    e: F<'ctx>,
    /// `2s` (exact doubling of the rounded quotient).
    lead: F<'ctx>,
    /// The rest of `ln m`, far below `lead`.
    tail: F<'ctx>,
}

impl<'ctx> Ops<'_, '_, 'ctx> {
    /// The parts of `ln x` (meaningless for x ≤ 0, inf or NaN: see [`Ops::log_specials`]).
    fn log_parts(&self, x: F<'ctx>) -> LogParts<'ctx> {
        // Subnormals (and 0) are scaled into the normal range, their exponent corrected.
        let sub = self.fcmp(FloatPredicate::OLT, x, self.c(f64::MIN_POSITIVE));
        let xs = self.select(sub, self.mul(x, self.c(2f64.powi(54))), x);
        let eadj = self.iselect(sub, self.i(-54), self.i(0));
        let ix = self.bits(xs);
        let e = self.ashr(self.isub(ix, self.i(SQRT_HALF_BITS)), 52);
        let m = self.float_of(self.isub(ix, self.shl(e, 52)));
        let e = self.iadd(e, eadj);
        let ef = self
            .e
            .b
            .build_signed_int_to_float(e, self.e.ctx.f64_type(), "")
            .unwrap();
        // f = m - 1 is exact (Sterbenz); d = 2 + f is not, dlo is what it loses.
        let f = self.sub(m, self.c(1.0));
        let (d, dlo) = self.fast_two_sum(self.c(2.0), f);
        // s + slo = f / (d + dlo): one reciprocal (`rcp.rn.f64`), s = f · (1/d) within two
        // ulps of f/d, so that the FMA residual f - s·d is exact; less s·dlo, times 1/d,
        // it is the quotient's correction (its own relative error of 2^-52 is harmless).
        let inv = self.div(self.c(1.0), d);
        let s = self.mul(f, inv);
        let rho = self.fma(self.neg(s), dlo, self.fma(self.neg(s), d, f));
        let slo = self.mul(rho, inv);
        let w = self.mul(s, s);
        let series = self.horner(w, &atanh_series());
        let tail = self.fma(self.mul(s, w), series, slo);
        LogParts {
            e: ef,
            lead: self.add(s, s),
            tail: self.add(tail, tail),
        }
    }

    /// `r` for finite positive `x`; `ln 0 = -inf`, `ln(x < 0) = NaN`, `ln inf = inf`,
    /// `ln NaN = NaN` (the same for log2).
    fn log_specials(&self, x: F<'ctx>, r: F<'ctx>) -> F<'ctx> {
        let inf = self.c(f64::INFINITY);
        let r = self.select(self.fcmp(FloatPredicate::OEQ, x, inf), inf, r);
        let zero = self.c(0.0);
        let r = self.select(
            self.fcmp(FloatPredicate::OEQ, x, zero),
            self.c(f64::NEG_INFINITY),
            r,
        );
        // x < 0 gives a NaN, a NaN x itself.
        let r = self.select(self.fcmp(FloatPredicate::OLT, x, zero), self.c(f64::NAN), r);
        self.select(self.fcmp(FloatPredicate::UNO, x, x), x, r)
    }
}

impl<'ctx> Emit<'_, 'ctx> {
    /// `ln x` in f64 without a libm call (see the module doc), subnormal x included.
    pub(crate) fn log_f64(&self, x: F<'ctx>) -> F<'ctx> {
        let o = Ops { e: self };
        let p = o.log_parts(x);
        // e·ln2 in double-double, added to 2s with TwoSum.
        let eh = o.mul(p.e, o.c(LN_2));
        let el = o.fma(p.e, o.c(LN2_LO), o.fma(p.e, o.c(LN_2), o.neg(eh)));
        let (h, l) = o.two_sum(eh, p.lead);
        let r = o.add(h, o.add(l, o.add(el, p.tail)));
        o.log_specials(x, r)
    }

    /// `log2 x` in f64 without a libm call: `e + ln m · log2(e)`, the product in
    /// double-double; exact for powers of two.
    pub(crate) fn log2_f64(&self, x: F<'ctx>) -> F<'ctx> {
        let o = Ops { e: self };
        let p = o.log_parts(x);
        let (lm, lml) = o.fast_two_sum(p.lead, p.tail);
        let ph = o.mul(lm, o.c(LOG2_E));
        let pl = o.fma(lm, o.c(LOG2_E), o.neg(ph));
        let pl = o.add(pl, o.fma(lm, o.c(LOG2E_LO), o.mul(lml, o.c(LOG2_E))));
        let (h, l) = o.two_sum(p.e, ph);
        let r = o.add(h, o.add(l, pl));
        o.log_specials(x, r)
    }
}
