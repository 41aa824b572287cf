//! Triton's `sort` and `topk`: a bitonic sorting network over the last axis (whose size
//! must be a power of two), written in tile ops as Triton writes it in
//! `triton/language/standard.py`. Each compare-and-swap step views the tile as
//! `[outer, 2, inner]`, takes each element's pair partner through the integer bits (so
//! -0.0, NaN payloads and infinities move unchanged), and swaps the pairs that are out of
//! order with an xor of the bits. Comparisons are `>` on the values: a NaN compares false
//! with everything, so where NaNs end up is unspecified, as in Triton.

use super::lang::{
    arange, broadcast_to, compare, expand_dims, fail_with, reshape, where_, NoArg, OptAxis, OptFlag,
};
use super::shape::{as_int, from_int, int_of, pick};
use super::tile::Tile;
use crate::ir::{CmpPred, DType};

/// `x` sorted along its last axis, ascending unless `descending` (Triton's `sort`; `dim`
/// must be the last axis, as in Triton). The last axis must have a power-of-two size.
#[track_caller]
pub fn sort(x: Tile, dim: impl OptAxis, descending: impl OptFlag) -> Tile {
    let Some(n_dims) = check("sort", x, dim.axis()) else {
        return x;
    };
    let descending = descending.flag();
    let mut x = x;
    for stage in 1..=n_dims {
        let order = if stage < n_dims {
            Order::Alternating
        } else {
            Order::Fixed(descending)
        };
        x = bitonic_merge(x, stage, order, n_dims);
    }
    x
}

/// The `k` largest elements of `x` along its last axis, largest first (Triton's `topk`;
/// `k` and the last axis's size must be powers of two, `k` at most that size).
#[track_caller]
pub fn topk(x: Tile, k: impl super::lang::ConstInt, dim: impl OptAxis) -> Tile {
    let Some(n_dims) = check("topk", x, dim.axis()) else {
        return x;
    };
    let (k, n) = (k.get() as usize, 1usize << n_dims);
    if !k.is_power_of_two() || k > n {
        let msg = format!("topk: k = {k} must be a power of two of at most {n}");
        return fail_with(x, msg);
    }
    let sorted = sort(x, NoArg, true);
    // The first k of each line: the first of `n / k` rows of `k`.
    let mut shape = x.shape();
    let outer: usize = shape[..shape.len() - 1].iter().product();
    let rows = reshape(sorted, [outer, n / k, k]);
    let first = pick(rows, 0);
    *shape.last_mut().expect("rank checked") = k;
    reshape(first, shape)
}

/// The exponent of the last axis's size, or `None` after failing the trace.
#[track_caller]
fn check(func: &str, x: Tile, dim: Option<i64>) -> Option<u32> {
    let shape = x.shape();
    let rank = shape.len() as i64;
    let last = rank - 1;
    let dim = dim.unwrap_or(last);
    let n = shape.last().copied().unwrap_or(0);
    let problem = if rank == 0 {
        Some(format!("{func} needs a tile, got {}", x.ty()))
    } else if dim != last && dim != -1 {
        Some(format!(
            "{func} sorts along the last axis only (as Triton's): dim {dim} of {}",
            x.ty()
        ))
    } else if !n.is_power_of_two() {
        Some(format!(
            "{func} needs a power-of-two last axis, got {}",
            x.ty()
        ))
    } else {
        None
    };
    match problem {
        Some(msg) => {
            fail_with(x, msg);
            None
        }
        None => Some(n.trailing_zeros()),
    }
}

/// The direction of one merge: alternating between blocks, or fixed.
#[derive(Clone, Copy)]
enum Order {
    Alternating,
    Fixed(bool),
}

#[track_caller]
fn bitonic_merge(x: Tile, stage: u32, order: Order, n_dims: u32) -> Tile {
    let numel = x.ty().numel();
    let n_outer = numel >> n_dims;
    let flip = match order {
        Order::Alternating => {
            let shape = [n_outer << (n_dims - 1 - stage), 2, 1 << stage];
            let two = expand_dims(expand_dims(arange(0, 2), 0), 2);
            let f = compare(broadcast_to(two, shape), CmpPred::Ne, 0);
            Some(reshape(f, x.shape()))
        }
        Order::Fixed(true) => Some(super::lang::full(x.shape(), true, DType::Bool)),
        Order::Fixed(false) => None,
    };
    let mut x = x;
    for i in 0..stage {
        x = compare_and_swap(x, flip, i + (n_dims - stage), n_dims);
    }
    x
}

/// One layer of the network: each element's partner `2^(n_dims - i - 1)` away, swapped
/// when the pair is out of order (`flip` reverses the order where true).
#[track_caller]
fn compare_and_swap(x: Tile, flip: Option<Tile>, i: u32, n_dims: u32) -> Tile {
    let numel = x.ty().numel();
    let n_outer = numel >> n_dims;
    let shape = [n_outer << i, 2, 1 << (n_dims - i - 1)];
    let d = x.dtype();
    let int = int_of(d);
    let bits = as_int(x, int);
    let y = reshape(bits, shape);
    let partner = |k: i32| {
        let half = expand_dims(pick(y, k), 1);
        reshape(broadcast_to(half, shape), x.shape())
    };
    let (ileft, iright) = (partner(0), partner(1));
    // Bools compare as their 0/1 bytes; other dtypes as themselves.
    let (left, right) = if d.is_bool() {
        (ileft, iright)
    } else {
        (from_int(ileft, d), from_int(iright, d))
    };
    let mut cond = compare(left, CmpPred::Gt, right);
    if let Some(f) = flip {
        cond ^= f;
    }
    let swapped = bits ^ where_(cond, ileft ^ iright, 0);
    from_int(swapped, d)
}
