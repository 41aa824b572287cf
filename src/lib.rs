//! Tritium: Triton-style tile kernels in Rust.
pub use tritium_backend as backend;
pub use tritium_dsl as dsl;
pub use tritium_macros::{device, kernel};

extern crate self as tritium;
