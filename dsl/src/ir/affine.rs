//! Lanes as affine functions of their index: which pointer tiles address one contiguous,
//! row-major run of memory (so that a code generator may hand that memory to C++ instead
//! of a copy of it).
//!
//! Integer ops are modular in their width, and modular `+`, `-`, `*` and truncation keep
//! `lane(i) ≡ c + Σ strides[d]·i[d]` (mod 2^width) exact. Only widening (a cast to more
//! bits, an `addptr` offset narrower than 64 bits) can break it: a narrow value that wraps
//! inside the tile widens to a jump. [`Affine::widened`] lists those points; a widened
//! tile with non-negative strides is exact when its widened first and last lanes differ by
//! exactly its span (every lane's exact value lies between theirs, so none wraps), which
//! is what the code generator checks at run time.

use super::{BinOp, Const, Function, Inst, Op, Type, Value};
use std::collections::HashMap;

/// A tile whose lane at index `i` is `c + Σ strides[d]·i[d]` for a runtime `c`, in units
/// of the pointee for pointer tiles, provided the [`widened`](Self::widened) checks hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Affine {
    /// One per dim of the tile (0 for a dim along which lanes are equal; `None` for a
    /// stride known only at run time, as `i * stride_am` with a runtime `stride_am`).
    pub strides: Vec<Option<i64>>,
    /// Narrow integer tiles that are widened on the way: for each, whether it is
    /// sign-extended and its span (`Σ strides[d]·(shape[d] − 1)`, non-negative). The lanes
    /// are affine when, for each, `ext(last lane) − ext(first lane) == span` in 64 bits.
    pub widened: Vec<Widened>,
}

/// A narrow integer tile widened inside an [`Affine`] expression (see there).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Widened {
    /// The narrow tile.
    pub value: Value,
    /// Sign-extended (else zero-extended).
    pub signed: bool,
    /// Its last lane minus its first when nothing wraps (`None` when a stride is known
    /// only at run time: the check cannot be made).
    pub span: Option<i64>,
    /// For each axis of the tile whose form this is (not the narrow tile's own axes: a
    /// broadcast, permute or reshape moves them), whether the narrow lanes may differ
    /// along it. One equal along the last axis widens each line's lanes alike, so runs
    /// along that axis hold whether it wraps or not.
    pub varies_along: Vec<bool>,
}

impl Affine {
    /// Whether every widened tile can be checked at run time (see [`Widened`]).
    pub fn is_checkable(&self) -> bool {
        self.widened.iter().all(|w| w.span.is_some())
    }

    /// Whether the lanes are `c + row-major index` (dims of size 1 have any stride).
    pub fn is_row_major(&self, shape: &[usize]) -> bool {
        let mut want = 1i64;
        for (s, n) in self.strides.iter().zip(shape).rev() {
            if *n != 1 && *s != Some(want) {
                return false;
            }
            want = want.saturating_mul(*n as i64);
        }
        true
    }
}

/// The affine form of `v`'s lanes, or `None` when it is not provably affine. `defs` maps
/// every value to the instruction defining it (parameters and loop-carried values have
/// none: only scalars of them are affine).
pub fn affine_lanes(f: &Function, defs: &HashMap<Value, &Inst>, v: Value) -> Option<Affine> {
    let t = f.ty(v);
    let zeros = || Affine {
        strides: vec![Some(0); t.rank()],
        widened: vec![],
    };
    if t.is_scalar() {
        return Some(zeros());
    }
    let inst = defs.get(&v)?;
    let of = |x: Value| affine_lanes(f, defs, x);
    let a = match &inst.op {
        Op::Const(_) | Op::Splat(_) => zeros(),
        Op::Arange { .. } => Affine {
            strides: vec![Some(1)],
            widened: vec![],
        },
        Op::Hint { x, .. } => of(*x)?,
        Op::Broadcast(x) => {
            let (xa, xt) = (of(*x)?, f.ty(*x));
            let lead = t.rank() - xt.rank();
            let from: Vec<Option<usize>> = (0..t.rank())
                .map(|d| d.checked_sub(lead).filter(|dx| xt.shape[*dx] == t.shape[d]))
                .collect();
            moved(xa, &from)
        }
        Op::ExpandDims { x, axis } => {
            let xa = of(*x)?;
            let mut from: Vec<Option<usize>> = (0..xa.strides.len()).map(Some).collect();
            from.insert(*axis as usize, None);
            moved(xa, &from)
        }
        Op::Permute { x, dims } => {
            let xa = of(*x)?;
            let from: Vec<Option<usize>> = dims.iter().map(|d| Some(*d as usize)).collect();
            moved(xa, &from)
        }
        Op::Reshape(x) => {
            let xa = of(*x)?;
            if is_uniform(&xa) {
                zeros()
            } else if xa.is_row_major(&f.ty(*x).shape) {
                // Where a narrow tile's lanes vary after a reshape is not followed: anywhere.
                let widened = xa
                    .widened
                    .into_iter()
                    .map(|w| Widened {
                        varies_along: vec![true; t.rank()],
                        ..w
                    })
                    .collect();
                Affine {
                    strides: row_major(&t.shape).into_iter().map(Some).collect(),
                    widened,
                }
            } else {
                return None;
            }
        }
        Op::Binary(op @ (BinOp::Add | BinOp::Sub), x, y) if is_int(f.ty(*x)) => {
            let (xa, ya) = (of(*x)?, of(*y)?);
            let sign = if *op == BinOp::Add { 1 } else { -1 };
            combine(xa, ya, |a, b| a.checked_add(b.checked_mul(sign)?))
        }
        Op::Binary(BinOp::Mul, x, y) if is_int(f.ty(*x)) => {
            let (xa, ya) = (of(*x)?, of(*y)?);
            // By a constant, or by equal lanes known only at run time (a zero stride stays
            // zero; any other becomes unknown).
            let scaled = |a: Affine, k: Option<i64>| Affine {
                strides: a
                    .strides
                    .iter()
                    .map(|s| match (*s, k) {
                        (Some(0), _) => Some(0),
                        (Some(s), Some(k)) => s.checked_mul(k),
                        _ => None,
                    })
                    .collect(),
                widened: a.widened,
            };
            match (constant(defs, *x), constant(defs, *y)) {
                (_, Some(k)) => scaled(xa, Some(k)),
                (Some(k), _) => scaled(ya, Some(k)),
                _ if is_uniform(&ya) => scaled(xa, None),
                _ if is_uniform(&xa) => scaled(ya, None),
                _ => return None,
            }
        }
        Op::Cast(x) if is_int(f.ty(*x)) && is_int(t) => {
            let xa = of(*x)?;
            let (from, to) = (f.ty(*x).dtype()?, t.dtype()?);
            if to.bits() > from.bits() {
                widen(xa, *x, from.is_signed_int(), &f.ty(*x).shape)?
            } else {
                xa
            }
        }
        Op::AddPtr(p, o) => {
            let (pa, oa) = (of(*p)?, of(*o)?);
            let od = f.ty(*o).dtype()?;
            let oa = if od.bits() < 64 {
                widen(oa, *o, od.is_signed_int(), &f.ty(*o).shape)?
            } else {
                oa
            };
            combine(pa, oa, i64::checked_add)
        }
        // Any other pure elementwise op of tiles whose lanes are all equal.
        op if op.is_elementwise() && !matches!(op, Op::Load { .. }) => {
            let uniform = op
                .operands()
                .into_iter()
                .all(|o| of(o).is_some_and(|a| is_uniform(&a)));
            if !uniform {
                return None;
            }
            zeros()
        }
        _ => return None,
    };
    Some(if is_uniform(&a) { zeros() } else { a })
}

/// `xa` with its axes moved by a shape op: result axis `d` is `xa`'s axis `from[d]`, or
/// (`None`) a new or broadcast axis, along which the lanes are equal. The widened tiles'
/// axes move with it.
fn moved(xa: Affine, from: &[Option<usize>]) -> Affine {
    let strides = from
        .iter()
        .map(|a| a.map_or(Some(0), |a| xa.strides[a]))
        .collect();
    let widened = xa
        .widened
        .into_iter()
        .map(|w| Widened {
            varies_along: from
                .iter()
                .map(|a| a.is_some_and(|a| w.varies_along[a]))
                .collect(),
            ..w
        })
        .collect();
    Affine { strides, widened }
}

/// Row-major strides of `shape` (in elements).
pub fn row_major(shape: &[usize]) -> Vec<i64> {
    let mut strides = vec![0i64; shape.len()];
    let mut s = 1i64;
    for d in (0..shape.len()).rev() {
        strides[d] = s;
        s = s.saturating_mul(shape[d] as i64);
    }
    strides
}

fn is_int(t: &Type) -> bool {
    t.dtype().is_some_and(|d| d.is_int())
}

/// Lanes all equal: no stride and nothing to check.
fn is_uniform(a: &Affine) -> bool {
    a.strides.iter().all(|s| *s == Some(0))
}

/// The integer constant every lane of `v` holds, when `v` is one by construction.
fn constant(defs: &HashMap<Value, &Inst>, v: Value) -> Option<i64> {
    match &defs.get(&v)?.op {
        Op::Const(Const::Int(k)) => i64::try_from(*k).ok(),
        Op::Splat(x) | Op::Broadcast(x) | Op::ExpandDims { x, .. } | Op::Hint { x, .. } => {
            constant(defs, *x)
        }
        _ => None,
    }
}

/// `x` and `y` lane by lane, strides combined by `op` (unknown when either is, or on
/// overflow).
fn combine(x: Affine, y: Affine, op: impl Fn(i64, i64) -> Option<i64>) -> Affine {
    let strides = x
        .strides
        .iter()
        .zip(&y.strides)
        .map(|(a, b)| op((*a)?, (*b)?))
        .collect();
    let mut widened = x.widened;
    for w in y.widened {
        if !widened.contains(&w) {
            widened.push(w);
        }
    }
    Affine { strides, widened }
}

/// `xa` (the lanes of narrow tile `x` of `shape`) widened: exact only when `x` does not
/// wrap, which needs non-negative strides (every lane between the first and the last).
fn widen(mut xa: Affine, x: Value, signed: bool, shape: &[usize]) -> Option<Affine> {
    if is_uniform(&xa) {
        return Some(xa);
    }
    let mut span = Some(0i64);
    for (s, n) in xa.strides.iter().zip(shape) {
        match s {
            Some(s) if *s < 0 => return None,
            Some(s) => span = span.and_then(|t| t.checked_add(s.checked_mul(*n as i64 - 1)?)),
            None => span = None,
        }
    }
    let w = Widened {
        value: x,
        signed,
        span,
        varies_along: xa.strides.iter().map(|s| *s != Some(0)).collect(),
    };
    if !xa.widened.contains(&w) {
        xa.widened.push(w);
    }
    Some(xa)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::parse_function;

    /// The affine form of the pointer tile of the kernel's only load.
    fn of_load(text: &str) -> Option<(Affine, Vec<usize>)> {
        let f = parse_function(text).expect("parses");
        let d = f.defs();
        let mut ptr = None;
        f.walk(&mut |i| {
            if let Op::Load { ptr: p, .. } = &i.op {
                ptr = Some(*p);
            }
        });
        let p = ptr.expect("a load");
        affine_lanes(&f, &d, p).map(|a| (a, f.ty(p).shape.clone()))
    }

    /// Which axes of the pointer tile each widened offset varies along, followed through
    /// broadcasts, expand_dims, permutes and reshapes: a run along the last axis checks
    /// only the offsets that vary along it.
    #[test]
    fn widened_offsets_know_the_axes_they_vary_along() {
        // (body ending in the pointer tile, the widened tiles' axes, sorted)
        let cases: &[(&str, &[&[bool]])] = &[
            // Tutorial 03's `b_ptrs` in two steps, (x + rows[:, None] * ld) + cols[None, :]:
            // the row offsets are equal along each line.
            (
                "%2 = arange {start = 0, end = 4} : tile<4xi32>
                 %3 = expand_dims %2 {axis = 1} : tile<4x1xi32>
                 %4 = splat %1 : tile<4x1xi32>
                 %5 = mul %3, %4 : tile<4x1xi32>
                 %6 = broadcast %5 : tile<4x8xi32>
                 %7 = splat %0 : tile<4x8xptr<f32>>
                 %8 = addptr %7, %6 : tile<4x8xptr<f32>>
                 %9 = arange {start = 0, end = 8} : tile<8xi32>
                 %10 = expand_dims %9 {axis = 0} : tile<1x8xi32>
                 %11 = broadcast %10 : tile<4x8xi32>
                 %12 = addptr %8, %11 : tile<4x8xptr<f32>>",
                &[&[false, true], &[true, false]],
            ),
            // An offset widened as a column, then permuted into a row: it varies along
            // the last axis of the pointer tile, not along its own.
            (
                "%2 = arange {start = 0, end = 8} : tile<8xi32>
                 %3 = expand_dims %2 {axis = 1} : tile<8x1xi32>
                 %4 = cast %3 : tile<8x1xi64>
                 %5 = permute %4 {dims = 1x0} : tile<1x8xi64>
                 %6 = broadcast %5 : tile<4x8xi64>
                 %7 = splat %0 : tile<4x8xptr<f32>>
                 %8 = addptr %7, %6 : tile<4x8xptr<f32>>",
                &[&[false, true]],
            ),
            // The same column reshaped into a row: where it varies is not followed.
            (
                "%2 = arange {start = 0, end = 8} : tile<8xi32>
                 %3 = expand_dims %2 {axis = 1} : tile<8x1xi32>
                 %4 = cast %3 : tile<8x1xi64>
                 %5 = reshape %4 : tile<1x8xi64>
                 %6 = splat %0 : tile<1x8xptr<f32>>
                 %7 = addptr %6, %5 : tile<1x8xptr<f32>>",
                &[&[true, true]],
            ),
        ];
        for (body, want) in cases {
            let (a, _) = of_load(&load_text(body)).expect("affine");
            let mut got: Vec<Vec<bool>> =
                a.widened.iter().map(|w| w.varies_along.clone()).collect();
            got.sort();
            let want: Vec<Vec<bool>> = want.iter().map(|w| w.to_vec()).collect();
            assert_eq!(got, want, "{body}");
        }
    }

    #[test]
    fn forms_of_pointer_tiles() {
        // (body ending in the pointer tile, from %0: ptr<f32> and %1: i32; row-major?,
        // strides, widened tiles)
        /// Row-major, the strides, how many widened tiles.
        type Form = (bool, &'static [Option<i64>], usize);
        let cases: &[(&str, Option<Form>)] = &[
            // x + pid*4 + arange: contiguous; the i32 offset is widened.
            (
                "%2 = program_id {axis = 0} : i32
                 %3 = const {value = 4} : i32
                 %4 = mul %2, %3 : i32
                 %5 = arange {start = 0, end = 4} : tile<4xi32>
                 %6 = splat %4 : tile<4xi32>
                 %7 = add %6, %5 : tile<4xi32>
                 %8 = splat %0 : tile<4xptr<f32>>
                 %9 = addptr %8, %7 : tile<4xptr<f32>>",
                Some((true, &[Some(1)], 1)),
            ),
            // Twice the index: a stride of 2.
            (
                "%2 = arange {start = 0, end = 4} : tile<4xi32>
                 %3 = const {value = 2} : tile<4xi32>
                 %4 = mul %2, %3 : tile<4xi32>
                 %5 = splat %0 : tile<4xptr<f32>>
                 %6 = addptr %5, %4 : tile<4xptr<f32>>",
                Some((false, &[Some(2)], 1)),
            ),
            // rows[:, None] * 8 + cols[None, :]: a 2-D row-major block.
            (
                "%2 = arange {start = 0, end = 4} : tile<4xi32>
                 %3 = arange {start = 0, end = 8} : tile<8xi32>
                 %4 = expand_dims %2 {axis = 1} : tile<4x1xi32>
                 %5 = expand_dims %3 {axis = 0} : tile<1x8xi32>
                 %6 = const {value = 8} : tile<4x1xi32>
                 %7 = mul %4, %6 : tile<4x1xi32>
                 %8 = broadcast %7 : tile<4x8xi32>
                 %9 = broadcast %5 : tile<4x8xi32>
                 %10 = add %8, %9 : tile<4x8xi32>
                 %11 = splat %0 : tile<4x8xptr<f32>>
                 %12 = addptr %11, %10 : tile<4x8xptr<f32>>",
                Some((true, &[Some(8), Some(1)], 1)),
            ),
            // The transpose of it is not row-major.
            (
                "%2 = arange {start = 0, end = 4} : tile<4xi32>
                 %3 = arange {start = 0, end = 8} : tile<8xi32>
                 %4 = expand_dims %2 {axis = 0} : tile<1x4xi32>
                 %5 = expand_dims %3 {axis = 1} : tile<8x1xi32>
                 %6 = const {value = 8} : tile<1x4xi32>
                 %7 = mul %4, %6 : tile<1x4xi32>
                 %8 = broadcast %7 : tile<8x4xi32>
                 %9 = broadcast %5 : tile<8x4xi32>
                 %10 = add %8, %9 : tile<8x4xi32>
                 %11 = splat %0 : tile<8x4xptr<f32>>
                 %12 = addptr %11, %10 : tile<8x4xptr<f32>>",
                Some((false, &[Some(1), Some(8)], 1)),
            ),
            // Reversed lanes (n - arange) are affine, but a widened negative stride is not
            // checkable from the first and last lanes alone.
            (
                "%2 = arange {start = 0, end = 4} : tile<4xi32>
                 %3 = splat %1 : tile<4xi32>
                 %4 = sub %3, %2 : tile<4xi32>
                 %5 = splat %0 : tile<4xptr<f32>>
                 %6 = addptr %5, %4 : tile<4xptr<f32>>",
                None,
            ),
            // Lanes multiplied by a runtime value: a stride known only at run time, which
            // no check of the widened offset can cover.
            (
                "%2 = arange {start = 0, end = 4} : tile<4xi32>
                 %3 = splat %1 : tile<4xi32>
                 %4 = mul %2, %3 : tile<4xi32>
                 %5 = splat %0 : tile<4xptr<f32>>
                 %6 = addptr %5, %4 : tile<4xptr<f32>>",
                Some((false, &[None], 1)),
            ),
            // Tutorial 03's `a + rows[:, None] * stride_am + cols[None, :]`: rows one run
            // each, at a distance known only at run time.
            (
                "%2 = arange {start = 0, end = 4} : tile<4xi32>
                 %3 = arange {start = 0, end = 8} : tile<8xi32>
                 %4 = expand_dims %2 {axis = 1} : tile<4x1xi32>
                 %5 = expand_dims %3 {axis = 0} : tile<1x8xi32>
                 %6 = splat %1 : tile<4x1xi32>
                 %7 = mul %4, %6 : tile<4x1xi32>
                 %8 = broadcast %7 : tile<4x8xi32>
                 %9 = broadcast %5 : tile<4x8xi32>
                 %10 = add %8, %9 : tile<4x8xi32>
                 %11 = splat %0 : tile<4x8xptr<f32>>
                 %12 = addptr %11, %10 : tile<4x8xptr<f32>>",
                Some((false, &[None, Some(1)], 1)),
            ),
            // i64 offsets widen nothing; an i32 → i64 cast on the way is checked.
            (
                "%2 = arange {start = 0, end = 4} : tile<4xi32>
                 %3 = cast %2 : tile<4xi64>
                 %4 = splat %0 : tile<4xptr<f32>>
                 %5 = addptr %4, %3 : tile<4xptr<f32>>",
                Some((true, &[Some(1)], 1)),
            ),
            // The same pointer for every lane.
            (
                "%2 = splat %1 : tile<4xi32>
                 %3 = splat %0 : tile<4xptr<f32>>
                 %4 = addptr %3, %2 : tile<4xptr<f32>>",
                Some((false, &[Some(0)], 0)),
            ),
        ];
        for (body, want) in cases {
            let got = of_load(&load_text(body));
            match (got, want) {
                (None, None) => {}
                (Some((a, shape)), Some((row_major, strides, widened))) => {
                    assert_eq!(a.is_row_major(&shape), *row_major, "{body}");
                    assert_eq!(a.strides, strides.to_vec(), "{body}");
                    assert_eq!(a.widened.len(), *widened, "{body}");
                    assert_eq!(a.is_checkable(), !strides.contains(&None), "{body}");
                }
                (got, want) => panic!("{body}: got {got:?}, want {want:?}"),
            }
        }
    }

    /// A kernel of `body` (from `%0: ptr<f32>` and `%1: i32`, ending in a pointer tile)
    /// that loads through its last value.
    fn load_text(body: &str) -> String {
        // The pointer is the last value the body defines.
        let last = body
            .lines()
            .filter_map(|l| {
                l.trim()
                    .strip_prefix('%')?
                    .split(' ')
                    .next()?
                    .parse::<u32>()
                    .ok()
            })
            .max()
            .expect("a body");
        let located: String = body
            .lines()
            .map(|l| format!("{l} loc(\"t.rs\":1:1)\n"))
            .collect();
        format!(
            "kernel @k(p0 %0: ptr<f32>, p1 %1: i32) {{\n{located} %{} = load %{} : {} loc(\"t.rs\":1:1)\n}}\n",
            last + 1,
            last,
            // The pointer tile's type (the body's last), loading f32.
            body.rsplit(": ").next().expect("a type").replace("ptr<f32>", "f32")
        )
    }
}
