//! `device_print`'s per-lane record (`launch/print.rs`'s layout), filled the same way by the
//! CPU generator and the emulator's; each then calls its own hook with it.

use super::Emit;
use crate::launch::print::{
    dtype_code, PRINT_BITS, PRINT_DTYPE, PRINT_HEX, PRINT_IDX, PRINT_OPERAND, PRINT_OPERANDS,
    PRINT_PID, PRINT_PREFIX, PRINT_PREFIX_LEN, PRINT_RANK, PRINT_WORDS,
};
use crate::llvm::Result;
use inkwell::module::Linkage;
use inkwell::values::{BasicValueEnum, IntValue, PointerValue};
use inkwell::AddressSpace;
use tritium_dsl::ir::DType;

/// What one `device_print` argument's records share.
pub(crate) struct PrintSite<'ctx> {
    /// The prefix's bytes (a constant of the module) and length.
    pub prefix: (PointerValue<'ctx>, usize),
    /// The argument's dtype.
    pub dtype: DType,
    /// Hexadecimal output.
    pub hex: bool,
    /// Which argument, of how many.
    pub operand: (usize, usize),
}

impl<'ctx> Emit<'_, 'ctx> {
    /// `text` as a private constant byte array of the module (no terminator).
    pub(crate) fn print_prefix(&self, text: &str) -> (PointerValue<'ctx>, usize) {
        let bytes = self.ctx.const_string(text.as_bytes(), false);
        let g = self.module.add_global(
            bytes.get_type(),
            Some(AddressSpace::default()),
            "print.prefix",
        );
        g.set_initializer(&bytes);
        g.set_constant(true);
        g.set_linkage(Linkage::Private);
        (g.as_pointer_value(), text.len())
    }

    /// Fills `record` (an array of [`PRINT_WORDS`] i64) for one lane: `pids` are i32,
    /// `idx` integers of any width (zero-extended), `value` the lane in storage form.
    pub(crate) fn print_record(
        &self,
        record: PointerValue<'ctx>,
        site: &PrintSite<'ctx>,
        pids: [IntValue<'ctx>; 3],
        idx: &[IntValue<'ctx>],
        value: BasicValueEnum<'ctx>,
    ) -> Result<()> {
        let (b, i64t) = (self.b, self.ctx.i64_type());
        let c = |v: u64| i64t.const_int(v, false);
        let put = |k: u64, v: IntValue<'ctx>| -> Result<_> {
            // SAFETY (of the generated code): `record` has PRINT_WORDS words, and `k` is
            // below that (the IR's rank is at most MAX_RANK).
            let p = unsafe { b.build_gep(i64t, record, &[c(k)], "") }?;
            b.build_store(p, v)?;
            Ok(())
        };
        debug_assert!(PRINT_IDX as usize + idx.len() <= PRINT_WORDS);
        put(PRINT_PREFIX, b.build_ptr_to_int(site.prefix.0, i64t, "")?)?;
        put(PRINT_PREFIX_LEN, c(site.prefix.1 as u64))?;
        put(PRINT_DTYPE, c(dtype_code(site.dtype)))?;
        put(PRINT_HEX, c(u64::from(site.hex)))?;
        put(PRINT_OPERAND, c(site.operand.0 as u64))?;
        put(PRINT_OPERANDS, c(site.operand.1 as u64))?;
        for (k, p) in pids.iter().enumerate() {
            put(PRINT_PID + k as u64, b.build_int_z_extend(*p, i64t, "")?)?;
        }
        put(PRINT_BITS, self.storage_bits(value)?)?;
        put(PRINT_RANK, c(idx.len() as u64))?;
        for (k, i) in idx.iter().enumerate() {
            let i = if i.get_type().get_bit_width() < 64 {
                b.build_int_z_extend(*i, i64t, "")?
            } else {
                *i
            };
            put(PRINT_IDX + k as u64, i)?;
        }
        Ok(())
    }

    /// A storage-form value's bits, zero-extended to i64.
    pub(crate) fn storage_bits(&self, v: BasicValueEnum<'ctx>) -> Result<IntValue<'ctx>> {
        let (b, i64t) = (self.b, self.ctx.i64_type());
        let int = match v {
            BasicValueEnum::IntValue(i) => i,
            BasicValueEnum::FloatValue(f) => {
                let width = f.get_type().get_bit_width();
                let it = self.ctx.custom_width_int_type(width);
                b.build_bit_cast(f, it, "")?.into_int_value()
            }
            other => panic!("print of a non-number {other:?}"),
        };
        if int.get_type().get_bit_width() < 64 {
            Ok(b.build_int_z_extend(int, i64t, "")?)
        } else {
            Ok(int)
        }
    }
}
