//! Triton's shape functions: `flip` (an IR op), and compositions of IR ops: `ravel`,
//! `view`, `zeros_like`, `full_like`, `broadcast`, `join`, `interleave`, `split`, `cat` and
//! `swizzle2d`. Selections and reshapes move the elements, so every backend and the fuzzer
//! see ops they already implement; element values pass through bit for bit (`split` reads
//! floats through their integer bits, so -0.0 and NaN payloads survive).

use super::builder::with;
use super::lang::{
    arange, bitcast, broadcast_to, cast, compare, expand_dims, fail_with, full, minimum, reshape,
    sum, trans, where_, NoArg, OptAxis, OptFlag,
};
use super::tile::{caller_loc, IntoOperand, Operand, Tile};
use crate::ir::{broadcast_shapes, CmpPred, DType, Op};

/// `x` with its elements in reverse order along `dim` (default: the last axis; negative
/// counts from the end), as Triton's `flip`.
#[track_caller]
pub fn flip(x: Tile, dim: impl OptAxis) -> Tile {
    let loc = caller_loc(std::panic::Location::caller());
    let rank = x.shape().len() as i64;
    let dim = dim.axis().unwrap_or(rank - 1);
    let axis = if dim < 0 { dim + rank } else { dim };
    if rank == 0 || axis < 0 || axis >= rank {
        let msg = format!("flip: dim {dim} is out of range for {}", x.ty());
        return fail_with(x, msg);
    }
    let t = x.ty();
    Tile(with(|b| {
        b.push1(
            Op::Flip {
                x: x.0,
                axis: axis as u32,
            },
            t,
            loc,
        )
    }))
}

/// `x` as a 1-D tile, row-major (Triton's `ravel`).
#[track_caller]
pub fn ravel(x: Tile) -> Tile {
    let n = x.ty().numel();
    reshape(x, [n])
}

/// `x` with another shape of as many elements (Triton's `view`; elements keep their
/// row-major order, which Triton allows but does not promise).
#[track_caller]
pub fn view(x: Tile, shape: impl super::lang::IntoShape) -> Tile {
    reshape(x, shape)
}

/// Zeros of `x`'s shape and dtype.
#[track_caller]
pub fn zeros_like(x: Tile) -> Tile {
    full(x.shape(), 0, x.dtype())
}

/// `value` in `x`'s shape, of `x`'s dtype (Triton's `full_like` without `dtype`).
#[track_caller]
pub fn full_like(x: Tile, value: impl IntoOperand) -> Tile {
    full(x.shape(), value, x.dtype())
}

/// `a` and `b` broadcast to their common shape (and promoted to a common dtype when they
/// are literals), as Triton's `broadcast`.
#[track_caller]
pub fn broadcast(a: impl IntoOperand, b: impl IntoOperand) -> (Tile, Tile) {
    let (a, b) = (a.into_operand(), b.into_operand());
    let shape = |o: &Operand| match o {
        Operand::Tile(t) => t.shape(),
        _ => vec![],
    };
    match broadcast_shapes(&shape(&a), &shape(&b)) {
        Some(s) => (broadcast_to(a, s.clone()), broadcast_to(b, s)),
        None => {
            let (ta, tb) = (broadcast_to(a, shape(&a)), broadcast_to(b, shape(&b)));
            let msg = format!(
                "broadcast: {} and {} have no common shape",
                ta.ty(),
                tb.ty()
            );
            (fail_with(ta, msg), tb)
        }
    }
}

/// `a` and `b` side by side along a new last axis of size 2 (Triton's `join`).
#[track_caller]
pub fn join(a: impl IntoOperand, b: impl IntoOperand) -> Tile {
    let (a, b) = broadcast(a, b);
    let rank = a.shape().len();
    let mut pick = compare(arange(0, 2), CmpPred::Eq, 0);
    for _ in 0..rank {
        pick = expand_dims(pick, 0);
    }
    where_(pick, expand_dims(a, rank), expand_dims(b, rank))
}

/// `a` and `b` interleaved along their last axis: `a0, b0, a1, b1, …` (Triton's
/// `interleave`).
#[track_caller]
pub fn interleave(a: impl IntoOperand, b: impl IntoOperand) -> Tile {
    let j = join(a, b);
    let mut shape = j.shape();
    let two = shape.pop().unwrap_or(2);
    if let Some(last) = shape.last_mut() {
        *last *= two;
    } else {
        shape.push(two);
    }
    reshape(j, shape)
}

/// The two halves of `x` along its last axis, which must have size 2 (Triton's `split`).
#[track_caller]
pub fn split(x: Tile) -> (Tile, Tile) {
    let shape = x.shape();
    if shape.last() != Some(&2) {
        let msg = format!("split needs a last axis of size 2, got {}", x.ty());
        return (fail_with(x, msg), x);
    }
    // As `[outer, 2, 1]`: each half is one element along axis 1.
    let y = reshape(x, [x.ty().numel() / 2, 2, 1]);
    let mut half = shape;
    half.pop();
    (reshape(pick(y, 0), half.clone()), reshape(pick(y, 1), half))
}

/// `a` then `b` along axis 0 (Triton's `cat`; the shapes must be equal). Elements keep
/// their order, so `can_reorder` is accepted and changes nothing.
#[track_caller]
pub fn cat(a: Tile, b: Tile, can_reorder: impl OptFlag) -> Tile {
    let _ = can_reorder.flag();
    let shape = a.shape();
    if shape != b.shape() || shape.is_empty() {
        let msg = format!(
            "cat needs two tiles of one shape, got {} and {}",
            a.ty(),
            b.ty()
        );
        return fail_with(a, msg);
    }
    let n = a.ty().numel();
    // [n, 2] -> [2, n] -> [2n]: all of `a`, then all of `b`.
    let both = reshape(trans(join(ravel(a), ravel(b))), [2 * n]);
    let mut out = shape;
    out[0] *= 2;
    reshape(both, out)
}

/// Triton's `swizzle2d`: maps row-major indices `(i, j)` of a `size_i × size_j` grid to
/// column-major within groups of `size_g` rows, so neighbouring programs share tiles.
#[track_caller]
pub fn swizzle2d(
    i: impl IntoOperand,
    j: impl IntoOperand,
    size_i: impl IntoOperand,
    size_j: impl IntoOperand,
    size_g: impl IntoOperand,
) -> (Tile, Tile) {
    let (i, j) = (cast(i, DType::I32), cast(j, DType::I32));
    let (size_i, size_j, size_g) = (
        cast(size_i, DType::I32),
        cast(size_j, DType::I32),
        cast(size_g, DType::I32),
    );
    let ij = i * size_j + j;
    let size_gj = size_g * size_j;
    let group_id = ij / size_gj;
    let off_i = group_id * size_g;
    let size_g = minimum(size_i - off_i, size_g);
    let ij = ij % size_gj;
    (off_i + ij % size_g, ij / size_g)
}

/// Element `k` along axis 1 of a `[a, m, b]` tile: a `[a, b]` tile, bit for bit (the
/// selection runs on integer bits, and every other element adds a 0 to the sum).
#[track_caller]
pub(super) fn pick(y: Tile, k: i32) -> Tile {
    let m = y.shape()[1];
    let iota = expand_dims(expand_dims(arange(0, m), 0), 2);
    let d = y.dtype();
    let int = int_of(d);
    let bits = as_int(y, int);
    let picked = where_(compare(iota, CmpPred::Eq, k), bits, 0);
    // Sums of narrow integers run in i32; casting back keeps the one nonzero term.
    from_int(cast(sum(picked, 1, NoArg), int), d)
}

/// The signed integer dtype holding `d`'s bits (bools as i8).
pub(super) fn int_of(d: DType) -> DType {
    match d.bits() {
        1 | 8 => DType::I8,
        16 => DType::I16,
        32 => DType::I32,
        _ => DType::I64,
    }
}

#[track_caller]
pub(super) fn as_int(x: Tile, int: DType) -> Tile {
    let d = x.dtype();
    if d == int {
        x
    } else if d.is_bool() {
        cast(x, int)
    } else {
        bitcast(x, int)
    }
}

#[track_caller]
pub(super) fn from_int(x: Tile, d: DType) -> Tile {
    if x.dtype() == d {
        x
    } else if d.is_bool() {
        cast(x, d)
    } else {
        bitcast(x, d)
    }
}
