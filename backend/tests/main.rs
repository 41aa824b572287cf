//! The backend's one integration-test binary (LLVM links once).
mod checked;
mod common;
mod compile_pipeline;
mod cpu;
mod cpu_codegen;
mod cuda;
mod interp;
mod math;
