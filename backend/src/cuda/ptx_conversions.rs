//! The emulator converts between f32 and f16 as PTX's `cvt` did on an H100, not as the
//! host does: f16 → f32 gives the canonical NaN `0x7fffffff` for every NaN, f32 → f16 gives
//! `0x7fff` with the NaN's sign (`signbit` of an f16 cast of -NaN stayed true there, while
//! `split`'s f16 → f32 → f16 round trip turned `0xfe00` into `0x7fff`). x86 keeps a NaN's
//! sign and payload both ways, so code that relied on that passed in the emulator and lost
//! f16 NaN bits on the GPU; here it fails too.

use crate::llvm::CodegenError;
use inkwell::module::Module;
use inkwell::types::{AnyTypeEnum, BasicTypeEnum};
use inkwell::values::{BasicValue, BasicValueEnum, InstructionOpcode, InstructionValue};
use inkwell::FloatPredicate;

/// Rewrites every scalar `fptrunc float → half` and `fpext half → float` of `module` to
/// give PTX's NaN for a NaN input.
pub(crate) fn model_ptx_conversions(module: &Module<'_>) -> Result<(), CodegenError> {
    let ctx = module.get_context();
    let ctx = &ctx;
    let b = ctx.create_builder();
    let (f16, f32) = (ctx.f16_type(), ctx.f32_type());
    for f in module.get_functions() {
        for block in f.get_basic_blocks() {
            let mut next = block.get_first_instruction();
            while let Some(i) = next {
                next = i.get_next_instruction();
                let (to, canonical) = match (i.get_opcode(), i.get_type()) {
                    (InstructionOpcode::FPTrunc, AnyTypeEnum::FloatType(t)) if t == f16 => {
                        (t, ctx.i16_type().const_int(0x7fff, false))
                    }
                    (InstructionOpcode::FPExt, AnyTypeEnum::FloatType(t)) if t == f32 => {
                        (t, ctx.i32_type().const_int(0x7fff_ffff, false))
                    }
                    _ => continue,
                };
                let Some(BasicValueEnum::FloatValue(x)) = i.get_operand(0).and_then(|o| o.value())
                else {
                    continue;
                };
                if !matches!((to == f16, x.get_type()), (true, t) if t == f32)
                    && !matches!((to == f32, x.get_type()), (true, t) if t == f16)
                {
                    continue;
                }
                let Some(after) = next else { continue };
                b.position_before(&after);
                let converted = match to == f16 {
                    true => b.build_float_trunc(x, to, "")?,
                    false => b.build_float_ext(x, to, "")?,
                };
                let canonical = match to == f16 {
                    // The NaN's sign, from the f32's top bit, on 0x7fff.
                    true => {
                        let bits = b.build_bit_cast(x, ctx.i32_type(), "")?.into_int_value();
                        let sign = b.build_right_shift(
                            bits,
                            ctx.i32_type().const_int(16, false),
                            false,
                            "",
                        )?;
                        let sign = b.build_int_truncate(sign, ctx.i16_type(), "")?;
                        let sign =
                            b.build_and(sign, ctx.i16_type().const_int(0x8000, false), "")?;
                        b.build_or(sign, canonical, "")?
                    }
                    false => canonical,
                };
                let nan = b.build_bit_cast(canonical, BasicTypeEnum::FloatType(to), "")?;
                let is_nan = b.build_float_compare(FloatPredicate::UNO, x, x, "")?;
                let ptx = b.build_select(is_nan, nan, converted.into(), "")?;
                replace(i, ptx)?;
            }
        }
    }
    Ok(())
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
