//! `sin x` and `cos x` in f64 and f32: x = q · π/2 + r with |r| ≤ π/4 (plus rounding)
//! carried in double-double (double-single), then sin r or cos r by quadrant from their
//! Taylor series (f64: through r^17 and r^18, f32: through r^9 and r^10; the first terms
//! left out are below 2^-5 ulp).
//!
//! Below |x| = `Format::large` (2^30 in f64, 2^17 in f32) the reduction is Cody-Waite
//! with π/2 in three parts: `x - q·P1` is exact with an FMA, `q·P2` is split exactly by an
//! FMA and subtracted with TwoSum, and `q·P3` goes into the tail; what the three parts
//! leave out of π/2 (2^-163 in f64, 2^-76 in f32), times q, stays below 2^-30 relative to
//! any r a float below the threshold can give (2^-62 in f64, 2^-27.8 in f32). Larger |x|
//! (inf included) branch to the Payne-Hanek reduction, done in f64 for both formats; the
//! branch depends on each thread's own element and surrounds no barrier or shuffle.

use super::ops::{Ops, F, F32, F64, I};
use crate::llvm::Emit;
use crate::llvm::{Positioned, Result};
use inkwell::{FloatPredicate, IntPredicate};

fn fact(n: u32) -> f64 {
    (1..=n).map(f64::from).product() // exact for n ≤ 18
}

/// `(-1)^n / (2n+1)!` for n = `terms` down to 1: the series of (sin r - r) / r³ in r².
fn sin_series(terms: u32) -> Vec<f64> {
    (1..=terms)
        .rev()
        .map(|n| if n % 2 == 0 { 1.0 } else { -1.0 } / fact(2 * n + 1))
        .collect()
}

/// `(-1)^n / (2n)!` for n = `last` down to 2: the series of (cos r - 1 + r²/2) / r⁴ in r².
fn cos_series(last: u32) -> Vec<f64> {
    (2..=last)
        .rev()
        .map(|n| if n % 2 == 0 { 1.0 } else { -1.0 } / fact(2 * n))
        .collect()
}

impl<'ctx> Ops<'_, '_, 'ctx> {
    /// `(q, r, rlo)` with `x = q · π/2 + (r + rlo)`, q an integer of the float's width
    /// taken modulo 4.
    fn reduce_pio2(&self, x: F<'ctx>) -> Result<(I<'ctx>, F<'ctx>, F<'ctx>)> {
        let [p1, p2, p3] = self.f.pio2;
        let rounder = self.c(self.f.rounder);
        let kr = self.fma(x, self.c(self.f.two_over_pi), rounder)?;
        let k = self.sub(kr, rounder)?;
        let q = self.isub(self.bits(kr)?, self.bits(rounder)?)?;
        // Exact: for k ≠ 0 (|x| > π/4) x and k·P1 are multiples of half an ulp of 1, and
        // the difference is below 1.
        let r1 = self.fma(self.neg(k)?, self.c(p1), x)?;
        let p = self.mul(k, self.c(p2))?;
        let pe = self.fma(k, self.c(p2), self.neg(p)?)?;
        let (t, te) = self.two_sum(r1, self.neg(p)?)?;
        let tail = self.fma(self.neg(k)?, self.c(p3), self.sub(te, pe)?)?;
        let (r, rlo) = self.fast_two_sum(t, tail)?;

        // Large |x| (or inf): Payne-Hanek on |x|, the signs flipped back for x < 0.
        let e = self.e;
        let large = self.fcmp(FloatPredicate::OGE, self.abs(x)?, self.c(self.f.large))?;
        let start = e.b.current_block()?;
        let func = e.b.current_function()?;
        let big = e.ctx.append_basic_block(func, "trig.large");
        let join = e.ctx.append_basic_block(func, "trig.reduced");
        e.b.build_conditional_branch(large, big, join)?;
        e.b.position_at_end(big);
        let (bq, br, brlo) = self.payne_hanek_in_format(self.abs(x)?)?;
        let neg = self.fcmp(FloatPredicate::OLT, x, self.c(0.0))?;
        let bq = self.iselect(neg, self.isub(self.i(0), bq)?, bq)?;
        let br = self.select(neg, self.neg(br)?, br)?;
        let brlo = self.select(neg, self.neg(brlo)?, brlo)?;
        let big_end = e.b.current_block()?;
        e.b.build_unconditional_branch(join)?;
        e.b.position_at_end(join);
        let phi = |small: inkwell::values::BasicValueEnum<'ctx>,
                   large: inkwell::values::BasicValueEnum<'ctx>|
         -> Result<_> {
            let p = e.b.build_phi(small.get_type(), "")?;
            p.add_incoming(&[(&small, start), (&large, big_end)]);
            Ok(p.as_basic_value())
        };
        Ok((
            phi(q.into(), bq.into())?.into_int_value(),
            phi(r.into(), br.into())?.into_float_value(),
            phi(rlo.into(), brlo.into())?.into_float_value(),
        ))
    }

    /// `sin x` (or `cos x` when `cos`): the quadrant picks ±sin r or ±cos r.
    fn sin_cos(&self, x: F<'ctx>, cos: bool) -> Result<F<'ctx>> {
        let (q, r, rlo) = self.reduce_pio2(x)?;
        let q = if cos { self.iadd(q, self.i(1)) } else { Ok(q) }?;
        let z = self.mul(r, r)?;
        // sin(r + rlo) = r + (r³ S(r²) + rlo · cos r), cos r ≈ 1 - r²/2 for the tiny rlo.
        let s = self.horner(z, &sin_series(self.f.sin_terms))?;
        let ts = self.fma(
            self.mul(r, z)?,
            s,
            self.mul(rlo, self.fma(self.c(-0.5), z, self.c(1.0))?)?,
        )?;
        let sin = self.add(r, ts)?;
        // cos(r + rlo) = (1 - r²/2) + (r⁴ C(r²) - r · rlo): 1 - z/2 split exactly by
        // Fast2Sum, z = r² with its FMA error.
        let c = self.horner(z, &cos_series(self.f.cos_terms))?;
        let hz = self.mul(z, self.c(0.5))?;
        let (w, we) = self.fast_two_sum(self.c(1.0), self.neg(hz)?)?;
        let zlo = self.fma(r, r, self.neg(z)?)?;
        let tc = self.add(
            self.fma(self.c(-0.5), zlo, we)?,
            self.fma(self.mul(z, z)?, c, self.neg(self.mul(r, rlo)?)?)?,
        )?;
        let cos_r = self.add(w, tc)?;
        let odd = self.icmp(IntPredicate::NE, self.and(q, self.i(1))?, self.i(0))?;
        let v = self.select(odd, cos_r, sin)?;
        let negate = self.icmp(IntPredicate::NE, self.and(q, self.i(2))?, self.i(0))?;
        let v = self.select(negate, self.neg(v)?, v)?;
        let ax = self.abs(x)?;
        // Where sin x rounds to x, x itself keeps -0 and subnormals exact.
        let v = if cos {
            v
        } else {
            let tiny = self.fcmp(FloatPredicate::OLT, ax, self.c(self.f.sin_is_x))?;
            self.select(tiny, x, v)?
        };
        // The reduction of inf is meaningless: sin(±inf) = cos(±inf) = NaN. (A NaN x gives
        // NaN through the arithmetic.)
        self.select(
            self.fcmp(FloatPredicate::OEQ, ax, self.c(f64::INFINITY))?,
            self.c(f64::NAN),
            v,
        )
    }
}

impl<'ctx> Emit<'_, 'ctx> {
    /// `sin x` in f64 without a libm call (see the module doc), for every finite x;
    /// sin(±0) = ±0, sin(±inf) = NaN.
    pub(crate) fn sin_f64(&self, x: F<'ctx>) -> Result<F<'ctx>> {
        Ops::new(self, &F64).sin_cos(x, false)
    }

    /// `cos x` in f64 without a libm call, for every finite x; cos(±inf) = NaN.
    pub(crate) fn cos_f64(&self, x: F<'ctx>) -> Result<F<'ctx>> {
        Ops::new(self, &F64).sin_cos(x, true)
    }

    /// `sin x` in f32 without a libm call or PTX `sin.approx` (whose absolute error of
    /// 2^-20.9 holds only within ±100π): accurate for every finite x.
    pub(crate) fn sin_f32(&self, x: F<'ctx>) -> Result<F<'ctx>> {
        Ops::new(self, &F32).sin_cos(x, false)
    }

    /// `cos x` in f32 without a libm call or PTX `cos.approx`.
    pub(crate) fn cos_f32(&self, x: F<'ctx>) -> Result<F<'ctx>> {
        Ops::new(self, &F32).sin_cos(x, true)
    }
}
