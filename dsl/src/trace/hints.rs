//! Triton's compiler hints: `multiple_of`, `max_contiguous`, `max_constancy`, `assume` and
//! `debug_barrier`. They are accepted so Triton kernels port as written; the code
//! generators do not use them yet (the CPU and CUDA generators find contiguity and
//! alignment themselves, and every CUDA barrier they need is emitted), so each returns its
//! input unchanged or does nothing, except `assume`, which is checked as a
//! `device_assert`.

use super::block_ptr::OptConstDims;
use super::lang::fail_with;
use super::tile::{IntoOperand, Operand, Tile};

/// `x`, promised to be a multiple of `values` (per dim).
#[track_caller]
pub fn multiple_of(x: Tile, values: impl OptConstDims) -> Tile {
    hint(x, "multiple_of", values)
}

/// `x`, promised to hold runs of `values` consecutive integers (per dim).
#[track_caller]
pub fn max_contiguous(x: Tile, values: impl OptConstDims) -> Tile {
    hint(x, "max_contiguous", values)
}

/// `x`, promised to hold runs of `values` equal elements (per dim).
#[track_caller]
pub fn max_constancy(x: Tile, values: impl OptConstDims) -> Tile {
    hint(x, "max_constancy", values)
}

/// A promise that `cond` holds. It is checked where it can be: a `false` known while
/// tracing fails the trace, and a run-time condition is a `device_assert` (active in
/// checked mode and on the interpreter, nothing otherwise).
#[track_caller]
pub fn assume(cond: impl IntoOperand) {
    match cond.into_operand() {
        Operand::Bool(false) => super::lang::static_assert(false, "assume(false)"),
        Operand::Bool(true) => {}
        c => super::lang::device_assert(c, "assume", super::lang::NoArg),
    }
}

/// A barrier between the program's threads (Triton's `debug_barrier`): the code
/// generators already order every shared-memory exchange, so it emits nothing.
pub fn debug_barrier() {}

/// Checks that a hint has one positive value per dim of `x` (or one for all).
#[track_caller]
fn hint(x: Tile, name: &str, values: impl OptConstDims) -> Tile {
    let values = values.const_dims();
    let rank = x.ty().rank().max(1);
    if values.is_empty()
        || (values.len() != 1 && values.len() != rank)
        || values.iter().any(|v| *v < 1)
    {
        let msg = format!(
            "{name}: {values:?} must be one positive value or one per dim of {}",
            x.ty()
        );
        return fail_with(x, msg);
    }
    x
}
