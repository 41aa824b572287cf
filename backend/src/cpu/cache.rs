//! The on-disk object cache under `TRITIUM_CACHE_DIR` (default `~/.cache/tritium`).
//!
//! An entry is `cpu/<sha256 of the key>.tobj`: magic `TRITOBJ1`, scratch size (u64 LE),
//! SHA-256 of the object, then the object. Writes go to a temporary file that is renamed
//! into place, so readers never see half an entry; an entry that fails any check is
//! ignored and recompiled.

use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

const MAGIC: &[u8; 8] = b"TRITOBJ1";

/// A cached compiled kernel.
pub(crate) struct Entry {
    pub scratch_bytes: usize,
    pub object: Vec<u8>,
}

/// The cache root directory.
pub(crate) fn cache_dir() -> Option<PathBuf> {
    if let Some(d) = std::env::var_os("TRITIUM_CACHE_DIR").filter(|d| !d.is_empty()) {
        return Some(PathBuf::from(d));
    }
    std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache").join("tritium"))
}

/// Hex SHA-256 of the parts, separated so that no two part lists collide.
pub(crate) fn hash_key(parts: &[&str]) -> String {
    let mut h = Sha256::new();
    for p in parts {
        h.update((p.len() as u64).to_le_bytes());
        h.update(p.as_bytes());
    }
    hex(&h.finalize())
}

/// SHA-256 of raw bytes (linked bitcode), hex.
pub(crate) fn hash_bytes(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn entry_path(dir: &Path, key: &str) -> PathBuf {
    dir.join("cpu").join(format!("{key}.tobj"))
}

/// Reads and validates an entry; `None` when absent or corrupt.
pub(crate) fn read(key: &str) -> Option<Entry> {
    let bytes = std::fs::read(entry_path(&cache_dir()?, key)).ok()?;
    decode(&bytes)
}

pub(crate) fn decode(bytes: &[u8]) -> Option<Entry> {
    let rest = bytes.strip_prefix(MAGIC.as_slice())?;
    if rest.len() < 8 + 32 {
        return None;
    }
    let scratch_bytes = u64::from_le_bytes(rest[..8].try_into().ok()?) as usize;
    let (digest, object) = rest[8..].split_at(32);
    if Sha256::digest(object).as_slice() != digest || object.is_empty() {
        return None;
    }
    Some(Entry {
        scratch_bytes,
        object: object.to_vec(),
    })
}

pub(crate) fn encode(entry: &Entry) -> Vec<u8> {
    let mut out = Vec::with_capacity(entry.object.len() + 48);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&(entry.scratch_bytes as u64).to_le_bytes());
    out.extend_from_slice(&Sha256::digest(&entry.object));
    out.extend_from_slice(&entry.object);
    out
}

/// Writes an entry atomically. Failures are not errors: the cache is an optimization.
pub(crate) fn write(key: &str, entry: &Entry) {
    let Some(dir) = cache_dir() else { return };
    let path = entry_path(&dir, key);
    let Some(parent) = path.parent() else { return };
    if std::fs::create_dir_all(parent).is_err() {
        return;
    }
    let tmp = parent.join(format!(
        ".{key}.{}.{:?}.tmp",
        std::process::id(),
        std::thread::current().id()
    ));
    if std::fs::write(&tmp, encode(entry)).is_ok() && std::fs::rename(&tmp, &path).is_ok() {
        return;
    }
    let _ = std::fs::remove_file(&tmp);
}

/// The path of an entry (for tests that corrupt it on purpose).
pub fn entry_file(key: &str) -> Option<PathBuf> {
    cache_dir().map(|d| entry_path(&d, key))
}
