//! Math functions built from basic arithmetic (FMA, bitcasts, integer ops, selects), for
//! targets without a libm: f64 `exp`, `exp2`, `log`, `log2`, `sin`, `cos` and f32 `exp2`,
//! `log`, `log2`, `sin`, `cos`. NVPTX has no libm to call and Tritium ships no libdevice, so
//! the CUDA generator emits these (f32 `exp` is `llvm::exp`, f32 `exp2` PTX `ex2.approx`),
//! and the CUDA emulator runs the very same IR on the host. The CPU backend keeps its libm
//! intrinsics except for f32 `exp2` (and `llvm::exp`): written in vectorizable arithmetic,
//! loops containing them vectorize.
//!
//! Every function reduces its argument exactly or in double-double (double-single in f32:
//! an FMA gives the exact error of a product, TwoSum that of a sum) and evaluates a Taylor
//! (or, for `log`, atanh) series with enough terms that truncation is below 2^-5 ulp; the
//! last step adds a small tail to a leading term, so one rounding dominates the error. The
//! coefficients are the correctly rounded `1/n!` and `1/(2n+1)`. The algorithms are
//! written once over a [`ops::Format`] (f32 or f64 and its constants); the Payne-Hanek
//! reduction of large sin/cos arguments is f64 for both.
//!
//! Largest errors against the exact value, measured (`backend/tests/math.rs`): f64 on
//! 240,000 inputs spread over every range, checked with mpmath, plus the test's hard
//! cases; f32 on 4,000,000 inputs against the host's f64 libm.
//!
//! | function | f64 (ulp) | f64 subnormal results (steps) | f32 (ulp) |
//! | --- | --- | --- | --- |
//! | `exp` | 0.563 | 0.747 | |
//! | `exp2` | 0.560 | 0.747 | 0.573 (the CPU's, measured in `cpu_codegen.rs`) |
//! | `log` | 0.524 | | 0.557 |
//! | `log2` | 0.537 | | 0.585 |
//! | `sin` | 0.647 | | 0.704 |
//! | `cos` | 0.705 | | 0.710 |
//!
//! - `ops`: the formats, shorthands for float/integer instructions and the error-free
//!   transformations;
//! - `exp`: f64 `exp` and `exp2` (Cody-Waite reduction to 2^k · e^r, degree-14
//!   polynomial);
//! - `log`: `log` and `log2` (x = 2^e · m, m in [√½, √2), log m = 2 atanh(s));
//! - `trig`: `sin` and `cos` (Cody-Waite with a three-part π/2 below 2^30 in f64, 2^17 in
//!   f32; the quadrant polynomials);
//! - `payne_hanek`: the reduction of larger |x| with a table of 2/π bits.

mod exp;
mod log;
mod ops;
mod payne_hanek;
mod trig;
