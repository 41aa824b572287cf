//! The on-disk object cache under `TRITIUM_CACHE_DIR` (default `~/.cache/tritium`), or the
//! directory a [`CompileOptions`](crate::cpu::CompileOptions) names.
//!
//! An entry is `<root>/cpu/<sha256 of the key>.tobj`:
//!
//! | bytes | field |
//! | --- | --- |
//! | 8 | magic `TRITOBJ2` |
//! | 64 | the key hash, hex (an entry copied under another name is rejected) |
//! | 8 | scratch bytes per thread, u64 LE |
//! | 8 | object length, u64 LE (trailing bytes are rejected) |
//! | 32 | SHA-256 of everything above and the object |
//! | n | the object file |
//!
//! The digest covers the header too: a flipped bit in the scratch size would otherwise give
//! a kernel a too-small scratch area. Writes go to a temporary file that is renamed into
//! place, so readers never see half an entry; an entry that fails any check is ignored and
//! recompiled (and then overwritten).

use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

const MAGIC: &[u8; 8] = b"TRITOBJ2";
const KEY_LEN: usize = 64;
const HEADER: usize = MAGIC.len() + KEY_LEN + 8 + 8;
const DIGEST: usize = 32;

/// A cached compiled kernel.
pub(crate) struct Entry {
    pub scratch_bytes: usize,
    pub object: Vec<u8>,
}

/// What a cache lookup found.
pub(crate) enum Lookup {
    /// A valid entry.
    Hit(Entry),
    /// No entry (or no cache directory).
    Missing,
    /// An entry that failed validation ([`check_entry`] says why).
    Corrupt,
}

/// The cache root directory from the environment: `TRITIUM_CACHE_DIR`, else
/// `~/.cache/tritium`.
pub fn default_root() -> Option<PathBuf> {
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

/// The file of the entry for `key` (a key hash, [`Compiled::key_hash`](super::Compiled))
/// under cache root `root`.
pub fn entry_path(root: &Path, key: &str) -> PathBuf {
    root.join("cpu").join(format!("{key}.tobj"))
}

/// Reads and validates the entry for `key` under `root`.
pub(crate) fn read(root: Option<&Path>, key: &str) -> Lookup {
    let Some(root) = root else {
        return Lookup::Missing;
    };
    match std::fs::read(entry_path(root, key)) {
        Ok(bytes) => match decode(&bytes, key) {
            Ok(e) => Lookup::Hit(e),
            Err(_) => Lookup::Corrupt,
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Lookup::Missing,
        Err(_) => Lookup::Corrupt,
    }
}

/// Checks the entry file for `key` under `root` the way a lookup does: `Err` says why it
/// would be rejected (missing, truncated, wrong key, digest mismatch, trailing bytes…).
pub fn check_entry(root: &Path, key: &str) -> Result<(), String> {
    let bytes = std::fs::read(entry_path(root, key)).map_err(|e| e.to_string())?;
    decode(&bytes, key).map(|_| ())
}

fn digest(header: &[u8], object: &[u8]) -> [u8; DIGEST] {
    let mut h = Sha256::new();
    h.update(header);
    h.update(object);
    h.finalize().into()
}

/// Parses an entry, rejecting anything that is not exactly what [`encode`] wrote for `key`.
pub(crate) fn decode(bytes: &[u8], key: &str) -> Result<Entry, String> {
    if bytes.len() < HEADER + DIGEST {
        return Err(format!("truncated: {} bytes", bytes.len()));
    }
    let (header, rest) = bytes.split_at(HEADER);
    if &header[..MAGIC.len()] != MAGIC {
        return Err("bad magic".into());
    }
    if &header[MAGIC.len()..MAGIC.len() + KEY_LEN] != key.as_bytes() {
        return Err("entry was written for another key".into());
    }
    let u64_at = |at: usize| {
        let mut b = [0u8; 8];
        b.copy_from_slice(&header[at..at + 8]);
        u64::from_le_bytes(b)
    };
    let scratch = u64_at(MAGIC.len() + KEY_LEN);
    let len = u64_at(MAGIC.len() + KEY_LEN + 8);
    let (sum, object) = rest.split_at(DIGEST);
    if object.len() as u64 != len {
        return Err(format!(
            "object is {} bytes, header says {len}",
            object.len()
        ));
    }
    if object.is_empty() {
        return Err("empty object".into());
    }
    if digest(header, object) != sum {
        return Err("digest mismatch".into());
    }
    let scratch_bytes =
        usize::try_from(scratch).map_err(|_| format!("scratch size {scratch} too large"))?;
    Ok(Entry {
        scratch_bytes,
        object: object.to_vec(),
    })
}

pub(crate) fn encode(key: &str, entry: &Entry) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER + DIGEST + entry.object.len());
    out.extend_from_slice(MAGIC);
    let mut k = key.as_bytes().to_vec();
    k.resize(KEY_LEN, b'?');
    out.extend_from_slice(&k);
    out.extend_from_slice(&(entry.scratch_bytes as u64).to_le_bytes());
    out.extend_from_slice(&(entry.object.len() as u64).to_le_bytes());
    let sum = digest(&out, &entry.object);
    out.extend_from_slice(&sum);
    out.extend_from_slice(&entry.object);
    out
}

/// Writes an entry atomically. Failures are not errors: the cache is an optimization.
pub(crate) fn write(root: Option<&Path>, key: &str, entry: &Entry) {
    let Some(root) = root else { return };
    let path = entry_path(root, key);
    let Some(parent) = path.parent() else { return };
    if std::fs::create_dir_all(parent).is_err() {
        return;
    }
    let tmp = parent.join(format!(
        ".{key}.{}.{:?}.tmp",
        std::process::id(),
        std::thread::current().id()
    ));
    if std::fs::write(&tmp, encode(key, entry)).is_ok() && std::fs::rename(&tmp, &path).is_ok() {
        return;
    }
    let _ = std::fs::remove_file(&tmp);
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    fn sample() -> Vec<u8> {
        encode(
            KEY,
            &Entry {
                scratch_bytes: 4096,
                object: b"\x7fELF pretend object".to_vec(),
            },
        )
    }

    #[test]
    fn round_trip() {
        let e = decode(&sample(), KEY).unwrap();
        assert_eq!(e.scratch_bytes, 4096);
        assert_eq!(e.object, b"\x7fELF pretend object");
    }

    /// Every kind of damage is rejected, wherever it lands (header fields included).
    #[test]
    fn damage_is_rejected() {
        let good = sample();
        let flip = |at: usize| {
            let mut b = good.clone();
            b[at] ^= 0x10;
            b
        };
        let other_key = KEY.replace('0', "f");
        let cases: Vec<(&str, Vec<u8>, &str)> = vec![
            ("empty", vec![], KEY),
            ("truncated header", good[..40].to_vec(), KEY),
            ("truncated object", good[..good.len() - 3].to_vec(), KEY),
            ("trailing bytes", [good.clone(), vec![0]].concat(), KEY),
            ("magic", flip(0), KEY),
            ("key byte", flip(MAGIC.len() + 5), KEY),
            ("scratch size", flip(MAGIC.len() + KEY_LEN + 1), KEY),
            ("length", flip(MAGIC.len() + KEY_LEN + 8), KEY),
            ("digest", flip(HEADER + 3), KEY),
            ("object", flip(good.len() - 1), KEY),
            ("looked up under another key", good.clone(), &other_key),
        ];
        for (what, bytes, key) in cases {
            assert!(decode(&bytes, key).is_err(), "{what} was accepted");
        }
    }
}
