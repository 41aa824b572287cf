//! Casts between dtypes with Rust `as` semantics: float → int saturates (NaN → 0), results
//! in f16/bf16 are rounded, anything → bool is `!= 0`.

use super::Emit;
use crate::llvm::Result;
use inkwell::values::BasicValueEnum;
use inkwell::{FloatPredicate, IntPredicate};
use tritium_dsl::ir::{DType, Elem};

impl<'ctx> Emit<'_, 'ctx> {
    /// The bits of a compute value of dtype `from` read as dtype `to` of the same width:
    /// through the storage forms (f16/bf16 compute in f32 but are stored as 16 bits).
    pub(crate) fn bitcast(
        &self,
        v: BasicValueEnum<'ctx>,
        from: DType,
        to: DType,
    ) -> Result<BasicValueEnum<'ctx>> {
        let stored = self.to_storage(v, Elem::Scalar(from))?;
        let bits = self
            .b
            .build_bit_cast(stored, self.storage_ty(to), "")
            .expect("the verifier checked the widths");
        self.decode_storage(bits, Elem::Scalar(to))
    }

    /// Converts a compute value of dtype `from` to dtype `to` (Rust `as` semantics).
    pub(crate) fn cast(
        &self,
        v: BasicValueEnum<'ctx>,
        from: DType,
        to: DType,
    ) -> Result<BasicValueEnum<'ctx>> {
        let bl = self.b;
        if from == to {
            return Ok(v);
        }
        let tt = self.compute_ty(to);
        if to.is_bool() {
            return if from.is_float() {
                let z = v.into_float_value().get_type().const_zero();
                Ok(bl
                    .build_float_compare(FloatPredicate::UNE, v.into_float_value(), z, "")?
                    .into())
            } else {
                let z = v.into_int_value().get_type().const_zero();
                Ok(bl
                    .build_int_compare(IntPredicate::NE, v.into_int_value(), z, "")?
                    .into())
            };
        }
        match (from.is_float(), to.is_float()) {
            (false, false) => {
                let signed = from.is_signed_int();
                Ok(bl
                    .build_int_cast_sign_flag(v.into_int_value(), tt.into_int_type(), signed, "")?
                    .into())
            }
            (false, true) => {
                let ft = tt.into_float_type();
                let f = if from.is_signed_int() {
                    bl.build_signed_int_to_float(v.into_int_value(), ft, "")?
                } else {
                    bl.build_unsigned_int_to_float(v.into_int_value(), ft, "")?
                };
                Ok(self.round_to(f.into(), to)?)
            }
            (true, false) => {
                let name = if to.is_signed_int() {
                    "llvm.fptosi.sat"
                } else {
                    "llvm.fptoui.sat"
                };
                Ok(self.intrinsic(name, &[tt, v.get_type()], &[v])?)
            }
            (true, true) => {
                let f = v.into_float_value();
                let ft = tt.into_float_type();
                let w = if f.get_type() == ft {
                    f
                } else if to == DType::F64 {
                    bl.build_float_ext(f, ft, "")?
                } else if to.is_narrow_float() {
                    // One rounding from f64, not two (to f32, then to `to`).
                    self.f64_to_f32_odd(f)?
                } else {
                    bl.build_float_trunc(f, ft, "")?
                };
                Ok(self.round_to(w.into(), to)?)
            }
        }
    }
}
