//! Triton's `reduce` and `associative_scan` with a combine function, written in tile ops.
//! The reduction combines adjacent pairs along the axis until one element is left (a
//! `gather` picks each pair's halves), the scan is Hillis–Steele doubling (a `gather`
//! shifts, `where_` keeps the prefix). Both combine in index order (`combine(earlier,
//! later)`), so an associative function need not be commutative, and every device runs the
//! same ops and agrees with the interpreter bit for bit. The axis length must be a power of
//! two, as Triton's. A combine function takes and returns a tile or a tuple of tiles of one
//! shape (Triton's tuples of tensors: an argmax combines values and indices together).

use super::flow::Carry;
use super::lang::{
    arange, broadcast_to, compare, fail_with, full, gather, reshape, where_, OptAxis, OptFlag,
};
use super::tile::Tile;
use crate::ir::{CmpPred, DType};

/// `input` reduced along `axis` (every axis, row-major, when absent) by `combine_fn`
/// (Triton's `reduce`); `keep_dims` keeps the reduced axis with size 1.
#[track_caller]
pub fn reduce<C: Carry>(
    input: C,
    axis: impl OptAxis,
    combine_fn: impl Fn(C, C) -> C,
    keep_dims: impl OptFlag,
) -> C {
    let keep_dims = keep_dims.flag();
    let tiles = tiles_of(&input);
    let Some(shape) = common_shape(&tiles, "reduce") else {
        return input;
    };
    let (mut cur, axis) = match axis.axis() {
        Some(a) => (input, a),
        None => {
            let flat = map(&input, |t| reshape(t, [t.ty().numel()]));
            (flat, 0)
        }
    };
    let cur_shape = tiles_of(&cur)[0].shape();
    let rank = cur_shape.len() as i64;
    let a = if axis < 0 { axis + rank } else { axis };
    if a < 0 || a >= rank {
        let msg = format!("reduce: axis {axis} is out of range for a tile of shape {shape:?}");
        fail_with(tiles[0], msg);
        return cur;
    }
    let a = a as usize;
    let mut len = cur_shape[a];
    if !len.is_power_of_two() {
        let msg = format!("reduce: the axis has {len} elements; a power of two is needed");
        fail_with(tiles[0], msg);
        return cur;
    }
    while len > 1 {
        let lo = map(&cur, |t| pair_half(t, a, 0));
        let hi = map(&cur, |t| pair_half(t, a, 1));
        cur = combine_fn(lo, hi);
        len /= 2;
    }
    let mut out_shape = cur_shape.clone();
    match keep_dims {
        true if axis_given(&shape, &cur_shape) => out_shape[a] = 1,
        true => out_shape = vec![1; shape.len()],
        false => {
            out_shape.remove(a);
        }
    }
    map(&cur, |t| reshape(t, out_shape.clone()))
}

/// The inclusive scan of `input` along `axis` by `combine_fn` (Triton's
/// `associative_scan`): element `i` combines elements `0..=i` in order (`i..` from the end
/// when `reverse`).
#[track_caller]
pub fn associative_scan<C: Carry>(
    input: C,
    axis: impl super::lang::ConstInt,
    combine_fn: impl Fn(C, C) -> C,
    reverse: impl OptFlag,
) -> C {
    let reverse = reverse.flag();
    let tiles = tiles_of(&input);
    let Some(shape) = common_shape(&tiles, "associative_scan") else {
        return input;
    };
    let rank = shape.len() as i64;
    let axis = axis.get();
    let a = if axis < 0 { axis + rank } else { axis };
    if a < 0 || a >= rank {
        let msg =
            format!("associative_scan: axis {axis} is out of range for a tile of shape {shape:?}");
        fail_with(tiles[0], msg);
        return input;
    }
    let a = a as usize;
    let n = shape[a];
    if !n.is_power_of_two() {
        let msg = format!("associative_scan: the axis has {n} elements; a power of two is needed");
        fail_with(tiles[0], msg);
        return input;
    }
    // The position along the axis, broadcast to the tile.
    let mut line = vec![1; shape.len()];
    line[a] = n;
    let pos = broadcast_to(reshape(arange(0, n as i64), line), shape.clone());
    let mut cur = input;
    let mut d = 1;
    while d < n {
        let (from, inside) = match reverse {
            false => (pos - d as i64, compare(pos, CmpPred::Ge, d as i64)),
            true => (pos + d as i64, compare(pos, CmpPred::Lt, (n - d) as i64)),
        };
        let other = map(&cur, |t| gather(t, from, a as i64));
        let combined = match reverse {
            false => combine_fn(other, copy(&cur)),
            true => combine_fn(copy(&cur), other),
        };
        let (new, old) = (tiles_of(&combined), tiles_of(&cur));
        let next: Vec<Tile> = new
            .iter()
            .zip(&old)
            .map(|(n, o)| where_(inside, *n, *o))
            .collect();
        cur = cur.rebuild(&mut next.iter());
        d *= 2;
    }
    cur
}

/// Whether a reduction kept the input's rank (an axis was given).
fn axis_given(input: &[usize], reduced: &[usize]) -> bool {
    input.len() == reduced.len()
}

/// The even (`k = 0`) or odd (`k = 1`) elements of `t` along `axis`.
#[track_caller]
fn pair_half(t: Tile, axis: usize, k: i64) -> Tile {
    let mut shape = t.shape();
    let half = shape[axis] / 2;
    let mut pairs = shape[..axis].to_vec();
    pairs.extend([half, 2]);
    pairs.extend_from_slice(&shape[axis + 1..]);
    let mut one = pairs.clone();
    one[axis + 1] = 1;
    let index = full(one, k, DType::I32);
    let picked = gather(reshape(t, pairs), index, axis as i64 + 1);
    shape[axis] = half;
    reshape(picked, shape)
}

fn tiles_of<C: Carry>(c: &C) -> Vec<Tile> {
    let mut out = Vec::new();
    c.tiles(&mut out);
    out
}

fn copy<C: Carry>(c: &C) -> C {
    c.rebuild(&mut tiles_of(c).iter())
}

fn map<C: Carry>(c: &C, f: impl Fn(Tile) -> Tile) -> C {
    let mapped: Vec<Tile> = tiles_of(c).into_iter().map(f).collect();
    c.rebuild(&mut mapped.iter())
}

/// The shape every tile of a combine value has, or a trace error.
#[track_caller]
fn common_shape(tiles: &[Tile], what: &str) -> Option<Vec<usize>> {
    let Some(first) = tiles.first() else {
        panic!("{what}: the input has no tiles");
    };
    let shape = first.shape();
    if let Some(t) = tiles
        .iter()
        .find(|t| t.shape() != shape || t.ty().rank() == 0)
    {
        let msg = format!(
            "{what}: every input must be a tile of one shape, got {} and {}",
            first.ty(),
            t.ty()
        );
        fail_with(*first, msg);
        return None;
    }
    Some(shape)
}
