//! What the `dot` family's files share: how a packed operand lies in its scratch buffer
//! ([`Packing`]), which the packing, the edge copies and the transposed copies all write
//! and the micro-kernels read.

use crate::cpu::codegen::Gen;
use crate::llvm::Result;
use inkwell::types::BasicTypeEnum;
use inkwell::values::{IntValue, PointerValue};

/// How a packed `dot` operand (`rows × cols`) lies in its scratch buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Packing {
    /// Row-major, `cols` elements per row.
    Rows { cols: usize },
    /// Panels of `width` columns (`cols` a multiple of it), each `rows × width` row-major,
    /// one after the other: element `(r, c)` at `(c / width)·rows·width + r·width + c % width`.
    Panels { rows: usize, width: usize },
}

/// Bytes apart at which addresses fall in the same set of a 32 KiB, 8-way L1 data cache
/// with 64-byte lines (every x86 core since Sandy Bridge; Zen's too).
const L1_WAY_BYTES: usize = 4096;

/// Ways of one L1 set a panel's rows may take, leaving the rest to `a` and `C`.
const L1_WAYS_FOR_B: usize = 4;

impl Packing {
    /// True when `rows` rows of `row_bytes` each, read down one column, would take more
    /// than [`L1_WAYS_FOR_B`] ways of one L1 set (an estimate: exact for strides that
    /// divide [`L1_WAY_BYTES`], high for others, whose rows spread over more sets).
    pub fn rows_crowd_l1(rows: usize, row_bytes: usize) -> bool {
        rows * row_bytes.min(L1_WAY_BYTES) > L1_WAYS_FOR_B * L1_WAY_BYTES
    }

    /// The address of element `(row, col)` of the operand in `buf`, of elements `et`.
    pub fn elem<'ctx>(
        self,
        g: &Gen<'ctx, '_>,
        buf: PointerValue<'ctx>,
        et: BasicTypeEnum<'ctx>,
        row: IntValue<'ctx>,
        col: IntValue<'ctx>,
    ) -> Result<PointerValue<'ctx>> {
        match self {
            Packing::Rows { cols } => g.elem_ptr(buf, et, row, cols, col),
            Packing::Panels { width, .. } => {
                let w = g.i64c(width as u64);
                let panel = g.b.build_int_unsigned_div(col, w, "")?;
                let within = g.b.build_int_unsigned_rem(col, w, "")?;
                self.panel_elem(g, buf, et, panel, row, within)
            }
        }
    }

    /// The address of element `(row, panel·width + within)` of a [`Packing::Panels`]
    /// operand.
    pub(super) fn panel_elem<'ctx>(
        self,
        g: &Gen<'ctx, '_>,
        buf: PointerValue<'ctx>,
        et: BasicTypeEnum<'ctx>,
        panel: IntValue<'ctx>,
        row: IntValue<'ctx>,
        within: IntValue<'ctx>,
    ) -> Result<PointerValue<'ctx>> {
        let Packing::Panels { rows, width } = self else {
            unreachable!("a panel of a row-major operand")
        };
        let first = g.b.build_int_mul(panel, g.i64c(rows as u64), "")?;
        let row = g.b.build_int_add(first, row, "")?;
        g.elem_ptr(buf, et, row, width, within)
    }
}
