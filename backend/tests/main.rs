//! The backend's one integration-test binary (LLVM links once).
mod aot;
mod compile_pipeline;
mod cpu;
mod interp;
