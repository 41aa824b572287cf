//! f64 `exp`, `exp2`, `log`, `log2`, `sin` and `cos` built from basic arithmetic (FMA,
//! bitcasts, integer ops, selects), for targets without a libm: NVPTX has no libm to call
//! and Tritium ships no libdevice, so the CUDA generator emits these, and the CUDA emulator
//! runs the very same IR on the host. (The CPU backend keeps its libm intrinsics.)
//!
//! Every function reduces its argument exactly or in double-double (an FMA gives the exact
//! error of a product, TwoSum that of a sum) and evaluates a Taylor (or, for `log`, atanh)
//! series with enough terms that truncation is below 2^-60 relative; the last step adds a
//! small double-double tail to a leading term, so one rounding dominates the error. The
//! coefficients are the correctly rounded `1/n!` and `1/(2n+1)`, computed here in f64.
//! `backend/tests/math_f64.rs` measures the emitted code against the host libm and
//! high-precision reference values.
//!
//! Largest errors against the exact value measured on 240,000 inputs spread over every
//! range (mpmath; each function's inputs as in the test) plus the test's hard cases:
//!
//! | function | ulp | subnormal results (steps) |
//! | --- | --- | --- |
//! | `exp` | 0.563 | 0.747 |
//! | `exp2` | 0.560 | 0.747 |
//! | `log` | 0.524 | |
//! | `log2` | 0.537 | |
//! | `sin` | 0.647 | |
//! | `cos` | 0.705 | |
//!
//! - `ops`: shorthands for f64/i64 instructions and the error-free transformations;
//! - `exp`: `exp` and `exp2` (Cody-Waite reduction to 2^k · e^r, degree-14 polynomial);
//! - `log`: `log` and `log2` (x = 2^e · m, m in [√½, √2), log m = 2 atanh(s));
//! - `trig`: `sin` and `cos` (Cody-Waite with a three-part π/2 below 2^30, the quadrant
//!   polynomials);
//! - `payne_hanek`: the reduction of |x| ≥ 2^30 with a table of 2/π bits.

mod exp;
mod log;
mod ops;
mod payne_hanek;
mod trig;
