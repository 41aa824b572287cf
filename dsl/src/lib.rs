//! The Tritium tile IR and the tracing API that `#[kernel]`-generated code calls.
//!
//! - [`ir`]: the target-neutral tile IR, its verifier and its text form.
//! - [`trace`]: the tracing API: [`Tile`](trace::Tile), the kernel language
//!   ([`trace::lang`]) and structured control flow ([`trace::flow`]).
#![deny(missing_docs)]

pub mod custom;
mod error;
pub mod ir;
pub mod trace;

pub use error::{Error, Result};
pub use ir::DType;
