//! The fuzzer's one integration-test binary (LLVM links once).

mod mutate;
