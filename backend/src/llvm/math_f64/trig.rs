//! `sin x` and `cos x` in f64: x = q · π/2 + r with |r| ≤ π/4 (plus rounding) carried in
//! double-double, then sin r or cos r by quadrant from their Taylor series (through r^17
//! and r^18: the first terms left out are below 2^-63 relative).
//!
//! Below |x| = 2^30 the reduction is Cody-Waite with π/2 in three f64 parts: `x - q·P1` is
//! exact with an FMA, `q·P2` is split exactly by an FMA and subtracted with TwoSum, and
//! `q·P3` goes into the tail; what π/2 - P1 - P2 - P3 (below 2^-163) leaves out is under
//! 2^-133, far below any |r| an f64 can give (2^-62). From 2^30 up (inf included) the code
//! branches to the Payne-Hanek reduction; the branch depends on each thread's own element
//! and surrounds no barrier or shuffle.

use super::ops::{Ops, F, I, ROUNDER};
use super::payne_hanek::PIO2_MID;
use crate::llvm::Emit;
use inkwell::{FloatPredicate, IntPredicate};
use std::f64::consts::{FRAC_2_PI, FRAC_PI_2};

/// The part of π/2 that [`FRAC_PI_2`] and [`PIO2_MID`] leave out, rounded.
const PIO2_LO: f64 = -1.497_384_904_859_169_8e-33;
/// Where the Payne-Hanek reduction takes over.
const LARGE: f64 = 1_073_741_824.0; // 2^30
/// Below this, sin x rounds to x (x³/6 is below 2^-54.5 relative): returning x keeps -0
/// and subnormals exact.
const SIN_IS_X: f64 = 1.490_116_119_384_765_6e-8; // 2^-26

fn fact(n: u32) -> f64 {
    (1..=n).map(f64::from).product() // exact for n ≤ 18
}

/// `(-1)^n / (2n+1)!` for n = 8 down to 1: the series of (sin r - r) / r³ in r².
fn sin_series() -> Vec<f64> {
    (1..=8)
        .rev()
        .map(|n| if n % 2 == 0 { 1.0 } else { -1.0 } / fact(2 * n + 1))
        .collect()
}

/// `(-1)^n / (2n)!` for n = 9 down to 2: the series of (cos r - 1 + r²/2) / r⁴ in r².
fn cos_series() -> Vec<f64> {
    (2..=9)
        .rev()
        .map(|n| if n % 2 == 0 { 1.0 } else { -1.0 } / fact(2 * n))
        .collect()
}

impl<'ctx> Ops<'_, '_, 'ctx> {
    /// `(q, r, rlo)` with `x = q · π/2 + (r + rlo)`, q an i64 taken modulo 4.
    fn reduce_pio2(&self, x: F<'ctx>) -> (I<'ctx>, F<'ctx>, F<'ctx>) {
        let kr = self.fma(x, self.c(FRAC_2_PI), self.c(ROUNDER));
        let k = self.sub(kr, self.c(ROUNDER));
        let q = self.isub(self.bits(kr), self.bits(self.c(ROUNDER)));
        // Exact: x and k·P1 are multiples of 2^-53 (or x is below π/4 and k = 0) and the
        // difference is below 2.
        let r1 = self.fma(self.neg(k), self.c(FRAC_PI_2), x);
        let p = self.mul(k, self.c(PIO2_MID));
        let pe = self.fma(k, self.c(PIO2_MID), self.neg(p));
        let (t, te) = self.two_sum(r1, self.neg(p));
        let tail = self.fma(self.neg(k), self.c(PIO2_LO), self.sub(te, pe));
        let (r, rlo) = self.fast_two_sum(t, tail);

        // |x| ≥ 2^30 (or inf): Payne-Hanek on |x|, the signs flipped back for x < 0.
        let e = self.e;
        let large = self.fcmp(FloatPredicate::OGE, self.abs(x), self.c(LARGE));
        let start = e.b.get_insert_block().unwrap();
        let func = start.get_parent().unwrap();
        let big = e.ctx.append_basic_block(func, "trig.large");
        let join = e.ctx.append_basic_block(func, "trig.reduced");
        e.b.build_conditional_branch(large, big, join).unwrap();
        e.b.position_at_end(big);
        let (bq, br, brlo) = self.payne_hanek(self.abs(x));
        let neg = self.fcmp(FloatPredicate::OLT, x, self.c(0.0));
        let bq = self.iselect(neg, self.isub(self.i(0), bq), bq);
        let br = self.select(neg, self.neg(br), br);
        let brlo = self.select(neg, self.neg(brlo), brlo);
        let big_end = e.b.get_insert_block().unwrap();
        e.b.build_unconditional_branch(join).unwrap();
        e.b.position_at_end(join);
        let phi = |small: inkwell::values::BasicValueEnum<'ctx>,
                   large: inkwell::values::BasicValueEnum<'ctx>| {
            let p = e.b.build_phi(small.get_type(), "").unwrap();
            p.add_incoming(&[(&small, start), (&large, big_end)]);
            p.as_basic_value()
        };
        (
            phi(q.into(), bq.into()).into_int_value(),
            phi(r.into(), br.into()).into_float_value(),
            phi(rlo.into(), brlo.into()).into_float_value(),
        )
    }

    /// `sin x` (or `cos x` when `cos`): the quadrant picks ±sin r or ±cos r.
    fn sin_cos(&self, x: F<'ctx>, cos: bool) -> F<'ctx> {
        let (q, r, rlo) = self.reduce_pio2(x);
        let q = if cos { self.iadd(q, self.i(1)) } else { q };
        let z = self.mul(r, r);
        // sin(r + rlo) = r + (r³ S(r²) + rlo · cos r), cos r ≈ 1 - r²/2 for the tiny rlo.
        let s = self.horner(z, &sin_series());
        let ts = self.fma(
            self.mul(r, z),
            s,
            self.mul(rlo, self.fma(self.c(-0.5), z, self.c(1.0))),
        );
        let sin = self.add(r, ts);
        // cos(r + rlo) = (1 - r²/2) + (r⁴ C(r²) - r · rlo): 1 - z/2 split exactly by
        // Fast2Sum, z = r² with its FMA error.
        let c = self.horner(z, &cos_series());
        let hz = self.mul(z, self.c(0.5));
        let (w, we) = self.fast_two_sum(self.c(1.0), self.neg(hz));
        let zlo = self.fma(r, r, self.neg(z));
        let tc = self.add(
            self.fma(self.c(-0.5), zlo, we),
            self.fma(self.mul(z, z), c, self.neg(self.mul(r, rlo))),
        );
        let cos_r = self.add(w, tc);
        let odd = self.icmp(IntPredicate::NE, self.and(q, self.i(1)), self.i(0));
        let v = self.select(odd, cos_r, sin);
        let negate = self.icmp(IntPredicate::NE, self.and(q, self.i(2)), self.i(0));
        let v = self.select(negate, self.neg(v), v);
        let ax = self.abs(x);
        let v = if cos {
            v
        } else {
            self.select(self.fcmp(FloatPredicate::OLT, ax, self.c(SIN_IS_X)), x, v)
        };
        // The reduction of inf is meaningless: sin(±inf) = cos(±inf) = NaN. (A NaN x gives
        // NaN through the arithmetic.)
        self.select(
            self.fcmp(FloatPredicate::OEQ, ax, self.c(f64::INFINITY)),
            self.c(f64::NAN),
            v,
        )
    }
}

impl<'ctx> Emit<'_, 'ctx> {
    /// `sin x` in f64 without a libm call (see the module doc), for every finite x;
    /// sin(±0) = ±0, sin(±inf) = NaN.
    pub(crate) fn sin_f64(&self, x: F<'ctx>) -> F<'ctx> {
        Ops { e: self }.sin_cos(x, false)
    }

    /// `cos x` in f64 without a libm call, for every finite x; cos(±inf) = NaN.
    pub(crate) fn cos_f64(&self, x: F<'ctx>) -> F<'ctx> {
        Ops { e: self }.sin_cos(x, true)
    }
}
