//! [`Emitter`]: what a code generator calls on itself to reach [`Emit`], written once for
//! both targets.

use super::{Emit, Result};
use inkwell::types::BasicTypeEnum;
use inkwell::values::{BasicValueEnum, FunctionValue, IntValue};
use tritium_dsl::ir::{CmpPred, Const, DType, Elem};

/// A code generator that builds an [`Emit`] from its context, builder and module (with
/// its target's choices: NaNs through f16, fp8 conversions). The provided methods forward
/// to that `Emit`, so that the generators' code reads `self.cast(…)` and neither keeps a
/// copy of them.
pub(crate) trait Emitter<'ctx> {
    /// The target's [`Emit`] at the builder's position.
    fn emit(&self) -> Emit<'_, 'ctx>;

    /// Calls an overloaded LLVM intrinsic.
    fn intrinsic(
        &self,
        name: &str,
        overload: &[BasicTypeEnum<'ctx>],
        args: &[BasicValueEnum<'ctx>],
    ) -> Result<BasicValueEnum<'ctx>> {
        self.emit().intrinsic(name, overload, args)
    }

    /// A constant in `d`'s compute form.
    fn const_value(&self, c: Const, d: DType) -> BasicValueEnum<'ctx> {
        self.emit().const_value(c, d)
    }

    /// The form `d` is computed in.
    fn compute_ty(&self, d: DType) -> BasicTypeEnum<'ctx> {
        self.emit().compute_ty(d)
    }

    /// The form `d` is stored in.
    fn storage_ty(&self, d: DType) -> BasicTypeEnum<'ctx> {
        self.emit().storage_ty(d)
    }

    /// Converts a compute value to its memory form.
    fn to_storage(&self, v: BasicValueEnum<'ctx>, e: Elem) -> Result<BasicValueEnum<'ctx>> {
        self.emit().to_storage(v, e)
    }

    /// Converts a memory value to its compute form.
    fn decode_storage(&self, v: BasicValueEnum<'ctx>, e: Elem) -> Result<BasicValueEnum<'ctx>> {
        self.emit().decode_storage(v, e)
    }

    /// Rounds an f32 compute value to the precision of `d` (identity unless f16/bf16).
    fn round_to(&self, v: BasicValueEnum<'ctx>, d: DType) -> Result<BasicValueEnum<'ctx>> {
        self.emit().round_to(v, d)
    }

    /// Compares two compute values of dtype `d`.
    fn compare(
        &self,
        p: CmpPred,
        d: DType,
        a: BasicValueEnum<'ctx>,
        b: BasicValueEnum<'ctx>,
    ) -> Result<IntValue<'ctx>> {
        self.emit().compare(p, d, a, b)
    }

    /// Converts a compute value of dtype `from` to dtype `to` (Rust `as` semantics).
    fn cast(
        &self,
        v: BasicValueEnum<'ctx>,
        from: DType,
        to: DType,
    ) -> Result<BasicValueEnum<'ctx>> {
        self.emit().cast(v, from, to)
    }

    /// The C type a custom op's argument of element `e` is passed as.
    fn c_ty(&self, e: Elem) -> BasicTypeEnum<'ctx> {
        self.emit().c_ty(e)
    }

    /// A compute value as the C argument of element `e`.
    fn encode_c(&self, v: BasicValueEnum<'ctx>, e: Elem) -> Result<BasicValueEnum<'ctx>> {
        self.emit().encode_c(v, e)
    }

    /// A C result of element `e` in its compute form.
    fn decode_c(&self, v: BasicValueEnum<'ctx>, e: Elem) -> Result<BasicValueEnum<'ctx>> {
        self.emit().decode_c(v, e)
    }

    /// Checks that a linked function has the signature a custom op's call expects.
    fn check_signature(
        &self,
        func: FunctionValue<'ctx>,
        ret: Option<BasicTypeEnum<'ctx>>,
        params: &[BasicTypeEnum<'ctx>],
        what: &str,
    ) -> Result<()> {
        self.emit().check_signature(func, ret, params, what)
    }

    /// Calls a linked function with C's argument extensions.
    fn call(
        &self,
        func: FunctionValue<'ctx>,
        args: &[BasicValueEnum<'ctx>],
    ) -> Result<Option<BasicValueEnum<'ctx>>> {
        self.emit().call(func, args)
    }
}
