//! Payne-Hanek reduction of a large |x| modulo π/2, in integers: x = m · 2^e with m the
//! 53-bit integer mantissa, and only a 192-bit window of the bits of 2/π matters for
//! `x · 2/π mod 4`. The bits before the window give multiples of 4; those after it change
//! the product by less than 2^-137. The 192-bit product's top two bits are the quadrant and
//! the other 190 its fraction, of which at least 128 significant bits survive the
//! cancellation: no f64 lies closer to a multiple of π/2 than 2^-62 relative to π/2
//! (the worst case, 6381956970095103 · 2^797, is within 2^-61.9).
//!
//! The bits come from a constant table in the module (`tritium.two_over_pi`, 20 words):
//! a word of zeros, so that exponents down to 2^-10 find a full window, then 1216 bits of
//! 2/π, enough for the largest exponent.

use super::ops::{Ops, F, F64, I};
use crate::llvm::Result;
use inkwell::module::Linkage;
use inkwell::values::PointerValue;
use inkwell::IntPredicate;

/// 64 zero bits, then the binary digits of 2/π = 0.1010 0010 1111 1001 ... (the first
/// after the point is bit 0 of word 1), most significant first in each word, computed
/// with 2000-bit arithmetic.
const TWO_OVER_PI: [u64; 20] = [
    0x0000_0000_0000_0000,
    0xa2f9_836e_4e44_1529,
    0xfc27_57d1_f534_ddc0,
    0xdb62_9599_3c43_9041,
    0xfe51_63ab_debb_c561,
    0xb724_6e3a_424d_d2e0,
    0x0649_2eea_09d1_921c,
    0xfe1d_eb1c_b129_a73e,
    0xe882_35f5_2ebb_4484,
    0xe99c_7026_b45f_7e41,
    0x3991_d639_8353_39f4,
    0x9c84_5f8b_bdf9_283b,
    0x1ff8_97ff_de05_980f,
    0xef2f_118b_5a0a_6d1f,
    0x6d36_7ecf_27cb_09b7,
    0x4f46_3f66_9e5f_ea2d,
    0x7527_bac7_ebe5_f17b,
    0x3d07_39f7_8a52_92ea,
    0x6bfb_5fb1_1f8d_5d08,
    0x5603_3046_fc7b_6bab,
];

impl<'ctx> Ops<'_, '_, 'ctx> {
    /// The table of 2/π bits, added to the module the first time.
    fn two_over_pi(&self) -> PointerValue<'ctx> {
        let name = "tritium.two_over_pi";
        if let Some(g) = self.e.module.get_global(name) {
            return g.as_pointer_value();
        }
        let i64t = self.e.ctx.i64_type();
        let words: Vec<_> = TWO_OVER_PI
            .iter()
            .map(|w| i64t.const_int(*w, false))
            .collect();
        let init = i64t.const_array(&words);
        let g = self.e.module.add_global(init.get_type(), None, name);
        g.set_initializer(&init);
        g.set_constant(true);
        g.set_linkage(Linkage::Private);
        g.set_unnamed_addr(true);
        g.as_pointer_value()
    }

    /// Word `i` of the table (`i` is in bounds by construction).
    fn table_word(&self, table: PointerValue<'ctx>, i: I<'ctx>) -> Result<I<'ctx>> {
        let i64t = self.e.ctx.i64_type();
        let arr = i64t.array_type(TWO_OVER_PI.len() as u32);
        // SAFETY: the callers clamp `i` to the table.
        let p = unsafe {
            self.e
                .b
                .build_in_bounds_gep(arr, table, &[self.i(0), i], "")?
        };
        Ok(self.e.b.build_load(i64t, p, "")?.into_int_value())
    }

    /// The high and low 64 bits of the 128-bit product `a · b` of two u64.
    fn mul_wide(&self, a: I<'ctx>, b: I<'ctx>) -> Result<(I<'ctx>, I<'ctx>)> {
        let (i64t, i128t) = (self.e.ctx.i64_type(), self.e.ctx.i128_type());
        let wide = |v| self.e.b.build_int_z_extend(v, i128t, "");
        let p = self.e.b.build_int_mul(wide(a)?, wide(b)?, "")?;
        let hi = self
            .e
            .b
            .build_right_shift(p, i128t.const_int(64, false), false, "")?;
        let narrow = |v| self.e.b.build_int_truncate(v, i64t, "");
        Ok((narrow(hi)?, narrow(p)?))
    }

    /// `(q, r, rlo)` with `ax = q · π/2 + (r + rlo)` (q modulo 4, |r| ≤ π/4 + tiny,
    /// `r + rlo` within 2^-100 relative) for a finite `ax` ≥ 2^-10; a larger exponent (inf)
    /// reads the last window and gives a meaningless finite result.
    pub fn payne_hanek(&self, ax: F<'ctx>) -> Result<(I<'ctx>, F<'ctx>, F<'ctx>)> {
        debug_assert_eq!(self.f.bits, 64, "Payne-Hanek is written in f64 and i64");
        let bits = self.bits(ax)?;
        let bexp = self.lshr(bits, 52)?;
        let bexp = self.iselect(
            self.icmp(IntPredicate::SGT, bexp, self.i(2046))?,
            self.i(2046),
            bexp,
        )?;
        let m = self.iadd(self.and(bits, self.i((1 << 52) - 1))?, self.i(1 << 52))?;
        // x = m · 2^e with e = bexp - 1075. The window starts at 2/π's bit e - 1 (the bit
        // of weight 2^-(e-1)); with the table's zero word in front that is stream bit
        // j = e + 62 (bit 2^-1 is stream bit 64), clamped at 0 (which needs e ≥ -62).
        let j = self.iadd(bexp, self.i(62 - 1075))?;
        let j = self.iselect(self.icmp(IntPredicate::SLT, j, self.i(0))?, self.i(0), j)?;
        let word = self.lshr(j, 6)?;
        let shift = self.and(j, self.i(63))?;
        let table = self.two_over_pi();
        let t: Vec<I> = (0..4)
            .map(|k| self.table_word(table, self.iadd(word, self.i(k))?))
            .collect::<Result<_>>()?;
        // The window, most significant word first.
        let w2 = self.fshl(t[0], t[1], shift)?;
        let w1 = self.fshl(t[1], t[2], shift)?;
        let w0 = self.fshl(t[2], t[3], shift)?;
        // p = m · w mod 2^192 (m < 2^53): x · 2/π mod 4 = p · 2^-190.
        let (h0, p0) = self.mul_wide(m, w0)?;
        let (h1, l1) = self.mul_wide(m, w1)?;
        let p1 = self.iadd(l1, h0)?;
        let carry = self.icmp(IntPredicate::ULT, p1, l1)?;
        let carry = self
            .e
            .b
            .build_int_z_extend(carry, self.e.ctx.i64_type(), "")?;
        let p2 = self.iadd(self.iadd(h1, carry)?, self.imul(m, w2)?)?;
        // The nearest quadrant: add half a quadrant (bit 189) and keep the top two bits.
        let q = self.lshr(self.iadd(p2, self.i(1 << 61))?, 62)?;
        // The fraction in [-1/2, 1/2) as a signed 192-bit f (p's low 190 bits, shifted
        // up), then |f| by one's complement (off by 2^-192, negligible).
        let two = self.i(2);
        let f2 = self.fshl(p2, p1, two)?;
        let f1 = self.fshl(p1, p0, two)?;
        let f0 = self.shl(p0, 2)?;
        let sign = self.ashr(f2, 63)?;
        let (a2, a1, a0) = (
            self.xor(f2, sign)?,
            self.xor(f1, sign)?,
            self.xor(f0, sign)?,
        );
        // Normalize: a2 is never 0 for an f64 (|f| ≥ 2^-63); 63 at most keeps the shifts
        // defined anyway.
        let lz = self
            .e
            .intrinsic(
                "llvm.ctlz",
                &[self.e.ctx.i64_type().into()],
                &[a2.into(), self.e.ctx.bool_type().const_zero().into()],
            )?
            .into_int_value();
        let lz = self.iselect(
            self.icmp(IntPredicate::UGT, lz, self.i(63))?,
            self.i(63),
            lz,
        )?;
        let n2 = self.fshl(a2, a1, lz)?;
        let n1 = self.fshl(a1, a0, lz)?;
        // |f| ≈ hi + lo: the top 53 bits exactly, the next 64 rounded to 53.
        let hi = self.mul(
            self.u_to_f(self.lshr(n2, 11)?)?,
            self.pow2(self.isub(self.i(-53), lz)?)?,
        )?;
        let lo = self.mul(
            self.u_to_f(self.fshl(n2, n1, self.i(53))?)?,
            self.pow2(self.isub(self.i(-117), lz)?)?,
        )?;
        // r = ±|f| · π/2 in double-double.
        let [p1, p2, _] = F64.pio2;
        let rh = self.mul(hi, self.c(p1))?;
        let rl = self.fma(hi, self.c(p1), self.neg(rh)?)?;
        let rl = self.add(rl, self.fma(hi, self.c(p2), self.mul(lo, self.c(p1))?)?)?;
        let (r, rlo) = self.fast_two_sum(rh, rl)?;
        let neg = self.icmp(IntPredicate::NE, sign, self.i(0))?;
        Ok((
            q,
            self.select(neg, self.neg(r)?, r)?,
            self.select(neg, self.neg(rlo)?, rlo)?,
        ))
    }
}

impl<'ctx> Ops<'_, '_, 'ctx> {
    /// [`Ops::payne_hanek`] for the format's `ax`: f32 goes through f64 (exactly), and the
    /// result comes back as an f32 double-single and an i32 quadrant.
    pub fn payne_hanek_in_format(&self, ax: F<'ctx>) -> Result<(I<'ctx>, F<'ctx>, F<'ctx>)> {
        if self.f.bits == 64 {
            return self.payne_hanek(ax);
        }
        let (o, b) = (self.in_f64(), self.e.b);
        let (q, r, rlo) = o.payne_hanek(b.build_float_ext(ax, o.ty(), "")?)?;
        let q = b.build_int_truncate(q, self.ity(), "")?;
        let r32 = b.build_float_trunc(r, self.ty(), "")?;
        let back = b.build_float_ext(r32, o.ty(), "")?;
        let rlo32 = b.build_float_trunc(o.add(o.sub(r, back)?, rlo)?, self.ty(), "")?;
        Ok((q, r32, rlo32))
    }
}
