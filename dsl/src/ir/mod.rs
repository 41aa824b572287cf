//! The tile IR: one concept per file.
//!
//! A [`Function`] is a kernel: runtime parameters, a body [`Block`] of [`Inst`]s, and the
//! [`Type`] of every [`Value`]. Control flow is structured (`for`, `if`, `while` carry their
//! regions). Every op records the kernel-source [`Loc`]. Nothing here assumes a target.

mod dtype;
mod function;
mod op;
mod parse;
mod print;
mod types;
mod value;
mod verify;

pub use dtype::DType;
pub use function::{Block, Function, Inst, Param};
pub use op::{AtomicOp, BinOp, CmpPred, Const, Op, ReduceOp, UnOp};
pub use parse::parse_function;
pub use print::print_function;
pub use types::{broadcast_shapes, Elem, Type};
pub use value::{Loc, Value};
pub use verify::verify;
