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
