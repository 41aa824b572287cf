//! Shorthands for the f64 and i64 instructions the math functions are written in, and the
//! error-free transformations they rely on. Plain `fmul`/`fadd` are emitted without
//! fast-math flags, so neither LLVM nor the NVPTX backend contracts or reassociates them:
//! TwoSum stays exact. Fused operations are explicit `llvm.fma` calls (`fma.rn.f64` in
//! PTX; one instruction on hosts with FMA).

use crate::llvm::Emit;
use inkwell::values::{FloatValue, IntValue};
use inkwell::{FloatPredicate, IntPredicate};

/// An f64 value.
pub(super) type F<'ctx> = FloatValue<'ctx>;
/// An integer value (i64 unless said otherwise).
pub(super) type I<'ctx> = IntValue<'ctx>;

/// 1.5 · 2^52: adding it to |v| < 2^51 rounds v to an integer (ties to even), which
/// subtracting it again gives exactly; the sum's bits minus its own are that integer.
pub(super) const ROUNDER: f64 = 6_755_399_441_055_744.0;

/// Emits f64/i64 arithmetic at the builder's position.
pub(super) struct Ops<'e, 'a, 'ctx> {
    /// Where the instructions go.
    pub e: &'e Emit<'a, 'ctx>,
}

impl<'ctx> Ops<'_, '_, 'ctx> {
    /// The f64 constant `v`.
    pub fn c(&self, v: f64) -> F<'ctx> {
        self.e.ctx.f64_type().const_float(v)
    }

    /// The i64 constant `v`.
    pub fn i(&self, v: i64) -> I<'ctx> {
        self.e.ctx.i64_type().const_int(v as u64, true)
    }

    /// `a + b`, rounded.
    pub fn add(&self, a: F<'ctx>, b: F<'ctx>) -> F<'ctx> {
        self.e.b.build_float_add(a, b, "").unwrap()
    }

    /// `a - b`, rounded.
    pub fn sub(&self, a: F<'ctx>, b: F<'ctx>) -> F<'ctx> {
        self.e.b.build_float_sub(a, b, "").unwrap()
    }

    /// `a * b`, rounded.
    pub fn mul(&self, a: F<'ctx>, b: F<'ctx>) -> F<'ctx> {
        self.e.b.build_float_mul(a, b, "").unwrap()
    }

    /// `a / b`, correctly rounded (`div.rn.f64` in PTX).
    pub fn div(&self, a: F<'ctx>, b: F<'ctx>) -> F<'ctx> {
        self.e.b.build_float_div(a, b, "").unwrap()
    }

    /// `-a`.
    pub fn neg(&self, a: F<'ctx>) -> F<'ctx> {
        self.e.b.build_float_neg(a, "").unwrap()
    }

    /// `a * b + c` with one rounding.
    pub fn fma(&self, a: F<'ctx>, b: F<'ctx>, c: F<'ctx>) -> F<'ctx> {
        let t = self.e.ctx.f64_type();
        self.e
            .intrinsic("llvm.fma", &[t.into()], &[a.into(), b.into(), c.into()])
            .into_float_value()
    }

    /// `|a|`.
    pub fn abs(&self, a: F<'ctx>) -> F<'ctx> {
        let t = self.e.ctx.f64_type();
        self.e
            .intrinsic("llvm.fabs", &[t.into()], &[a.into()])
            .into_float_value()
    }

    /// TwoSum (Knuth): `(s, err)` with `s = a + b` rounded and `s + err == a + b` exactly,
    /// whatever the magnitudes.
    pub fn two_sum(&self, a: F<'ctx>, b: F<'ctx>) -> (F<'ctx>, F<'ctx>) {
        let s = self.add(a, b);
        let bb = self.sub(s, a);
        let err = self.add(self.sub(a, self.sub(s, bb)), self.sub(b, bb));
        (s, err)
    }

    /// `(s, err)` with `s = a + b` rounded and `s + err == a + b` exactly, for |a| ≥ |b|
    /// (Dekker's Fast2Sum).
    pub fn fast_two_sum(&self, a: F<'ctx>, b: F<'ctx>) -> (F<'ctx>, F<'ctx>) {
        let s = self.add(a, b);
        (s, self.sub(b, self.sub(s, a)))
    }

    /// `p(x)` for `coeffs` from the highest degree down, by Horner's rule with FMA.
    pub fn horner(&self, x: F<'ctx>, coeffs: &[f64]) -> F<'ctx> {
        let mut p = self.c(coeffs[0]);
        for k in &coeffs[1..] {
            p = self.fma(p, x, self.c(*k));
        }
        p
    }

    /// An ordered float comparison.
    pub fn fcmp(&self, p: FloatPredicate, a: F<'ctx>, b: F<'ctx>) -> I<'ctx> {
        self.e.b.build_float_compare(p, a, b, "").unwrap()
    }

    /// An integer comparison.
    pub fn icmp(&self, p: IntPredicate, a: I<'ctx>, b: I<'ctx>) -> I<'ctx> {
        self.e.b.build_int_compare(p, a, b, "").unwrap()
    }

    /// `cond ? a : b` for floats.
    pub fn select(&self, cond: I<'ctx>, a: F<'ctx>, b: F<'ctx>) -> F<'ctx> {
        self.e
            .b
            .build_select(cond, a, b, "")
            .unwrap()
            .into_float_value()
    }

    /// `cond ? a : b` for integers.
    pub fn iselect(&self, cond: I<'ctx>, a: I<'ctx>, b: I<'ctx>) -> I<'ctx> {
        self.e
            .b
            .build_select(cond, a, b, "")
            .unwrap()
            .into_int_value()
    }

    /// The bits of `a` as an i64.
    pub fn bits(&self, a: F<'ctx>) -> I<'ctx> {
        let t = self.e.ctx.i64_type();
        self.e.b.build_bit_cast(a, t, "").unwrap().into_int_value()
    }

    /// The f64 with bits `a`.
    pub fn float_of(&self, a: I<'ctx>) -> F<'ctx> {
        let t = self.e.ctx.f64_type();
        self.e
            .b
            .build_bit_cast(a, t, "")
            .unwrap()
            .into_float_value()
    }

    /// `2^k` for an i64 `k` in [-1022, 1023], built in the exponent field.
    pub fn pow2(&self, k: I<'ctx>) -> F<'ctx> {
        let biased = self.iadd(k, self.i(1023));
        self.float_of(self.shl(biased, 52))
    }

    /// `a + b` (wrapping).
    pub fn iadd(&self, a: I<'ctx>, b: I<'ctx>) -> I<'ctx> {
        self.e.b.build_int_add(a, b, "").unwrap()
    }

    /// `a - b` (wrapping).
    pub fn isub(&self, a: I<'ctx>, b: I<'ctx>) -> I<'ctx> {
        self.e.b.build_int_sub(a, b, "").unwrap()
    }

    /// `a * b` (wrapping).
    pub fn imul(&self, a: I<'ctx>, b: I<'ctx>) -> I<'ctx> {
        self.e.b.build_int_mul(a, b, "").unwrap()
    }

    /// `a & b`.
    pub fn and(&self, a: I<'ctx>, b: I<'ctx>) -> I<'ctx> {
        self.e.b.build_and(a, b, "").unwrap()
    }

    /// `a ^ b`.
    pub fn xor(&self, a: I<'ctx>, b: I<'ctx>) -> I<'ctx> {
        self.e.b.build_xor(a, b, "").unwrap()
    }

    /// `a << n` for a constant `n` below the width.
    pub fn shl(&self, a: I<'ctx>, n: u64) -> I<'ctx> {
        let n = a.get_type().const_int(n, false);
        self.e.b.build_left_shift(a, n, "").unwrap()
    }

    /// `a >> n`, logical, for a constant `n` below the width.
    pub fn lshr(&self, a: I<'ctx>, n: u64) -> I<'ctx> {
        let n = a.get_type().const_int(n, false);
        self.e.b.build_right_shift(a, n, false, "").unwrap()
    }

    /// `a >> n`, arithmetic, for a constant `n` below the width.
    pub fn ashr(&self, a: I<'ctx>, n: u64) -> I<'ctx> {
        let n = a.get_type().const_int(n, false);
        self.e.b.build_right_shift(a, n, true, "").unwrap()
    }

    /// `(hi << s) | (lo >> (64 - s))` for i64 `hi`, `lo` and `s` taken modulo 64: the 64 bits
    /// starting `s` bits into the 128-bit `hi:lo` (`llvm.fshl`; `s == 0` gives `hi`).
    pub fn fshl(&self, hi: I<'ctx>, lo: I<'ctx>, s: I<'ctx>) -> I<'ctx> {
        let t = hi.get_type();
        self.e
            .intrinsic("llvm.fshl", &[t.into()], &[hi.into(), lo.into(), s.into()])
            .into_int_value()
    }

    /// An unsigned integer converted to f64 (exact below 2^53).
    pub fn u_to_f(&self, a: I<'ctx>) -> F<'ctx> {
        let t = self.e.ctx.f64_type();
        self.e.b.build_unsigned_int_to_float(a, t, "").unwrap()
    }
}
