//! Loading user libraries (after the whitelist check) and resolving their symbols.

use std::ffi::c_void;
use std::path::{Path, PathBuf};

use super::abi::RawFn;
use super::error::{AotError, AotResult};
use super::whitelist::Whitelist;

/// A loaded shared library. Operator instances hold it (through `Arc`) so code and vtables
/// stay mapped until the last kernel data is destroyed.
pub(crate) struct Library {
    path: PathBuf,
    lib: libloading::Library,
}

impl Library {
    /// Loads `path` with `RTLD_NOW | RTLD_LOCAL` (unresolved symbols fail here, not mid-call),
    /// after checking `whitelist` (`cache_dir` always allowed).
    pub fn open(
        path: &Path,
        whitelist: Option<&Whitelist>,
        cache_dir: &Path,
    ) -> AotResult<Library> {
        if !path.exists() {
            return Err(AotError::LoadFailed {
                library: path.to_path_buf(),
                message: "no such file".to_string(),
            });
        }
        if let Some(w) = whitelist {
            w.check(path, cache_dir)?;
        }
        let canonical = std::fs::canonicalize(path).map_err(|e| AotError::io(path, e))?;
        // SAFETY: loading runs the library's initializers; the whitelist is the guard against
        // untrusted code, as in MindSpore.
        let lib = unsafe {
            libloading::os::unix::Library::open(
                Some(&canonical),
                libloading::os::unix::RTLD_NOW | libloading::os::unix::RTLD_LOCAL,
            )
        }
        .map_err(|e| AotError::LoadFailed {
            library: canonical.clone(),
            message: e.to_string(),
        })?;
        Ok(Library {
            path: canonical,
            lib: lib.into(),
        })
    }

    /// The canonical path it was loaded from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The address of `name`, or `None` when the library does not export it.
    pub fn optional(&self, name: &str) -> Option<RawFn> {
        // SAFETY: only the address is taken; calls go through typed trampolines.
        let sym = unsafe { self.lib.get::<*const c_void>(name.as_bytes()) }.ok()?;
        let p: *const c_void = *sym;
        (!p.is_null()).then_some(RawFn(p))
    }

    /// The address of `name`, or an error naming the library and the symbol.
    pub fn symbol(&self, name: &str) -> AotResult<RawFn> {
        self.optional(name).ok_or_else(|| AotError::MissingSymbol {
            library: self.path.clone(),
            symbol: name.to_string(),
        })
    }
}
