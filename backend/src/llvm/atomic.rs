//! Read-modify-write atomics, shared by both generators: integers as `atomicrmw`, float
//! max/min (and the CPU's float add) as a compare-exchange loop on the bits (16 of them
//! for f16 and bf16).

use super::Emit;
use crate::llvm::{Positioned, Result};
use inkwell::values::{BasicValueEnum, IntValue, PointerValue};
use inkwell::{AtomicOrdering, AtomicRMWBinOp};
use tritium_dsl::ir::{AtomicOp, DType, Elem};

impl<'ctx> Emit<'_, 'ctx> {
    /// `atomicrmw` (sequentially consistent) of integer dtype `d`: max/min signed or
    /// unsigned by the dtype; returns the old value.
    pub(crate) fn int_atomic_rmw(
        &self,
        op: AtomicOp,
        d: DType,
        p: PointerValue<'ctx>,
        v: BasicValueEnum<'ctx>,
    ) -> Result<BasicValueEnum<'ctx>> {
        let signed = d.is_signed_int();
        let rop = match op {
            AtomicOp::Add => AtomicRMWBinOp::Add,
            AtomicOp::Xchg => AtomicRMWBinOp::Xchg,
            AtomicOp::Max if signed => AtomicRMWBinOp::Max,
            AtomicOp::Max => AtomicRMWBinOp::UMax,
            AtomicOp::Min if signed => AtomicRMWBinOp::Min,
            AtomicOp::Min => AtomicRMWBinOp::UMin,
            AtomicOp::And => AtomicRMWBinOp::And,
            AtomicOp::Or => AtomicRMWBinOp::Or,
            AtomicOp::Xor => AtomicRMWBinOp::Xor,
        };
        Ok(self
            .b
            .build_atomicrmw(
                rop,
                p,
                v.into_int_value(),
                AtomicOrdering::SequentiallyConsistent,
            )?
            .into())
    }

    /// A float read-modify-write of `d` at `p` as a compare-exchange loop on the bits of
    /// its memory form (16 of them for f16 and bf16, which [`decode_storage`] widens to
    /// f32 and [`to_storage`] rounds back as a store does): add rounds once, max/min are
    /// [`float_max_min`](Self::float_max_min) (no `atomicrmw fmax` leaves the sign of a
    /// zero open). Returns the old value.
    ///
    /// [`decode_storage`]: Self::decode_storage
    /// [`to_storage`]: Self::to_storage
    pub(crate) fn float_atomic_cas(
        &self,
        op: AtomicOp,
        d: DType,
        p: PointerValue<'ctx>,
        v: BasicValueEnum<'ctx>,
    ) -> Result<BasicValueEnum<'ctx>> {
        let bl = self.b;
        let seq = AtomicOrdering::SequentiallyConsistent;
        let it = self.ctx.custom_width_int_type(d.bits());
        let (elem, st) = (Elem::Scalar(d), self.storage_ty(d));
        // Compute form ↔ the bits in memory (bit casts to the same type fold away).
        let to_bits = |f: BasicValueEnum<'ctx>| -> Result<IntValue<'ctx>> {
            let s = self.to_storage(f, elem)?;
            Ok(bl.build_bit_cast(s, it, "")?.into_int_value())
        };
        let of_bits = |bits: IntValue<'ctx>| -> Result<BasicValueEnum<'ctx>> {
            let s = bl.build_bit_cast(bits, st, "")?;
            self.decode_storage(s, elem)
        };
        if op == AtomicOp::Xchg {
            let old = bl.build_atomicrmw(AtomicRMWBinOp::Xchg, p, to_bits(v)?, seq)?;
            return of_bits(old);
        }
        let pre = bl.current_block()?;
        let func = bl.current_function()?;
        let init = bl.build_load(it, p, "")?.into_int_value();
        let header = self.ctx.append_basic_block(func, "cas");
        let exit = self.ctx.append_basic_block(func, "cas.done");
        bl.build_unconditional_branch(header)?;
        bl.position_at_end(header);
        let phi = bl.build_phi(it, "seen")?;
        phi.add_incoming(&[(&init, pre)]);
        let seen = phi.as_basic_value().into_int_value();
        let old_f = of_bits(seen)?;
        let new_f = match op {
            AtomicOp::Add => Ok(bl
                .build_float_add(old_f.into_float_value(), v.into_float_value(), "")?
                .into()),
            AtomicOp::Max => self.float_max_min(true, old_f, v),
            AtomicOp::Min => self.float_max_min(false, old_f, v),
            AtomicOp::Xchg => unreachable!("handled above"),
            AtomicOp::And | AtomicOp::Or | AtomicOp::Xor => {
                unreachable!("the verifier rejects bitwise atomics on floats")
            }
        }?;
        let new_bits = to_bits(new_f)?;
        let r = bl.build_cmpxchg(p, seen, new_bits, seq, seq)?;
        let got = bl.build_extract_value(r, 0, "")?.into_int_value();
        let ok = bl.build_extract_value(r, 1, "")?.into_int_value();
        phi.add_incoming(&[(&got, bl.current_block()?)]);
        bl.build_conditional_branch(ok, exit, header)?;
        bl.position_at_end(exit);
        Ok(old_f)
    }
}
