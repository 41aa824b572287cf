//! Constants of a dtype in compute form.

use super::Emit;
use inkwell::values::BasicValueEnum;
use tritium_dsl::ir::{Const, DType};

impl<'ctx> Emit<'_, 'ctx> {
    /// A constant of dtype `d` in compute form.
    pub(crate) fn const_value(&self, c: Const, d: DType) -> BasicValueEnum<'ctx> {
        let ty = self.compute_ty(d);
        match (c, d.is_float()) {
            (Const::Int(i), false) => {
                let bits = if d.is_bool() {
                    (i != 0) as u64
                } else {
                    i as u64
                };
                ty.into_int_type().const_int(bits, false).into()
            }
            (Const::Float(f), false) => {
                ty.into_int_type().const_int(f as i128 as u64, false).into()
            }
            (c, true) => {
                let f = match c {
                    Const::Int(i) => i as f64,
                    Const::Float(f) => f,
                };
                let f = match d {
                    DType::F16 => half::f16::from_f64(f).to_f64(),
                    DType::BF16 => half::bf16::from_f64(f).to_f64(),
                    DType::F32 => f as f32 as f64,
                    d => d.fp8_format().map_or(f, |f8| f8.round(f)),
                };
                ty.into_float_type().const_float(f).into()
            }
        }
    }
}
