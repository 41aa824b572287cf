//! Differential fuzzing of the tile IR: random programs on every device against the
//! reference interpreter.
//!
//! - [`gen`]: the random program generator (deterministic from a seed, no undefined
//!   behaviour by construction).
//! - [`info`]: what the comparison may assume of each value (exact, within ulps, or not
//!   comparable), recomputed from the IR alone.
//! - [`exec`], [`compare`], [`check`]: running a case on every target and comparing
//!   (compiled targets launched the default, sound way, unchecked, or in checked mode).
//! - [`oob`]: out-of-bounds variants of cases, which every default launch must reject
//!   where the interpreter does, writing nothing outside the buffers.
//! - [`coverage`]: which op kinds programs use (every kind must be generated).
//! - [`reach`]: which stores reach the comparison (not overwritten by later ones).
//! - [`shrink`]: the smallest program that still fails.
//! - [`case`]: the text form failing programs are printed in and the suite replays.
//! - [`mutate`]: the text parser and the verifier against mutated kernel text.
//! - [`package`]: the AOT package loader against mutated packages.
//! - [`pool`]: long runs in worker processes (a crash or a hang costs one seed).
#![deny(missing_docs)]

pub mod case;
pub mod check;
pub mod compare;
pub mod coverage;
pub mod exec;
pub mod gen;
pub mod info;
pub mod mutate;
pub mod oob;
pub mod package;
pub mod pool;
pub mod reach;
pub mod rng;
pub mod shrink;

pub use case::{Arg, Case, RowStride, View};
pub use check::{check, Report};
pub use exec::Target;
pub use gen::{generate, GenConfig};
pub use rng::Rng;
