//! The fuzzer's one integration-test binary (LLVM links once).

mod cases;
mod cli;
mod differential;
mod generator;
mod mutate;
mod pool;
mod shrinking;
