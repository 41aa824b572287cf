//! `ldmatrix`: a warp reads 8×8 matrices of 16-bit elements from shared memory straight
//! into `mma` fragment registers, each lane giving the address of one matrix row (lanes
//! `8j..8j+8` the rows of matrix `j`) and receiving one 32-bit word per matrix: row
//! `lane / 4`, columns `2 (lane % 4)` and the next (or, `.trans`, column `lane / 4` of rows
//! `2 (lane % 4)` and the next). `stmatrix` (sm_90) is its inverse: the same addresses and
//! words, written. In the emulator each is a collective of the CTA's threads in
//! `cuda/emulate.rs`, which also counts its shared-memory wavefronts. Offsets into shared
//! memory are the swizzled layout's (`swizzle.rs`).

use super::sync::{EMU_LDMATRIX, EMU_STMATRIX};
use super::Gen;
use crate::llvm::Result;
use inkwell::types::BasicType;
use inkwell::values::{BasicValueEnum, IntValue};
use inkwell::AddressSpace;

/// One `ldmatrix` shape.
#[derive(Clone, Copy, Debug)]
pub(super) struct Ldmatrix {
    /// 8×8 matrices read: 2 or 4.
    pub matrices: u32,
    /// `.trans`: each lane receives a column pair instead of a row pair.
    pub trans: bool,
}

impl Ldmatrix {
    /// The word the emulator's hook takes: the matrix count, and bit 8 for `.trans`.
    pub(crate) fn emulator_code(self) -> u32 {
        self.matrices | (u32::from(self.trans) << 8)
    }
}

impl<'ctx> Gen<'ctx, '_> {
    /// `ldmatrix.sync.aligned.m8n8.x{2,4}[.trans].shared.b16` with this lane's row at byte
    /// `byte` of shared memory (16-byte aligned): one word per matrix.
    pub(super) fn ldmatrix(
        &self,
        shape: Ldmatrix,
        byte: IntValue<'ctx>,
    ) -> Result<Vec<IntValue<'ctx>>> {
        let row = self.shared_byte(byte)?;
        if self.emu.is_some() {
            return self.emulator_ldmatrix(shape, row.into());
        }
        let name = format!(
            "llvm.nvvm.ldmatrix.sync.aligned.m8n8.x{}{}.b16",
            shape.matrices,
            if shape.trans { ".trans" } else { "" }
        );
        let intrinsic = inkwell::intrinsics::Intrinsic::find(&name)
            .expect("LLVM 19 has the ldmatrix intrinsics");
        let shared = self.ctx.ptr_type(AddressSpace::from(3u16));
        let overload = if intrinsic.is_overloaded() {
            vec![shared.into()]
        } else {
            Vec::new()
        };
        let decl = intrinsic
            .get_declaration(self.module, &overload)
            .expect("declaration");
        let call = self.b.build_call(decl, &[row.into()], "ldsm")?;
        let st = match call.try_as_basic_value() {
            inkwell::values::ValueKind::Basic(v) => v.into_struct_value(),
            inkwell::values::ValueKind::Instruction(_) => unreachable!("ldmatrix returns words"),
        };
        (0..shape.matrices)
            .map(|i| Ok(self.b.build_extract_value(st, i, "")?.into_int_value()))
            .collect()
    }

    /// The emulator's `ldmatrix` (see `cuda/emulate.rs`): the words through memory.
    fn emulator_ldmatrix(
        &self,
        shape: Ldmatrix,
        row: BasicValueEnum<'ctx>,
    ) -> Result<Vec<IntValue<'ctx>>> {
        let i32t = self.ctx.i32_type();
        let out = self.entry_alloca(i32t.array_type(4).into())?;
        let code = self.i32c(u64::from(shape.emulator_code()));
        self.emulator_hook(EMU_LDMATRIX, &[row, code.into(), out.into()], None)?;
        (0..shape.matrices)
            .map(|i| {
                // SAFETY (of the generated code): within the 4-word array above.
                let p = unsafe { self.b.build_gep(i32t, out, &[self.i32c(u64::from(i))], "") }?;
                Ok(self.b.build_load(i32t, p, "")?.into_int_value())
            })
            .collect()
    }

    /// `stmatrix.sync.aligned.m8n8.x{1,2,4}.shared.b16` with this lane's row of matrix
    /// `lane / 8` at byte `byte` of shared memory (16-byte aligned; lanes past the
    /// matrices give any): `words[j]` is this lane's pair of matrix `j` (row `lane / 4`,
    /// columns `2 (lane % 4)` and the next). Every lane of the warp takes part.
    pub(super) fn stmatrix(&self, byte: IntValue<'ctx>, words: &[IntValue<'ctx>]) -> Result<()> {
        let row = self.shared_byte(byte)?;
        let n = words.len();
        debug_assert!(matches!(n, 1 | 2 | 4), "stmatrix stores 1, 2 or 4 matrices");
        if self.emu.is_some() {
            let i32t = self.ctx.i32_type();
            let out = self.entry_alloca(i32t.array_type(4).as_basic_type_enum())?;
            for (i, w) in (0u64..).zip(words) {
                // SAFETY (of the generated code): within the 4-word array above.
                let p = unsafe { self.b.build_gep(i32t, out, &[self.i32c(i)], "") }?;
                self.b.build_store(p, *w)?;
            }
            let count = self.i32c(n as u64);
            self.emulator_hook(EMU_STMATRIX, &[row.into(), count.into(), out.into()], None)?;
            return Ok(());
        }
        let addr = self.b.build_ptr_to_int(row, self.ctx.i64_type(), "")?;
        let list: Vec<String> = (1..=n).map(|i| format!("${i}")).collect();
        let asm = format!(
            "stmatrix.sync.aligned.m8n8.x{n}.shared.b16 [$0], {{{}}};",
            list.join(", ")
        );
        let args: Vec<BasicValueEnum<'ctx>> = std::iter::once(addr.into())
            .chain(words.iter().map(|w| (*w).into()))
            .collect();
        self.asm_call(&asm, &args, false)?;
        Ok(())
    }
}
