//! Differential fuzzing of the tile IR.
//!
//! - [`mutate`]: the text parser and the verifier against mutated kernel text.
#![deny(missing_docs)]

pub mod mutate;
pub mod rng;

pub use rng::Rng;
