//! `e^x` and `2^x` in f64: x = k ln2 + r (k an integer, |r| ≤ ln2/2 carried in
//! double-double), `e^r` from its Taylor series through r^14 (the first term left out,
//! r^15/15!, is below 2^-63), and the scale 2^k applied in two exactly representable halves
//! so that overflow and subnormal results round once, where the IEEE multiply rounds them.

use super::ops::{Ops, F, I, ROUNDER};
use crate::llvm::Emit;
use inkwell::FloatPredicate;
use std::f64::consts::{LN_2, LOG2_E};

/// The part of ln 2 that the nearest f64 ([`LN_2`]) leaves out.
const LN2_LO: f64 = 2.319_046_813_846_299_6e-17;

/// The Taylor coefficients `1/n!` for n = 14 down to 2: the series of (e^r - 1 - r) / r².
fn taylor_exp() -> Vec<f64> {
    let fact = |n: u32| (1..=n).map(f64::from).product::<f64>(); // exact for n ≤ 18
    (2..=14).rev().map(|n| 1.0 / fact(n)).collect()
}

impl<'ctx> Ops<'_, '_, 'ctx> {
    /// `x` with NaN kept and values outside `[lo, hi]` moved to the nearer bound.
    fn clamp(&self, x: F<'ctx>, lo: f64, hi: f64) -> F<'ctx> {
        let x = self.select(self.fcmp(FloatPredicate::OGT, x, self.c(hi)), self.c(hi), x);
        self.select(self.fcmp(FloatPredicate::OLT, x, self.c(lo)), self.c(lo), x)
    }

    /// `2^k · e^(r + rlo)` for an i64 `k` in [-1076, 1025] and |r| ≤ 0.35, |rlo| ≤ 2^-50 |r|.
    ///
    /// `e^r = (1 + r) + (r² Q(r) + rlo (1 + r))` where `1 + r` is split exactly by Fast2Sum:
    /// the tail is below 0.07, so its own rounding errors stay below 0.2 ulp of the result
    /// and the last addition's rounding dominates. `2^k` is applied as `2^⌊k/2⌋ · 2^(k-⌊k/2⌋)`:
    /// both halves are normal numbers, the first product is exact, and the second rounds
    /// once into the subnormal range or overflows to +inf as the exact value would.
    fn exp_core(&self, k: I<'ctx>, r: F<'ctx>, rlo: F<'ctx>) -> F<'ctx> {
        let q = self.horner(r, &taylor_exp());
        let (h, e1) = self.fast_two_sum(self.c(1.0), r);
        let tail = self.fma(self.mul(r, r), q, self.add(e1, self.fma(rlo, r, rlo)));
        let y = self.add(h, tail);
        let k1 = self.ashr(k, 1);
        let k2 = self.isub(k, k1);
        self.mul(self.mul(y, self.pow2(k1)), self.pow2(k2))
    }
}

impl<'ctx> Emit<'_, 'ctx> {
    /// `e^x` in f64 without a libm call (see the module doc for the measured error; below
    /// one ulp, and one subnormal step for subnormal results). +inf where e^x passes the largest f64 (x > 709.7827), +0 where it is below
    /// half the smallest subnormal (x < -745.1332); the clamp of x to [-746, 710] only keeps
    /// k in range. exp(NaN) is NaN.
    pub(crate) fn exp_f64(&self, x: F<'ctx>) -> F<'ctx> {
        let o = Ops { e: self };
        let x = o.clamp(x, -746.0, 710.0);
        // k = round(x / ln2), |k| ≤ 1077: the rounder's bits minus its own are k.
        let kr = o.fma(x, o.c(LOG2_E), o.c(ROUNDER));
        let k = o.sub(kr, o.c(ROUNDER));
        let ki = o.isub(o.bits(kr), o.bits(o.c(ROUNDER)));
        // x - k·LN_2 is exact: for k ≠ 0 (|x| > 1/4) both are multiples of 2^-54 and the
        // difference is below 1/2.
        let r1 = o.fma(o.neg(k), o.c(LN_2), x);
        // r1 - k·LN2_LO in double-double: the product's error from an FMA, the sum's from
        // TwoSum (r1 may be smaller than the product). k·(ln2 - LN_2 - LN2_LO) < 2^-99 is
        // left out.
        let t = o.mul(k, o.c(LN2_LO));
        let te = o.fma(k, o.c(LN2_LO), o.neg(t));
        let (r, e) = o.two_sum(r1, o.neg(t));
        o.exp_core(ki, r, o.sub(e, te))
    }

    /// `2^x` in f64 without a libm call (below one ulp, one subnormal step for subnormal
    /// results); +inf from x ≥ 1024, +0 from x ≤ -1075, NaN for NaN.
    /// `x = k + r` exactly (k = round(x)), and `2^r = e^(r ln2)` with `r ln2` in
    /// double-double.
    pub(crate) fn exp2_f64(&self, x: F<'ctx>) -> F<'ctx> {
        let o = Ops { e: self };
        let x = o.clamp(x, -1076.0, 1025.0);
        let kr = o.add(x, o.c(ROUNDER));
        let k = o.sub(kr, o.c(ROUNDER));
        let ki = o.isub(o.bits(kr), o.bits(o.c(ROUNDER)));
        let r = o.sub(x, k);
        let u = o.mul(r, o.c(LN_2));
        let ulo = o.fma(r, o.c(LN2_LO), o.fma(r, o.c(LN_2), o.neg(u)));
        o.exp_core(ki, u, ulo)
    }
}
