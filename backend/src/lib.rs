//! Tritium backend: lowers the tile IR to LLVM, JIT-compiles and caches kernels,
//! launches grids on CPU threads, interprets the IR with ndarray, and runs
//! MindSpore-style AOT operators.
#![deny(missing_docs)]

pub mod aot;
mod error;

pub use error::{Error, Result};
