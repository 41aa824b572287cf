//! Unsuffixed literals on the left of an operator (`1 / n`, `0.5 * x`), as the kernel
//! macro emits them: `WeakInt(1) / n`.
//!
//! Rust cannot pick the literal's type from `{integer}: Div<Tile>` (every integer type
//! divides a tile), so `-(1 / n)` or `(0.5 * x).to(…)` stop at "type annotations needed".
//! Dispatching on the right operand instead gives the literal the type Triton's weak
//! typing gives it: the tile's dtype for a tile, the operand's own type for a plain Rust
//! value (what Rust would infer there).

use super::builder::with;
use super::tile::{caller_loc, Operand, Tile};
use crate::ir::BinOp;

/// An unsuffixed integer literal on the left of an operator.
#[derive(Debug, Clone, Copy)]
pub struct WeakInt(pub i128);

/// An unsuffixed float literal on the left of an operator.
#[derive(Debug, Clone, Copy)]
pub struct WeakFloat(pub f64);

/// A right operand that gives a literal on its left its type.
#[diagnostic::on_unimplemented(
    message = "a literal cannot be combined with `{Self}` here",
    label = "a literal on the left of an operator takes its type from this operand"
)]
pub trait WeakRhs<L>: Sized {
    /// What `literal op self` gives.
    type Output;
    /// `lhs op self`.
    #[track_caller]
    fn apply(self, op: BinOp, lhs: L) -> Self::Output;
}

#[track_caller]
fn tile_op(op: BinOp, lhs: Operand, rhs: Tile) -> Tile {
    let loc = caller_loc(std::panic::Location::caller());
    Tile(with(|b| b.binary(op, lhs, Operand::Tile(rhs), &loc)))
}

impl WeakRhs<WeakInt> for Tile {
    type Output = Tile;
    #[track_caller]
    fn apply(self, op: BinOp, lhs: WeakInt) -> Tile {
        tile_op(op, Operand::Int(lhs.0), self)
    }
}

impl WeakRhs<WeakFloat> for Tile {
    type Output = Tile;
    #[track_caller]
    fn apply(self, op: BinOp, lhs: WeakFloat) -> Tile {
        tile_op(op, Operand::Float(lhs.0), self)
    }
}

impl<L, R: WeakRhs<L> + Copy> WeakRhs<L> for &R {
    type Output = R::Output;
    #[track_caller]
    fn apply(self, op: BinOp, lhs: L) -> R::Output {
        (*self).apply(op, lhs)
    }
}

/// `lhs op rhs` in Rust's own arithmetic, for the operators the macro rewrites.
macro_rules! native_op {
    ($op:expr, $l:expr, $r:expr, bits) => {
        match $op {
            BinOp::And => $l & $r,
            BinOp::Or => $l | $r,
            BinOp::Xor => $l ^ $r,
            op => native_op!(op, $l, $r),
        }
    };
    ($op:expr, $l:expr, $r:expr) => {
        match $op {
            BinOp::Add => $l + $r,
            BinOp::Sub => $l - $r,
            BinOp::Mul => $l * $r,
            BinOp::Div => $l / $r,
            BinOp::Rem => $l % $r,
            op => unreachable!("the kernel macro emits no weak `{}`", op.name()),
        }
    };
}

macro_rules! weak_ints {
    ($($t:ty),*) => {$(
        impl WeakRhs<WeakInt> for $t {
            type Output = $t;
            fn apply(self, op: BinOp, lhs: WeakInt) -> $t {
                native_op!(op, lhs.0 as $t, self, bits)
            }
        }
    )*};
}
weak_ints!(i8, i16, i32, i64, i128, isize, u8, u16, u32, u64, u128, usize);

macro_rules! weak_floats {
    ($($t:ty),*) => {$(
        impl WeakRhs<WeakInt> for $t {
            type Output = $t;
            fn apply(self, op: BinOp, lhs: WeakInt) -> $t {
                if matches!(op, BinOp::And | BinOp::Or | BinOp::Xor) {
                    panic!("`{}` is not defined on {}", op.name(), stringify!($t));
                }
                native_op!(op, lhs.0 as $t, self)
            }
        }
        impl WeakRhs<WeakFloat> for $t {
            type Output = $t;
            fn apply(self, op: BinOp, lhs: WeakFloat) -> $t {
                native_op!(op, lhs.0 as $t, self)
            }
        }
    )*};
}
weak_floats!(f32, f64);

macro_rules! weak_ops {
    ($lit:ident: $($trait:ident $method:ident => $op:ident),*) => {$(
        impl<R: WeakRhs<$lit>> std::ops::$trait<R> for $lit {
            type Output = R::Output;
            #[track_caller]
            fn $method(self, rhs: R) -> R::Output {
                rhs.apply(BinOp::$op, self)
            }
        }
    )*};
}
weak_ops!(WeakInt: Add add => Add, Sub sub => Sub, Mul mul => Mul, Div div => Div, Rem rem => Rem,
    BitAnd bitand => And, BitOr bitor => Or, BitXor bitxor => Xor);
weak_ops!(WeakFloat: Add add => Add, Sub sub => Sub, Mul mul => Mul, Div div => Div, Rem rem => Rem);
