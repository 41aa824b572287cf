//! The tile IR: one concept per file.
//!
//! A [`Function`] is a kernel: runtime parameters, a body [`Block`] of [`Inst`]s, and the
//! [`Type`] of every [`Value`]. Control flow is structured (`for`, `if`, `while` carry their
//! regions). Every op records the kernel-source [`Loc`]. Nothing here assumes a target.

/// `enum` with IR-text names, `ALL`, `name()` and `from_name()`.
macro_rules! named_enum {
    ($(#[$m:meta])* $name:ident { $($(#[$vm:meta])* $variant:ident = $text:literal),* $(,)? }) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum $name { $($(#[$vm])* $variant),* }
        impl $name {
            /// Every variant.
            pub const ALL: &'static [$name] = &[$($name::$variant),*];
            /// The name used in IR text.
            pub fn name(self) -> &'static str {
                match self { $($name::$variant => $text),* }
            }
            /// Parses the IR-text name.
            pub fn from_name(s: &str) -> Option<Self> {
                Self::ALL.iter().copied().find(|v| v.name() == s)
            }
        }
    };
}

mod affine;
mod axis_info;
mod bounds;
mod cache;
mod custom;
mod dtype;
pub mod fp8;
mod function;
mod limits;
mod op;
mod parse;
mod pointer_offsets;
mod print;
mod transposed_loads;
mod types;
mod value;
mod verify;
mod view;

pub use affine::{affine_lanes, row_major, Affine, Widened};
pub use axis_info::{axis_info, pow2_dividing, AxisInfo, MAX_DIVISIBILITY};
pub use bounds::machine as integer_op;
pub use bounds::{
    bounds_proof, Access, BoundsProof, Entry, LaunchMemory, LaunchValues, MemoryRead,
    ProofWorkspace, Refuted, SiteProof, Verdict, ViewElements, MAX_ENUMERATED,
};
pub use cache::{CacheHints, CacheModifier, Eviction};
pub use custom::{
    allowed_pipes, is_builtin_name, AsmOperand, Bitcode, BuiltinAccess, BuiltinExtent, CoreType,
    CustomAttrs, CustomCall, ExtraBuffer, InlineAsm, Mode, Pipe,
};
pub use dtype::DType;
pub use function::{Block, Function, Inst, Param};
pub use limits::{MAX_DEBUG_TEXT, MAX_NESTING, MAX_RANK, MAX_TILE_ELEMS, MAX_VALUES};
pub use op::{AtomicOp, BinOp, CmpPred, Const, HintKind, Op, ReduceOp, ScanOp, UnOp, ASSERT_KIND};
pub use parse::parse_function;
pub use pointer_offsets::carry_pointer_offsets;
pub use print::print_function;
pub use transposed_loads::sink_transposes;
pub use types::{broadcast_shapes, Elem, Type};
pub use value::{Loc, Value};
pub use verify::verify;
pub use view::{ViewLayout, MAX_VIEW_AXES};
