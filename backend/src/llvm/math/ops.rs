//! The precisions the math functions are emitted in, shorthands for the float and integer
//! instructions they are written in, and the error-free transformations they rely on.
//! Plain `fmul`/`fadd` are emitted without fast-math flags, so neither LLVM nor the NVPTX
//! backend contracts or reassociates them (PTX `add.rn`/`mul.rn`, which ptxas does not
//! fuse either): TwoSum stays exact. Fused operations are explicit `llvm.fma` calls
//! (`fma.rn` in PTX; one instruction on hosts with FMA).

use crate::llvm::Emit;
use crate::llvm::Result;
use inkwell::types::{FloatType, IntType};
use inkwell::values::{FloatValue, IntValue};
use inkwell::{FloatPredicate, IntPredicate};

/// A float value of the format being emitted.
pub(super) type F<'ctx> = FloatValue<'ctx>;
/// An integer value, as wide as the format's floats unless said otherwise.
pub(super) type I<'ctx> = IntValue<'ctx>;

/// A float format with the constants the functions need in it: every constant is exactly
/// representable in the format, multi-part ones are the leading parts of the exact value
/// (each the nearest float to what the previous parts leave).
pub(super) struct Format {
    /// 32 or 64: the float and integer width.
    pub bits: u32,
    /// Stored mantissa bits.
    pub mant: u64,
    /// The exponent bias.
    pub bias: i64,
    /// The smallest normal number.
    pub min_normal: f64,
    /// Multiplying a subnormal by 2^`subnormal_shift` makes it normal.
    pub subnormal_shift: i32,
    /// 1.5 · 2^mant: adding it to |v| < 2^(mant-1) rounds v to an integer (ties to even),
    /// which subtracting it again gives exactly; the sum's bits minus its own are that
    /// integer.
    pub rounder: f64,
    /// π/2 in three parts.
    pub pio2: [f64; 3],
    /// 2/π, rounded.
    pub two_over_pi: f64,
    /// ln 2 in two parts.
    pub ln2: [f64; 2],
    /// log2(e) in two parts.
    pub log2e: [f64; 2],
    /// The bits of the float nearest √½.
    pub sqrt_half_bits: i64,
    /// e^r keeps the Taylor terms through r^`exp_terms`: for |r| ≤ 0.35 (ln2/2 and a
    /// rounding), the first left out is below 2^-(mant+5) relative.
    pub exp_terms: u32,
    /// Terms of (atanh(s) - s) / s³ kept: |s| ≤ 0.1716, the first left out is below
    /// 2^-(mant+5) relative.
    pub atanh_terms: u32,
    /// sin r keeps the Taylor terms through r^(2·sin_terms + 1), cos r through
    /// r^(2·cos_terms): for |r| ≤ π/4, the first left out is below 2^-(mant+5) relative.
    pub sin_terms: u32,
    /// See `sin_terms`.
    pub cos_terms: u32,
    /// From this |x| up, sin and cos reduce with Payne-Hanek (in f64) instead of
    /// Cody-Waite.
    pub large: f64,
    /// Below this |x|, sin x rounds to x.
    pub sin_is_x: f64,
}

/// f64 (IEEE binary64).
pub(super) const F64: Format = Format {
    bits: 64,
    mant: 52,
    bias: 1023,
    min_normal: f64::MIN_POSITIVE,
    subnormal_shift: 54,
    rounder: 6_755_399_441_055_744.0,
    pio2: [
        std::f64::consts::FRAC_PI_2,
        6.123_233_995_736_766e-17,
        -1.497_384_904_859_169_8e-33,
    ],
    two_over_pi: std::f64::consts::FRAC_2_PI,
    ln2: [std::f64::consts::LN_2, 2.319_046_813_846_299_6e-17],
    log2e: [std::f64::consts::LOG2_E, 2.035_527_374_093_103_3e-17],
    sqrt_half_bits: 0x3FE6_A09E_667F_3BCD,
    exp_terms: 14,
    atanh_terms: 10,
    sin_terms: 8,
    cos_terms: 9,
    // 2^30: the f64 Cody-Waite reduction holds far beyond (see `trig`).
    large: 1_073_741_824.0,
    // 2^-26: x³/6 is below 2^-54.5 relative.
    sin_is_x: 1.490_116_119_384_765_6e-8,
};

/// f32 (IEEE binary32). The parts are f32 values, written as the f64 they equal.
pub(super) const F32: Format = Format {
    bits: 32,
    mant: 23,
    bias: 127,
    min_normal: 1.175_494_350_822_287_5e-38,
    subnormal_shift: 25,
    rounder: 12_582_912.0,
    pio2: [
        1.570_796_370_506_286_6,      // 0x3FC90FDB
        -4.371_138_828_673_793e-8,    // 0xB33BBD2E
        -1.715_124_510_005_881_9e-15, // 0xA6F72CED
    ],
    two_over_pi: 0.636_619_746_685_028_1, // 0x3F22F983
    ln2: [0.693_147_182_464_599_6, -1.904_654_212_125_933_6e-9],
    log2e: [1.442_695_021_629_333_5, 1.925_963_033_500_011e-8],
    sqrt_half_bits: 0x3F35_04F3,
    // 0.35^9/9! = 2^-32.6.
    exp_terms: 8,
    atanh_terms: 4,
    sin_terms: 4,
    cos_terms: 5,
    // 2^17: below, k = round(x · 2/π) rounded in f32 is at most off by 2^-8, so |r| stays
    // within the polynomials' range, and the part of π/2 the three parts leave out
    // (2^-76) times k stays below 2^-30 relative to any f32's r (2^-27.8 at least).
    large: 131_072.0,
    // 2^-12: x³/6 is below 2^-26.5 relative.
    sin_is_x: 2.441_406_25e-4,
};

/// Emits arithmetic in format `f` at the builder's position.
pub(super) struct Ops<'e, 'a, 'ctx> {
    /// Where the instructions go.
    pub e: &'e Emit<'a, 'ctx>,
    /// The float format.
    pub f: &'static Format,
}

impl<'e, 'a, 'ctx> Ops<'e, 'a, 'ctx> {
    /// Emits through `e` in format `f`.
    pub fn new(e: &'e Emit<'a, 'ctx>, f: &'static Format) -> Self {
        Ops { e, f }
    }

    /// The float type.
    pub fn ty(&self) -> FloatType<'ctx> {
        match self.f.bits {
            32 => self.e.ctx.f32_type(),
            _ => self.e.ctx.f64_type(),
        }
    }

    /// The integer type as wide as the float type.
    pub fn ity(&self) -> IntType<'ctx> {
        self.e.ctx.custom_width_int_type(self.f.bits)
    }

    /// The constant `v`, rounded to the format.
    pub fn c(&self, v: f64) -> F<'ctx> {
        let v = if self.f.bits == 32 {
            v as f32 as f64
        } else {
            v
        };
        self.ty().const_float(v)
    }

    /// The integer constant `v`.
    pub fn i(&self, v: i64) -> I<'ctx> {
        self.ity().const_int(v as u64, true)
    }

    /// `a + b`, rounded.
    pub fn add(&self, a: F<'ctx>, b: F<'ctx>) -> Result<F<'ctx>> {
        Ok(self.e.b.build_float_add(a, b, "")?)
    }

    /// `a - b`, rounded.
    pub fn sub(&self, a: F<'ctx>, b: F<'ctx>) -> Result<F<'ctx>> {
        Ok(self.e.b.build_float_sub(a, b, "")?)
    }

    /// `a * b`, rounded.
    pub fn mul(&self, a: F<'ctx>, b: F<'ctx>) -> Result<F<'ctx>> {
        Ok(self.e.b.build_float_mul(a, b, "")?)
    }

    /// `a / b`, correctly rounded (`div.rn.f64` in PTX).
    pub fn div(&self, a: F<'ctx>, b: F<'ctx>) -> Result<F<'ctx>> {
        Ok(self.e.b.build_float_div(a, b, "")?)
    }

    /// `-a`.
    pub fn neg(&self, a: F<'ctx>) -> Result<F<'ctx>> {
        Ok(self.e.b.build_float_neg(a, "")?)
    }

    /// `a * b + c` with one rounding.
    pub fn fma(&self, a: F<'ctx>, b: F<'ctx>, c: F<'ctx>) -> Result<F<'ctx>> {
        let t = self.ty();
        Ok(self
            .e
            .intrinsic("llvm.fma", &[t.into()], &[a.into(), b.into(), c.into()])?
            .into_float_value())
    }

    /// `|a|`.
    pub fn abs(&self, a: F<'ctx>) -> Result<F<'ctx>> {
        let t = self.ty();
        Ok(self
            .e
            .intrinsic("llvm.fabs", &[t.into()], &[a.into()])?
            .into_float_value())
    }

    /// TwoSum (Knuth): `(s, err)` with `s = a + b` rounded and `s + err == a + b` exactly,
    /// whatever the magnitudes.
    pub fn two_sum(&self, a: F<'ctx>, b: F<'ctx>) -> Result<(F<'ctx>, F<'ctx>)> {
        let s = self.add(a, b)?;
        let bb = self.sub(s, a)?;
        let err = self.add(self.sub(a, self.sub(s, bb)?)?, self.sub(b, bb)?)?;
        Ok((s, err))
    }

    /// `(s, err)` with `s = a + b` rounded and `s + err == a + b` exactly, for |a| ≥ |b|
    /// (Dekker's Fast2Sum).
    pub fn fast_two_sum(&self, a: F<'ctx>, b: F<'ctx>) -> Result<(F<'ctx>, F<'ctx>)> {
        let s = self.add(a, b)?;
        Ok((s, self.sub(b, self.sub(s, a)?)?))
    }

    /// `p(x)` for `coeffs` from the highest degree down, by Horner's rule with FMA.
    pub fn horner(&self, x: F<'ctx>, coeffs: &[f64]) -> Result<F<'ctx>> {
        let mut p = self.c(coeffs[0]);
        for k in &coeffs[1..] {
            p = self.fma(p, x, self.c(*k))?;
        }
        Ok(p)
    }

    /// An ordered float comparison.
    pub fn fcmp(&self, p: FloatPredicate, a: F<'ctx>, b: F<'ctx>) -> Result<I<'ctx>> {
        Ok(self.e.b.build_float_compare(p, a, b, "")?)
    }

    /// An integer comparison.
    pub fn icmp(&self, p: IntPredicate, a: I<'ctx>, b: I<'ctx>) -> Result<I<'ctx>> {
        Ok(self.e.b.build_int_compare(p, a, b, "")?)
    }

    /// `cond ? a : b` for floats.
    pub fn select(&self, cond: I<'ctx>, a: F<'ctx>, b: F<'ctx>) -> Result<F<'ctx>> {
        Ok(self.e.b.build_select(cond, a, b, "")?.into_float_value())
    }

    /// `cond ? a : b` for integers.
    pub fn iselect(&self, cond: I<'ctx>, a: I<'ctx>, b: I<'ctx>) -> Result<I<'ctx>> {
        Ok(self.e.b.build_select(cond, a, b, "")?.into_int_value())
    }

    /// The bits of `a`.
    pub fn bits(&self, a: F<'ctx>) -> Result<I<'ctx>> {
        let t = self.ity();
        Ok(self.e.b.build_bit_cast(a, t, "")?.into_int_value())
    }

    /// The float with bits `a`.
    pub fn float_of(&self, a: I<'ctx>) -> Result<F<'ctx>> {
        let t = self.ty();
        Ok(self.e.b.build_bit_cast(a, t, "")?.into_float_value())
    }

    /// `2^k` for a normal power of two, built in the exponent field.
    pub fn pow2(&self, k: I<'ctx>) -> Result<F<'ctx>> {
        let biased = self.iadd(k, self.i(self.f.bias))?;
        self.float_of(self.shl(biased, self.f.mant)?)
    }

    /// `a + b` (wrapping).
    pub fn iadd(&self, a: I<'ctx>, b: I<'ctx>) -> Result<I<'ctx>> {
        Ok(self.e.b.build_int_add(a, b, "")?)
    }

    /// `a - b` (wrapping).
    pub fn isub(&self, a: I<'ctx>, b: I<'ctx>) -> Result<I<'ctx>> {
        Ok(self.e.b.build_int_sub(a, b, "")?)
    }

    /// `a * b` (wrapping).
    pub fn imul(&self, a: I<'ctx>, b: I<'ctx>) -> Result<I<'ctx>> {
        Ok(self.e.b.build_int_mul(a, b, "")?)
    }

    /// `a & b`.
    pub fn and(&self, a: I<'ctx>, b: I<'ctx>) -> Result<I<'ctx>> {
        Ok(self.e.b.build_and(a, b, "")?)
    }

    /// `a ^ b`.
    pub fn xor(&self, a: I<'ctx>, b: I<'ctx>) -> Result<I<'ctx>> {
        Ok(self.e.b.build_xor(a, b, "")?)
    }

    /// `a << n` for a constant `n` below the width.
    pub fn shl(&self, a: I<'ctx>, n: u64) -> Result<I<'ctx>> {
        let n = a.get_type().const_int(n, false);
        Ok(self.e.b.build_left_shift(a, n, "")?)
    }

    /// `a >> n`, logical, for a constant `n` below the width.
    pub fn lshr(&self, a: I<'ctx>, n: u64) -> Result<I<'ctx>> {
        let n = a.get_type().const_int(n, false);
        Ok(self.e.b.build_right_shift(a, n, false, "")?)
    }

    /// `a >> n`, arithmetic, for a constant `n` below the width.
    pub fn ashr(&self, a: I<'ctx>, n: u64) -> Result<I<'ctx>> {
        let n = a.get_type().const_int(n, false);
        Ok(self.e.b.build_right_shift(a, n, true, "")?)
    }

    /// `(hi << s) | (lo >> (w - s))` for w-bit `hi`, `lo` and `s` taken modulo w: the w bits
    /// starting `s` bits into the 2w-bit `hi:lo` (`llvm.fshl`; `s == 0` gives `hi`).
    pub fn fshl(&self, hi: I<'ctx>, lo: I<'ctx>, s: I<'ctx>) -> Result<I<'ctx>> {
        let t = hi.get_type();
        Ok(self
            .e
            .intrinsic("llvm.fshl", &[t.into()], &[hi.into(), lo.into(), s.into()])?
            .into_int_value())
    }

    /// An unsigned integer converted to the float type (exact below 2^(mant+1)).
    pub fn u_to_f(&self, a: I<'ctx>) -> Result<F<'ctx>> {
        Ok(self.e.b.build_unsigned_int_to_float(a, self.ty(), "")?)
    }

    /// A signed integer converted to the float type.
    pub fn s_to_f(&self, a: I<'ctx>) -> Result<F<'ctx>> {
        Ok(self.e.b.build_signed_int_to_float(a, self.ty(), "")?)
    }

    /// The same emitter in f64 (for f32 functions' f64 steps).
    pub fn in_f64(&self) -> Ops<'e, 'a, 'ctx> {
        Ops { e: self.e, f: &F64 }
    }
}
