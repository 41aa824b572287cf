//! Tritium's end-to-end tests: every kernel in `tritium-kernels` on the compiled CPU
//! backend, against the reference interpreter and a plain ndarray computation.
//! One test binary (LLVM links once); one module per topic.

mod atomics_triton;
mod autotuning;
mod block_pointers;
mod bounds_proofs;
mod cache_hints;
mod checked;
mod common;
mod cuda;
mod custom_in_place;
mod custom_ops;
mod device_assert;
mod device_print;
mod dot_edges;
mod fp8;
mod hints;
mod inline_asm;
mod kernels_attention;
mod kernels_elementwise;
mod kernels_matmul;
mod kernels_misc;
mod kernels_norm;
mod launch_errors;
mod libm;
mod loop_options;
mod math_functions;
mod mma_layouts;
mod partial_blocks;
mod pointer_tables;
mod porting;
mod race_check;
mod random;
mod reductions;
mod scans;
mod shape_functions;
mod sound_launches;
mod testing_helpers;
mod triton_core;
mod wgmma;
