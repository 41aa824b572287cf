//! The backend's one integration-test binary (LLVM links once).
mod aot;
mod cpu;
mod interp;
