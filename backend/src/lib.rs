//! Tritium backend: lowers the tile IR to LLVM, JIT-compiles and caches kernels,
//! launches grids on CPU threads and CUDA devices, and interprets the IR with ndarray.
//! (MindSpore-style AOT operators are the `tritium-aot` crate.)
#![deny(missing_docs)]

pub mod builtins;
pub mod cpu;
pub mod cuda;
pub mod dispatch;
mod error;
mod float_order;
pub mod interp;
pub mod launch;
mod llvm;
pub mod pipeline;
mod runtime;

pub use dispatch::{launch, Device};
pub use error::{Error, Result};
pub use launch::print::capture_device_prints;
pub use launch::{
    check_args, Grid, KernelArgs, KernelKey, LaunchOptions, Memory, PackedPtr, Pointee, PtrArg,
    PtrTable, RawArg, RawBuffer, SiteBits, SiteChecks, Unchecked,
};
