//! `TRITIUM_AOT_WHITELIST`: the directories AOT libraries may be loaded from.
//!
//! Unlike MindSpore's substring test, a library is allowed when its canonical path lies inside
//! a listed directory's canonical path, compared component by component (`/opt/ok` allows
//! `/opt/ok/lib.so`, not `/opt/ok-evil/lib.so`). The runtime's own cache is always allowed.

use std::path::{Path, PathBuf};

use super::error::{AotError, AotResult};

/// Where libraries may be loaded from.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Whitelist {
    /// The directories as configured.
    pub dirs: Vec<PathBuf>,
}

impl Whitelist {
    /// The whitelist from `TRITIUM_AOT_WHITELIST` (paths separated by `:`), or `None` when
    /// the variable is unset or empty (everything allowed).
    pub fn from_env() -> Option<Whitelist> {
        let v = std::env::var_os("TRITIUM_AOT_WHITELIST")?;
        if v.is_empty() {
            return None;
        }
        Some(Whitelist {
            dirs: std::env::split_paths(&v)
                .filter(|p| !p.as_os_str().is_empty())
                .collect(),
        })
    }

    /// A whitelist of these directories.
    pub fn new(dirs: impl IntoIterator<Item = impl Into<PathBuf>>) -> Whitelist {
        Whitelist {
            dirs: dirs.into_iter().map(Into::into).collect(),
        }
    }

    /// Checks that `library` may be loaded; `cache_dir` is always allowed.
    pub fn check(&self, library: &Path, cache_dir: &Path) -> AotResult<()> {
        let lib = std::fs::canonicalize(library).map_err(|e| AotError::LoadFailed {
            library: library.to_path_buf(),
            message: e.to_string(),
        })?;
        let allowed = std::iter::once(cache_dir)
            .chain(self.dirs.iter().map(PathBuf::as_path))
            .filter_map(|d| std::fs::canonicalize(d).ok())
            .any(|d| lib.starts_with(&d));
        if allowed {
            Ok(())
        } else {
            Err(AotError::NotWhitelisted {
                library: lib,
                whitelist: self.dirs.clone(),
                cache_dir: cache_dir.to_path_buf(),
            })
        }
    }
}
