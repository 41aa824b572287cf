//! The versions of generated code, part of every disk-cache key. Bump a target's version
//! whenever what it generates changes meaning: a cached entry of the old code would
//! otherwise stand in for the new (tests pass on stale objects until the cache is empty).

/// Host objects (the CPU backend).
pub(crate) const CPU: &str = concat!(
    "tritium-",
    env!("CARGO_PKG_VERSION"),
    "-llvm19-cg20-no-slp-lv16"
);

/// PTX (the CUDA backend).
pub(crate) const NVPTX: &str = concat!(
    "tritium-",
    env!("CARGO_PKG_VERSION"),
    "-llvm19-nvptx16-no-slp-lv16"
);
