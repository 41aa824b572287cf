//! LLVM types of IR dtypes (the shared `crate::llvm` forms, as on the CPU): the
//! *compute* form values have in registers and the *storage* form they have in memory.
//! f16/bf16 compute in f32 and are rounded after every op. Pointers are global
//! (`addrspace(1)`), so loads and stores through them are `ld.global`/`st.global`.

use super::Gen;
use crate::llvm::Result;
use inkwell::types::BasicTypeEnum;
use inkwell::values::BasicValueEnum;
use tritium_dsl::ir::{DType, Elem};

impl<'ctx> Gen<'ctx, '_> {
    /// The shared emitter of scalar semantics at this generator's builder.
    pub(super) fn emit(&self) -> crate::llvm::Emit<'_, 'ctx> {
        crate::llvm::Emit {
            ctx: self.ctx,
            b: self.b,
            module: self.module,
            half_nans: crate::llvm::HalfNans::Canonicalized,
            // Hopper's conversion instruction (sm_89 on), or the emulator's model of it.
            fp8_cvt: match (self.wgmma, self.emu.is_some()) {
                (false, _) => crate::llvm::Fp8Cvt::Software,
                (true, false) => crate::llvm::Fp8Cvt::Satfinite,
                (true, true) => crate::llvm::Fp8Cvt::SatfiniteModel,
            },
        }
    }

    pub(super) fn compute_ty(&self, d: DType) -> BasicTypeEnum<'ctx> {
        self.emit().compute_ty(d)
    }

    pub(super) fn storage_ty(&self, d: DType) -> BasicTypeEnum<'ctx> {
        self.emit().storage_ty(d)
    }

    pub(super) fn elem_compute_ty(&self, e: Elem) -> BasicTypeEnum<'ctx> {
        match e {
            Elem::Scalar(d) => self.compute_ty(d),
            Elem::Ptr(_) => self.ctx.ptr_type(self.global).into(),
        }
    }

    /// Converts a compute value to its memory form.
    pub(super) fn to_storage(
        &self,
        v: BasicValueEnum<'ctx>,
        e: Elem,
    ) -> Result<BasicValueEnum<'ctx>> {
        self.emit().to_storage(v, e)
    }

    /// Converts a memory value to its compute form.
    pub(super) fn decode_storage(
        &self,
        v: BasicValueEnum<'ctx>,
        e: Elem,
    ) -> Result<BasicValueEnum<'ctx>> {
        self.emit().decode_storage(v, e)
    }

    /// Rounds an f32 compute value to the precision of `d` (identity unless f16/bf16).
    pub(super) fn round_to(
        &self,
        v: BasicValueEnum<'ctx>,
        d: DType,
    ) -> Result<BasicValueEnum<'ctx>> {
        self.emit().round_to(v, d)
    }
}
