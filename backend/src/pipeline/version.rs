//! The versions of generated code, part of every disk-cache key: the crate version, LLVM's,
//! and a hash of every backend source file (`build.rs`), so that any change to the code
//! generators or the pass pipeline makes new keys. (Versions bumped by hand were forgotten:
//! tests then passed on stale cached objects until the cache was emptied.)

/// Host objects (the CPU backend).
pub(crate) const CPU: &str = concat!(
    "tritium-",
    env!("CARGO_PKG_VERSION"),
    "-llvm19-cpu-",
    env!("TRITIUM_BACKEND_SOURCE_HASH")
);

/// PTX (the CUDA backend).
pub(crate) const NVPTX: &str = concat!(
    "tritium-",
    env!("CARGO_PKG_VERSION"),
    "-llvm19-nvptx-",
    env!("TRITIUM_BACKEND_SOURCE_HASH")
);
