//! What every target's compile shares (issue 11's first slice: the shared pieces moved out
//! of `cpu/`, where CUDA, the emulator and the interpreter used to reach for them):
//!
//! - `cache`: the on-disk cache of compiled objects and PTX (`<root>/<target>/…`);
//! - `link`: linking user and builtin custom-op bitcode into a kernel module;
//! - `jit`: loading objects into the process (one ORC LLJIT);
//! - `host`: the host target machine (the CPU backend and the CUDA emulator);
//! - `dump`: kernel symbols and dump files;
//! - `version`: the versions of generated code in every cache key;
//! - `once`: each kernel compiled at most once per process (one slot per key).

pub mod cache;
pub(crate) mod dump;
pub(crate) mod host;
pub(crate) mod jit;
pub(crate) mod link;
pub(crate) mod once;
pub(crate) mod version;
