//! Triton's compiler hints: `multiple_of`, `max_contiguous`, `max_constancy`, `assume` and
//! `debug_barrier`. The first three put an `Op::Hint` (the value itself, with the promise)
//! on integer tiles: the CUDA generator trusts it (its vector accesses skip the run-time
//! test that pointers are consecutive); on pointer tiles they change nothing. `assume` is
//! checked as a `device_assert`; `debug_barrier` emits nothing (the generators already
//! order every shared-memory exchange). And one of Tritium's own, `likely`: the value a
//! bool tile's lanes usually all have (the f32 algorithms' rare cases).

use super::block_ptr::OptConstDims;
use super::builder::with;
use super::lang::fail_with;
use super::tile::{IntoOperand, Operand, Tile};
use crate::ir::{DType, HintKind, Op};

/// `x`, promised to be a multiple of `values` (per dim).
#[track_caller]
pub fn multiple_of(x: Tile, values: impl OptConstDims) -> Tile {
    hint(x, HintKind::MultipleOf, values)
}

/// `x`, promised to hold runs of `values` consecutive integers (per dim).
#[track_caller]
pub fn max_contiguous(x: Tile, values: impl OptConstDims) -> Tile {
    hint(x, HintKind::MaxContiguous, values)
}

/// `x`, promised to hold runs of `values` equal elements (per dim).
#[track_caller]
pub fn max_constancy(x: Tile, values: impl OptConstDims) -> Tile {
    hint(x, HintKind::MaxConstancy, values)
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

/// `cond` (a bool tile), whose lanes are usually all `value`: no promise, so every result
/// is the same whatever they are, but the code that reads it gets a copy for when they
/// are, where what `value` rules out folds away (the CPU versions its loops on it: a
/// branch-free function's rare cases, selected by `cond`, cost a test of `cond` there).
#[track_caller]
pub fn likely(cond: Tile, value: bool) -> Tile {
    if cond.ty().dtype() != Some(DType::Bool) {
        let msg = format!(
            "likely: the condition must be a bool tile, got {}",
            cond.ty()
        );
        return fail_with(cond, msg);
    }
    let loc = super::tile::caller_loc(std::panic::Location::caller());
    with(|b| {
        let t = b.ty(cond.0).clone();
        Tile(b.push1(
            Op::Hint {
                x: cond.0,
                kind: HintKind::Likely,
                values: vec![value as u32],
            },
            t,
            loc,
        ))
    })
}

/// A barrier between the program's threads (Triton's `debug_barrier`): the code
/// generators already order every shared-memory exchange, so it emits nothing.
pub fn debug_barrier() {}

/// Checks that a hint has one positive value per dim of `x` (or one for all) and records
/// it on an integer tile.
#[track_caller]
fn hint(x: Tile, kind: HintKind, values: impl OptConstDims) -> Tile {
    let name = kind.name();
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
    if !x.ty().dtype().is_some_and(|d| d.is_int()) {
        return x;
    }
    let loc = super::tile::caller_loc(std::panic::Location::caller());
    let values: Vec<u32> = values
        .iter()
        .map(|&v| v.min(u32::MAX as i64) as u32)
        .collect();
    with(|b| {
        let t = b.ty(x.0).clone();
        Tile(b.push1(
            Op::Hint {
                x: x.0,
                kind,
                values,
            },
            t,
            loc,
        ))
    })
}
