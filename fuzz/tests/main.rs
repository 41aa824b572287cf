//! The fuzzer's one integration-test binary (LLVM links once).

mod cases;
mod cli;
mod differential;
mod generator;
mod mutate;
mod out_of_bounds;
mod pool;
mod shrinking;
