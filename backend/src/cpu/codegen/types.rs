//! LLVM types of IR dtypes: the *compute* form values have in registers and the *storage*
//! form they have in memory. f16/bf16 compute in f32 and are rounded after every op, so
//! no half-precision runtime library is ever needed.

use super::Gen;
use crate::llvm::Emitter;
use inkwell::types::BasicTypeEnum;
use inkwell::AddressSpace;
use tritium_dsl::ir::Elem;

impl<'ctx> Emitter<'ctx> for Gen<'ctx, '_> {
    /// The shared emitter of scalar semantics at this generator's builder.
    fn emit(&self) -> crate::llvm::Emit<'_, 'ctx> {
        crate::llvm::Emit {
            ctx: self.ctx,
            b: self.b,
            module: self.module,
            half_nans: crate::llvm::HalfNans::Kept,
            fp8_cvt: crate::llvm::Fp8Cvt::Software,
        }
    }
}

impl<'ctx> Gen<'ctx, '_> {
    pub(super) fn elem_compute_ty(&self, e: Elem) -> BasicTypeEnum<'ctx> {
        match e {
            Elem::Scalar(d) => self.compute_ty(d),
            Elem::Ptr(_) => self.ctx.ptr_type(AddressSpace::default()).into(),
        }
    }

    pub(super) fn elem_storage_ty(&self, e: Elem) -> BasicTypeEnum<'ctx> {
        match e {
            Elem::Scalar(d) => self.storage_ty(d),
            Elem::Ptr(_) => self.ctx.ptr_type(AddressSpace::default()).into(),
        }
    }

    pub(super) fn elem_size(&self, e: Elem) -> usize {
        match e {
            Elem::Scalar(d) => d.size_bytes(),
            Elem::Ptr(_) => 8,
        }
    }
}
