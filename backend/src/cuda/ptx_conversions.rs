//! The emulator converts between f32 and f16 as PTX's `cvt` did on an H100, not as the
//! host does: f16 → f32 gives the canonical NaN `0x7fffffff` for every NaN, f32 → f16 gives
//! `0x7fff` with the NaN's sign (`signbit` of an f16 cast of -NaN stayed true there, while
//! `split`'s f16 → f32 → f16 round trip turned `0xfe00` into `0x7fff`). x86 keeps a NaN's
//! sign and payload both ways, so code that relied on that passed in the emulator and lost
//! f16 NaN bits on the GPU; here it fails too.

use crate::llvm::CodegenError;
use inkwell::builder::Builder;
use inkwell::module::Module;
use inkwell::types::{BasicTypeEnum, FloatType, VectorType};
use inkwell::values::{BasicValue, BasicValueEnum, InstructionOpcode, InstructionValue};
use inkwell::FloatPredicate;

/// Rewrites every `fptrunc float → half` and `fpext half → float` of `module`, scalar or
/// vector, to give PTX's NaN for a NaN input.
pub(crate) fn model_ptx_conversions(module: &Module<'_>) -> Result<(), CodegenError> {
    let ctx = module.get_context();
    let b = ctx.create_builder();
    let (f16, f32) = (ctx.f16_type(), ctx.f32_type());
    for f in module.get_functions() {
        for block in f.get_basic_blocks() {
            let mut next = block.get_first_instruction();
            while let Some(i) = next {
                next = i.get_next_instruction();
                let op = i.get_opcode();
                if op != InstructionOpcode::FPTrunc && op != InstructionOpcode::FPExt {
                    continue;
                }
                let (Some(x), Ok(to), Some(after)) = (
                    i.get_operand(0).and_then(|o| o.value()),
                    BasicTypeEnum::try_from(i.get_type()),
                    next,
                ) else {
                    continue;
                };
                let (Some((from_elem, lanes)), Some((to_elem, _))) =
                    (float_shape(x.get_type()), float_shape(to))
                else {
                    continue;
                };
                let narrowing = from_elem == f32 && to_elem == f16;
                let widening = from_elem == f16 && to_elem == f32;
                if !(narrowing || widening) {
                    continue;
                }
                b.position_before(&after);
                let converted = b.build_cast(
                    if narrowing {
                        InstructionOpcode::FPTrunc
                    } else {
                        InstructionOpcode::FPExt
                    },
                    x,
                    to,
                    "",
                )?;
                // Integers of the result's width, in the value's shape.
                let int = |bits: u32| -> BasicTypeEnum {
                    let t = ctx.custom_width_int_type(bits);
                    match lanes {
                        Some(n) => t.vec_type(n).into(),
                        None => t.into(),
                    }
                };
                let splat = |bits: u32, v: u64| -> BasicValueEnum {
                    let c = ctx.custom_width_int_type(bits).const_int(v, false);
                    match lanes {
                        Some(n) => VectorType::const_vector(&vec![c; n as usize]).into(),
                        None => c.into(),
                    }
                };
                let nan_bits = if narrowing {
                    // 0x7fff with the NaN's sign, the f32's top bit.
                    let bits = b.build_bit_cast(x, int(32), "")?;
                    let sign = int_op(&b, IntOp::Shr, bits, splat(32, 16))?;
                    let sign = b.build_cast(InstructionOpcode::Trunc, sign, int(16), "")?;
                    let sign = int_op(&b, IntOp::And, sign, splat(16, 0x8000))?;
                    int_op(&b, IntOp::Or, sign, splat(16, 0x7fff))?
                } else {
                    splat(32, 0x7fff_ffff)
                };
                let nan = b.build_bit_cast(nan_bits, to, "")?;
                let is_nan = match x {
                    BasicValueEnum::FloatValue(v) => {
                        b.build_float_compare(FloatPredicate::UNO, v, v, "")?.into()
                    }
                    BasicValueEnum::VectorValue(v) => {
                        b.build_float_compare(FloatPredicate::UNO, v, v, "")?.into()
                    }
                    _ => continue,
                };
                let ptx = match is_nan {
                    BasicValueEnum::IntValue(c) => b.build_select(c, nan, converted, "")?,
                    BasicValueEnum::VectorValue(c) => b.build_select(c, nan, converted, "")?,
                    _ => continue,
                };
                replace(i, ptx)?;
            }
        }
    }
    Ok(())
}

/// A float type's element type and lane count (`None`: a scalar).
fn float_shape(t: BasicTypeEnum<'_>) -> Option<(FloatType<'_>, Option<u32>)> {
    match t {
        BasicTypeEnum::FloatType(f) => Some((f, None)),
        BasicTypeEnum::VectorType(v) => match v.get_element_type() {
            BasicTypeEnum::FloatType(f) => Some((f, Some(v.get_size()))),
            _ => None,
        },
        _ => None,
    }
}

enum IntOp {
    Shr,
    And,
    Or,
}

/// `a op c` on integers or vectors of them.
fn int_op<'ctx>(
    b: &Builder<'ctx>,
    op: IntOp,
    a: BasicValueEnum<'ctx>,
    c: BasicValueEnum<'ctx>,
) -> Result<BasicValueEnum<'ctx>, CodegenError> {
    Ok(match (a, c) {
        (BasicValueEnum::IntValue(a), BasicValueEnum::IntValue(c)) => match op {
            IntOp::Shr => b.build_right_shift(a, c, false, "")?,
            IntOp::And => b.build_and(a, c, "")?,
            IntOp::Or => b.build_or(a, c, "")?,
        }
        .into(),
        (BasicValueEnum::VectorValue(a), BasicValueEnum::VectorValue(c)) => match op {
            IntOp::Shr => b.build_right_shift(a, c, false, "")?,
            IntOp::And => b.build_and(a, c, "")?,
            IntOp::Or => b.build_or(a, c, "")?,
        }
        .into(),
        _ => {
            return Err(CodegenError::internal(
                "integer operands of one shape".to_string(),
            ))
        }
    })
}

/// Points every use of `old` at `new` and deletes `old`.
fn replace<'ctx>(
    old: InstructionValue<'ctx>,
    new: BasicValueEnum<'ctx>,
) -> Result<(), CodegenError> {
    let new = new
        .as_instruction_value()
        .ok_or_else(|| CodegenError::internal("a select is an instruction".to_string()))?;
    old.replace_all_uses_with(&new);
    old.erase_from_basic_block();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::model_ptx_conversions;
    use inkwell::context::Context;
    use inkwell::types::{BasicType, BasicTypeEnum};

    /// Scalar and vector conversions both way get their NaN select; the module stays valid.
    #[test]
    fn every_half_conversion_gets_ptx_nans() {
        let ctx = Context::create();
        let module = ctx.create_module("m");
        let b = ctx.create_builder();
        let (f16, f32) = (ctx.f16_type(), ctx.f32_type());
        let cases: [(BasicTypeEnum, BasicTypeEnum); 4] = [
            (f32.into(), f16.into()),
            (f16.into(), f32.into()),
            (f32.vec_type(4).into(), f16.vec_type(4).into()),
            (f16.vec_type(4).into(), f32.vec_type(4).into()),
        ];
        for (k, (from, to)) in cases.into_iter().enumerate() {
            let f = module.add_function(&format!("f{k}"), to.fn_type(&[from.into()], false), None);
            b.position_at_end(ctx.append_basic_block(f, "entry"));
            let x = f.get_nth_param(0).unwrap();
            let op = if k % 2 == 0 {
                inkwell::values::InstructionOpcode::FPTrunc
            } else {
                inkwell::values::InstructionOpcode::FPExt
            };
            let y = b.build_cast(op, x, to, "").unwrap();
            b.build_return(Some(&y)).unwrap();
        }
        model_ptx_conversions(&module).unwrap();
        module.verify().unwrap();
        let ir = module.print_to_string().to_string();
        for (k, bits) in ["32767", "0x7FFFFFFFE0000000", "32767", "0x7FFFFFFFE0000000"]
            .iter()
            .enumerate()
        {
            let body = ir.split(&format!("@f{k}(")).nth(1).unwrap();
            let body = &body[..body.find('}').unwrap()];
            assert!(
                body.contains("fcmp uno") && body.contains("select"),
                "f{k}:\n{body}"
            );
            assert!(
                body.contains(bits) || body.contains("-1"),
                "f{k} lacks {bits}:\n{body}"
            );
        }
    }
}
