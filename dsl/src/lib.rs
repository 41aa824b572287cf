//! The Tritium tile IR and the tracing API that `#[kernel]`-generated code calls.
#![deny(missing_docs)]

mod error;
pub mod ir;

pub use error::{Error, Result};
