//! `ln x` and `log2 x` in f64 and f32: x = 2^e · m with m in [√½, √2) read from the bits
//! (subnormals scaled into the normal range first), `ln m = 2 atanh(s)` with
//! `s = (m-1)/(m+1)` in double-double (double-single in f32), |s| ≤ 0.1716, from the
//! series `2s + 2s³ (1/3 + s²/5 + …)` (through s^21 in f64, s^9 in f32: the first term
//! left out is below 2^-5 ulp), and `e ln2` (or `e` for log2) added with TwoSum so that
//! one final rounding dominates.

use super::ops::{Ops, F, F32, F64};
use crate::llvm::Emit;
use crate::llvm::Result;
use inkwell::FloatPredicate;

/// `1/(2n+1)` for n = `terms` down to 1: the series of (atanh(s) - s) / s³ in s².
fn atanh_series(terms: u32) -> Vec<f64> {
    (1..=terms)
        .rev()
        .map(|n| 1.0 / f64::from(2 * n + 1))
        .collect()
}

/// `ln x = e · ln2 + (lead + tail)` for a finite positive x.
struct LogParts<'ctx> {
    /// The binary exponent, as a float (exact).
    e: F<'ctx>,
    /// `2s` (exact doubling of the rounded quotient).
    lead: F<'ctx>,
    /// The rest of `ln m`, far below `lead`.
    tail: F<'ctx>,
}

impl<'ctx> Ops<'_, '_, 'ctx> {
    /// The parts of `ln x` (meaningless for x ≤ 0, inf or NaN: see [`Ops::log_specials`]).
    fn log_parts(&self, x: F<'ctx>) -> Result<LogParts<'ctx>> {
        // Subnormals (and 0) are scaled into the normal range, their exponent corrected.
        let fmt = self.f;
        let sub = self.fcmp(FloatPredicate::OLT, x, self.c(fmt.min_normal))?;
        let scale = self.c(2f64.powi(fmt.subnormal_shift));
        let xs = self.select(sub, self.mul(x, scale)?, x)?;
        let eadj = self.iselect(sub, self.i(-i64::from(fmt.subnormal_shift)), self.i(0))?;
        // Subtracting √½'s bits moves the exponent boundary so that m lands in [√½, √2).
        let ix = self.bits(xs)?;
        let e = self.ashr(self.isub(ix, self.i(fmt.sqrt_half_bits))?, fmt.mant)?;
        let m = self.float_of(self.isub(ix, self.shl(e, fmt.mant)?)?)?;
        let ef = self.s_to_f(self.iadd(e, eadj)?)?;
        // f = m - 1 is exact (Sterbenz); d = 2 + f is not, dlo is what it loses.
        let f = self.sub(m, self.c(1.0))?;
        let (d, dlo) = self.fast_two_sum(self.c(2.0), f)?;
        // s + slo = f / (d + dlo): one reciprocal (PTX `rcp.rn`), s = f · (1/d) within two
        // ulps of f/d, so that the FMA residual f - s·d is exact; less s·dlo, times 1/d,
        // it is the quotient's correction (its own relative rounding error is harmless).
        let inv = self.div(self.c(1.0), d)?;
        let s = self.mul(f, inv)?;
        let rho = self.fma(self.neg(s)?, dlo, self.fma(self.neg(s)?, d, f)?)?;
        let slo = self.mul(rho, inv)?;
        let w = self.mul(s, s)?;
        let series = self.horner(w, &atanh_series(fmt.atanh_terms))?;
        let tail = self.fma(self.mul(s, w)?, series, slo)?;
        Ok(LogParts {
            e: ef,
            lead: self.add(s, s)?,
            tail: self.add(tail, tail)?,
        })
    }

    /// `r` for finite positive `x`; `ln 0 = -inf`, `ln(x < 0) = NaN`, `ln inf = inf`,
    /// `ln NaN = NaN` (the same for log2).
    fn log_specials(&self, x: F<'ctx>, r: F<'ctx>) -> Result<F<'ctx>> {
        let inf = self.c(f64::INFINITY);
        let r = self.select(self.fcmp(FloatPredicate::OEQ, x, inf)?, inf, r)?;
        let zero = self.c(0.0);
        let r = self.select(
            self.fcmp(FloatPredicate::OEQ, x, zero)?,
            self.c(f64::NEG_INFINITY),
            r,
        )?;
        // x < 0 gives a NaN, a NaN x itself.
        let r = self.select(
            self.fcmp(FloatPredicate::OLT, x, zero)?,
            self.c(f64::NAN),
            r,
        )?;
        self.select(self.fcmp(FloatPredicate::UNO, x, x)?, x, r)
    }
}

impl<'ctx> Ops<'_, '_, 'ctx> {
    /// `ln x`: e·ln2 in double-double (or double-single), added to 2s with TwoSum.
    fn log(&self, x: F<'ctx>) -> Result<F<'ctx>> {
        let p = self.log_parts(x)?;
        let [ln2, ln2_lo] = self.f.ln2;
        let eh = self.mul(p.e, self.c(ln2))?;
        let el = self.fma(
            p.e,
            self.c(ln2_lo),
            self.fma(p.e, self.c(ln2), self.neg(eh)?)?,
        )?;
        let (h, l) = self.two_sum(eh, p.lead)?;
        let r = self.add(h, self.add(l, self.add(el, p.tail)?)?)?;
        self.log_specials(x, r)
    }

    /// `log2 x = e + ln m · log2(e)`, the product in double-double; exact for powers of two.
    fn log2(&self, x: F<'ctx>) -> Result<F<'ctx>> {
        let p = self.log_parts(x)?;
        let [log2e, log2e_lo] = self.f.log2e;
        let (lm, lml) = self.fast_two_sum(p.lead, p.tail)?;
        let ph = self.mul(lm, self.c(log2e))?;
        let pl = self.fma(lm, self.c(log2e), self.neg(ph)?)?;
        let pl = self.add(
            pl,
            self.fma(lm, self.c(log2e_lo), self.mul(lml, self.c(log2e))?)?,
        )?;
        let (h, l) = self.two_sum(p.e, ph)?;
        let r = self.add(h, self.add(l, pl)?)?;
        self.log_specials(x, r)
    }
}

impl<'ctx> Emit<'_, 'ctx> {
    /// `ln x` in f64 without a libm call (see the module doc), subnormal x included.
    pub(crate) fn log_f64(&self, x: F<'ctx>) -> Result<F<'ctx>> {
        Ops::new(self, &F64).log(x)
    }

    /// `log2 x` in f64 without a libm call.
    pub(crate) fn log2_f64(&self, x: F<'ctx>) -> Result<F<'ctx>> {
        Ops::new(self, &F64).log2(x)
    }

    /// `ln x` in f32 without a libm call or PTX `lg2.approx` (whose absolute error makes
    /// results near x = 1 wrong in most bits).
    pub(crate) fn log_f32(&self, x: F<'ctx>) -> Result<F<'ctx>> {
        Ops::new(self, &F32).log(x)
    }

    /// `log2 x` in f32 without a libm call or PTX `lg2.approx`.
    pub(crate) fn log2_f32(&self, x: F<'ctx>) -> Result<F<'ctx>> {
        Ops::new(self, &F32).log2(x)
    }
}
