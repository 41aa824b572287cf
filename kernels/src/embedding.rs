//! Token embedding: rows of a `[vocab, hidden]` table gathered by token id.

use tritium::prelude::*;

/// `out[i, :] = table[ids[i], :]` for `hidden`-wide rows, one token per program (grid
/// `[tokens]`). An id past the table's end is a checked access: the launch fails naming
/// `table` rather than reading outside it.
#[kernel]
pub fn embedding<T: Element>(
    out: Ptr<T>,
    table: Ptr<T>,
    ids: Ptr<u32>,
    hidden: i32,
    #[constexpr] BLOCK: usize,
) {
    let i = program_id(0).to(DType::I64);
    let id = load(ids + i).to(DType::I64);
    let cols = arange(0, BLOCK);
    let mask = cols < hidden;
    let row = load(table + id * hidden + cols, mask = mask);
    store(out + i * hidden + cols, row, mask = mask);
}
