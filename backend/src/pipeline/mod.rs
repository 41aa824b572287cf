//! What every target's compile shares. One `compile::compile` serves the host
//! CPU, NVPTX and the CUDA emulator through the `target::Target` trait:
//!
//! - `target`: what differs between targets (key, machine, generate, passes, emit, decode);
//! - `compile`: the one compile (key → dumps → disk cache → LLVM → cache → decode → stats);
//! - `stats`: compile counters per target and kernel;
//! - `cache`: the on-disk cache of compiled objects and PTX (`<root>/<target>/…`);
//! - `link`: linking user and builtin custom-op bitcode into a kernel module;
//! - `signature`: custom calls checked against the C++ signature records of `tritium-build`;
//! - `jit`: loading objects into the process (one ORC LLJIT);
//! - `perf_map`: `/tmp/perf-<pid>.map` entries naming loaded kernels for `perf` (`TRITIUM_PERF_MAP`);
//! - `host`: the host target machine (the CPU backend and the CUDA emulator);
//! - `dump`: kernel symbols and dump files;
//! - `version`: the versions of generated code in every cache key;
//! - `once`: each kernel compiled at most once per process (one slot per key);
//! - `options`: LLVM's process-wide flags (the SLP vectorizer is off).

pub mod cache;
pub(crate) mod compile;
pub(crate) mod dump;
pub(crate) mod host;
pub(crate) mod jit;
pub(crate) mod link;
pub(crate) mod once;
pub(crate) mod options;
pub(crate) mod perf_map;
pub(crate) mod signature;
pub(crate) mod stats;
pub(crate) mod target;
pub(crate) mod version;

pub use stats::{stats, CompileStats, PhaseTimes, Stats};
pub use target::TargetKind;

use std::path::PathBuf;

/// What changes how a kernel is compiled, besides its IR. `None` directories take their
/// value from the environment when the kernel is compiled.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct CompileOptions {
    /// Checked mode: every memory access is compared with the argument buffers.
    pub bounds_check: bool,
    /// Outside checked mode, the accesses that are (a launch's default: those its bounds
    /// proof does not cover).
    pub sites: crate::launch::SiteChecks,
    /// Race detection: every access that passed its bounds check is reported to the
    /// launch's recorder (`launch::race`); needs `bounds_check`.
    pub race_check: bool,
    /// Root of the on-disk cache (`TRITIUM_CACHE_DIR`, else `~/.cache/tritium`).
    pub cache_dir: Option<PathBuf>,
    /// Dump directory (`TRITIUM_DUMP`; unset: no dumps). Dumping always runs LLVM, so
    /// that the `.ll`, `.opt.ll` and `.s` files exist; the object is still cached.
    pub dump_dir: Option<PathBuf>,
}

impl CompileOptions {
    pub(crate) fn cache_root(&self) -> Option<PathBuf> {
        self.cache_dir.clone().or_else(cache::default_root)
    }

    pub(crate) fn dump_root(&self) -> Option<PathBuf> {
        self.dump_dir.clone().or_else(|| {
            std::env::var_os("TRITIUM_DUMP")
                .filter(|d| !d.is_empty())
                .map(PathBuf::from)
        })
    }
}
