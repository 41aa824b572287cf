//! LLVM types of IR dtypes (the shared `crate::llvm` forms, as on the CPU): the
//! *compute* form values have in registers and the *storage* form they have in memory.
//! f16/bf16 compute in f32 and are rounded after every op. Pointers are global
//! (`addrspace(1)`), so loads and stores through them are `ld.global`/`st.global`.

use super::Gen;
use crate::llvm::Emitter;
use inkwell::types::BasicTypeEnum;
use tritium_dsl::ir::Elem;

impl<'ctx> Emitter<'ctx> for Gen<'ctx, '_> {
    /// The shared emitter of scalar semantics at this generator's builder.
    fn emit(&self) -> crate::llvm::Emit<'_, 'ctx> {
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
}

impl<'ctx> Gen<'ctx, '_> {
    pub(super) fn elem_compute_ty(&self, e: Elem) -> BasicTypeEnum<'ctx> {
        match e {
            Elem::Scalar(d) => self.compute_ty(d),
            Elem::Ptr(_) => self.ctx.ptr_type(self.global).into(),
        }
    }
}
