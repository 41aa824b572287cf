//! Kernel symbols and dump files (`TRITIUM_DUMP`), named alike on every target.

use std::path::Path;

/// `tritium_<name>_<16 hex digits of the key>`: the kernel's name made a C identifier,
/// and the key so that two specializations never share a symbol.
pub(crate) fn symbol(name: &str, key_hash: &str) -> String {
    let name: String = name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    format!("tritium_{name}_{}", &key_hash[..16])
}

/// Writes `<dir>/<symbol>.<ext>`. Dumps are a debugging aid: one that cannot be written is
/// skipped rather than failing the compile.
pub(crate) fn write(dir: &Path, symbol: &str, ext: &str, bytes: &[u8]) {
    let _ = std::fs::create_dir_all(dir);
    let _ = std::fs::write(dir.join(format!("{symbol}.{ext}")), bytes);
}

/// The dumps of one compile: `<dir>/<symbol>.<ext>` when a dump directory is set.
pub(crate) struct Dumps<'a> {
    dir: Option<std::path::PathBuf>,
    symbol: &'a str,
}

impl<'a> Dumps<'a> {
    /// Dumps into `dir` (none when `None`) under `symbol`.
    pub(crate) fn new(dir: Option<std::path::PathBuf>, symbol: &'a str) -> Self {
        Dumps { dir, symbol }
    }

    /// Whether anything is written.
    pub(crate) fn enabled(&self) -> bool {
        self.dir.is_some()
    }

    /// Writes the `ext` dump.
    pub(crate) fn write(&self, ext: &str, bytes: &[u8]) {
        if let Some(d) = &self.dir {
            write(d, self.symbol, ext, bytes);
        }
    }

    /// Writes the `ext` dump, computing it only when dumping.
    pub(crate) fn write_with(&self, ext: &str, bytes: impl FnOnce() -> Vec<u8>) {
        if self.enabled() {
            self.write(ext, &bytes());
        }
    }
}
