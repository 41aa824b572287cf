//! Tritium: Triton-style tile kernels in Rust.
//!
//! Write a kernel with [`kernel`], launch it with `my_kernel::launch(&Device::cpu(), grid, args…)`.
//! See the README for a tour and `ARCHITECTURE.md` for the layout.
pub use tritium_aot as aot;
pub use tritium_backend as backend;
pub use tritium_dsl as dsl;
pub use tritium_dsl::{bitcode_file, include_bitcode};
pub use tritium_macros::{autotune, device, heuristics, kernel, register_custom_op};

pub use tritium_backend::{Device, Error, Grid, LaunchOptions, PtrTable, Result};

extern crate self as tritium;

pub mod autotune;
pub mod testing;

/// What kernel code and launch code need: `use tritium::prelude::*;`.
pub mod prelude {
    pub use crate::{
        autotune, bitcode_file, device, heuristics, include_bitcode, kernel, register_custom_op,
    };
    pub use tritium_backend::{Device, Grid, LaunchOptions, PtrTable};
    pub use tritium_dsl::custom::{CustomArgs, CustomImpl};
    pub use tritium_dsl::ir::{Bitcode, CoreType, Mode, Pipe};
    pub use tritium_dsl::trace::lang::{cdiv, next_power_of_2, BlockPtr, TensorDescriptor};
    pub use tritium_dsl::trace::{Element, Float, Int, Ptr, Tile, F8E4B15, F8E4M3, F8E5M2};
    pub use tritium_dsl::DType;
}
