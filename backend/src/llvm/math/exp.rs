//! `e^x` in f64 and `2^x` in f64 and f32: x = k ln2 + r (k an integer, |r| ≤ ln2/2
//! carried in double-double), `e^r` from its Taylor series through r^14 in f64 (the first
//! term left out, r^15/15!, is below 2^-63) and r^8 in f32 (r^9/9! is below 2^-32), and the scale 2^k applied in two exactly representable halves
//! so that overflow and subnormal results round once, where the IEEE multiply rounds them.

use super::ops::{Format, Ops, F, F32, F64, I};
use crate::llvm::Emit;
use crate::llvm::Result;
use inkwell::FloatPredicate;

/// The Taylor coefficients `1/n!` for n = `terms` down to 2: the series of
/// (e^r - 1 - r) / r².
fn taylor_exp(terms: u32) -> Vec<f64> {
    let fact = |n: u32| (1..=n).map(f64::from).product::<f64>(); // exact for n ≤ 18
    (2..=terms).rev().map(|n| 1.0 / fact(n)).collect()
}

impl<'ctx> Ops<'_, '_, 'ctx> {
    /// `x` with NaN kept and values outside `[lo, hi]` moved to the nearer bound.
    fn clamp(&self, x: F<'ctx>, lo: f64, hi: f64) -> Result<F<'ctx>> {
        let x = self.select(
            self.fcmp(FloatPredicate::OGT, x, self.c(hi))?,
            self.c(hi),
            x,
        )?;
        self.select(
            self.fcmp(FloatPredicate::OLT, x, self.c(lo))?,
            self.c(lo),
            x,
        )
    }

    /// `2^k · e^(r + rlo)` for an integer `k` in [-(bias + mant + 1), bias + 2] and
    /// |r| ≤ 0.35, |rlo| ≤ 2^-(mant-2) |r|.
    ///
    /// `e^r = (1 + r) + (r² Q(r) + rlo (1 + r))` where `1 + r` is split exactly by Fast2Sum:
    /// the tail is below 0.07, so its own rounding errors stay below 0.2 ulp of the result
    /// and the last addition's rounding dominates. `2^k` is applied as `2^⌊k/2⌋ · 2^(k-⌊k/2⌋)`:
    /// both halves are normal numbers, the first product is exact, and the second rounds
    /// once into the subnormal range or overflows to +inf as the exact value would.
    fn exp_core(&self, k: I<'ctx>, r: F<'ctx>, rlo: F<'ctx>) -> Result<F<'ctx>> {
        let q = self.horner(r, &taylor_exp(self.f.exp_terms))?;
        let (h, e1) = self.fast_two_sum(self.c(1.0), r)?;
        let tail = self.fma(self.mul(r, r)?, q, self.add(e1, self.fma(rlo, r, rlo)?)?)?;
        let y = self.add(h, tail)?;
        let k1 = self.ashr(k, 1)?;
        let k2 = self.isub(k, k1)?;
        self.mul(self.mul(y, self.pow2(k1)?)?, self.pow2(k2)?)
    }
}

impl<'ctx> Emit<'_, 'ctx> {
    /// `e^x` in f64 without a libm call (see the module doc for the measured error; below
    /// one ulp, and one subnormal step for subnormal results). +inf where e^x passes the largest f64 (x > 709.7827), +0 where it is below
    /// half the smallest subnormal (x < -745.1332); the clamp of x to [-746, 710] only keeps
    /// k in range. exp(NaN) is NaN.
    pub(crate) fn exp_f64(&self, x: F<'ctx>) -> Result<F<'ctx>> {
        let o = Ops::new(self, &F64);
        let [ln2, ln2_lo] = F64.ln2;
        let rounder = o.c(F64.rounder);
        let x = o.clamp(x, -746.0, 710.0)?;
        // k = round(x / ln2), |k| ≤ 1077: the rounder's bits minus its own are k.
        let kr = o.fma(x, o.c(F64.log2e[0]), rounder)?;
        let k = o.sub(kr, rounder)?;
        let ki = o.isub(o.bits(kr)?, o.bits(rounder)?)?;
        // x - k·ln2 is exact: for k ≠ 0 (|x| > 1/4) both are multiples of 2^-54 and the
        // difference is below 1/2.
        let r1 = o.fma(o.neg(k)?, o.c(ln2), x)?;
        // r1 - k·ln2_lo in double-double: the product's error from an FMA, the sum's from
        // TwoSum (r1 may be smaller than the product). What the two parts leave out of ln 2,
        // times k, is below 2^-99.
        let t = o.mul(k, o.c(ln2_lo))?;
        let te = o.fma(k, o.c(ln2_lo), o.neg(t)?)?;
        let (r, e) = o.two_sum(r1, o.neg(t)?)?;
        o.exp_core(ki, r, o.sub(e, te)?)
    }

    /// `2^x` in f64 without a libm call (below one ulp, one subnormal step for subnormal
    /// results); +inf from x ≥ 1024, +0 from x ≤ -1075, NaN for NaN.
    pub(crate) fn exp2_f64(&self, x: F<'ctx>) -> Result<F<'ctx>> {
        Ops::new(self, &F64).exp2(x)
    }

    /// `2^x` in f32 without a libm call, so that CPU loops containing it (attention's
    /// `exp2(qk - m)`) vectorize (below one ulp, one subnormal step for subnormal results);
    /// +inf from x ≥ 128, +0 from x ≤ -150, NaN for NaN.
    pub(crate) fn exp2_f32(&self, x: F<'ctx>) -> Result<F<'ctx>> {
        Ops::new(self, &F32).exp2(x)
    }
}

impl<'ctx> Ops<'_, '_, 'ctx> {
    /// `2^x`: `x = k + r` exactly (k = round(x)), and `2^r = e^(r ln2)` with `r ln2` in
    /// double-single or double-double. x is clamped to where 2^x rounds to 0 or +inf,
    /// which keeps k in `exp_core`'s range.
    fn exp2(&self, x: F<'ctx>) -> Result<F<'ctx>> {
        let Format {
            bias, mant, ln2, ..
        } = *self.f;
        let rounder = self.c(self.f.rounder);
        let x = self.clamp(x, -((bias + mant as i64 + 1) as f64), (bias + 2) as f64)?;
        let kr = self.add(x, rounder)?;
        let k = self.sub(kr, rounder)?;
        let ki = self.isub(self.bits(kr)?, self.bits(rounder)?)?;
        let r = self.sub(x, k)?;
        let u = self.mul(r, self.c(ln2[0]))?;
        let ulo = self.fma(
            r,
            self.c(ln2[1]),
            self.fma(r, self.c(ln2[0]), self.neg(u)?)?,
        )?;
        self.exp_core(ki, u, ulo)
    }
}
