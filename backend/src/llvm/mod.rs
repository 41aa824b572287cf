//! Target-independent LLVM emission of Tritium's scalar semantics, shared by the CPU
//! (`cpu/codegen`) and CUDA (`cuda/codegen`) code generators: one concept per file.
//!
//! - `types`: the compute and storage forms of dtypes, f16/bf16 rounding;
//! - `constant`: constants in compute form;
//! - `arith`: binary ops (integer ops without UB) and integer unary ops;
//! - `atomic`: integer read-modify-write atomics;
//! - `checked`: checked mode's bounds compare and fault record;
//! - `compare`: comparisons;
//! - `cast`: casts (saturating float → int, rounding to f16/bf16);
//! - `exp`: the f32 `exp` polynomial both targets use;
//! - `math`: f64 `exp`, `exp2`, `log`, `log2`, `sin`, `cos` and f32 `log`, `log2`, `sin`,
//!   `cos` from basic arithmetic (the CUDA generator's, on the GPU and in the emulator);
//! - `counter`: `for` loop counters that never wrap;
//! - `print`: `device_print`'s per-lane record;
//! - `error`: [`CodegenError`], the one error type of code generation;
//! - `c_abi`: the C side of custom-op calls (argument types, `memref_t`, calls);
//! - `emitter`: [`Emitter`], the generators' one way to [`Emit`].
//!
//! Each generator implements [`Emitter`] (its `Emit`, built from its context, builder and
//! module), whose provided methods forward to `Emit`; what differs per target
//! (transcendental functions, pointers' address spaces, memory) stays in the generators.

mod arith;
mod atomic;
mod c_abi;
mod cast;
mod checked;
mod compare;
mod constant;
mod counter;
mod emitter;
mod error;
mod exp;
mod fmod;
mod fp8;
mod math;
mod print;
mod types;
mod unroll;

use inkwell::builder::Builder;
use inkwell::context::Context;
use inkwell::intrinsics::Intrinsic;
use inkwell::module::Module;
use inkwell::types::BasicTypeEnum;
use inkwell::values::BasicValueEnum;

pub(crate) use counter::LoopCounter;
pub(crate) use emitter::Emitter;
#[cfg(test)]
pub(crate) use error::inject;
pub(crate) use error::{CodegenError, Positioned, Result};
pub(crate) use fp8::{Fp8Cvt, Fp8Inputs};
pub(crate) use print::PrintSite;
pub(crate) use types::HalfNans;

/// Emits scalar semantics at the builder's position.
pub(crate) struct Emit<'a, 'ctx> {
    /// The LLVM context.
    pub ctx: &'ctx Context,
    /// The builder, positioned where the code goes.
    pub b: &'a Builder<'ctx>,
    /// The module intrinsics are declared in.
    pub module: &'a Module<'ctx>,
    /// What the target's f32 ↔ f16 conversions do with NaNs.
    pub half_nans: HalfNans,
    /// How f32 → fp8 conversions run.
    pub fp8_cvt: Fp8Cvt,
}

impl<'ctx> Emit<'_, 'ctx> {
    /// Calls an overloaded LLVM intrinsic.
    pub(crate) fn intrinsic(
        &self,
        name: &str,
        overload: &[BasicTypeEnum<'ctx>],
        args: &[BasicValueEnum<'ctx>],
    ) -> Result<BasicValueEnum<'ctx>> {
        let i = Intrinsic::find(name)
            .ok_or_else(|| CodegenError::internal(format!("LLVM 19 has no intrinsic {name}")))?;
        let decl = i.get_declaration(self.module, overload).ok_or_else(|| {
            CodegenError::internal(format!("no declaration of {name} over {overload:?}"))
        })?;
        let args: Vec<_> = args.iter().map(|a| (*a).into()).collect();
        match self.b.build_call(decl, &args, "")?.try_as_basic_value() {
            inkwell::values::ValueKind::Basic(v) => Ok(v),
            inkwell::values::ValueKind::Instruction(_) => Err(CodegenError::internal(format!(
                "intrinsic {name} returns no value"
            ))),
        }
    }
}
