//! Custom ops: the registry `#[register_custom_op]` fills, the shipped `__builtin_*` table,
//! and [`custom`], the call kernels make (`custom("add", a, b, out = buf)`).
//!
//! A registration gives the op's name, core, pipe and mode, and a per-call constructor
//! (triton-ascend's `__init__`) that sees the argument types ([`CustomArgs`]) and returns a
//! [`CustomImpl`]: the symbol, the bitcode, extra temp buffers and dtype overrides.

mod builtins;
mod call;
mod registry;

pub use builtins::BUILTIN_NAMES;
pub use call::{
    custom, custom_with, inline_asm_elementwise, plan_call, AsmDtypes, CallPlan, CustomIns,
    CustomOptions, CustomOuts,
};
pub use registry::{lookup, registered_names, CustomArgs, CustomImpl, CustomOpDef};

#[doc(hidden)]
pub use inventory;

/// Embeds `$OUT_DIR/<file>` (a build script's output) as [`Bitcode`](crate::ir::Bitcode)
/// labelled `<file>`: binaries then need no file at run time.
#[macro_export]
macro_rules! include_bitcode {
    ($file:literal) => {
        $crate::ir::Bitcode::from_bytes(
            $file,
            &include_bytes!(concat!(env!("OUT_DIR"), "/", $file))[..],
        )
    };
}

/// Embeds `<crate root>/<path>` (relative to the declaring crate's `Cargo.toml`) as
/// [`Bitcode`](crate::ir::Bitcode) labelled `<path>`.
#[macro_export]
macro_rules! bitcode_file {
    ($path:literal) => {
        $crate::ir::Bitcode::from_bytes(
            $path,
            &include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/", $path))[..],
        )
    };
}
