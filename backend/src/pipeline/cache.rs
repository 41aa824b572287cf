//! The on-disk cache of compiled kernels under `TRITIUM_CACHE_DIR` (default
//! `~/.cache/tritium`), or the directory a [`CompileOptions`](super::CompileOptions)
//! names, shared by every target: each keeps its entries in its own [`Store`],
//! `<root>/<store>/<sha256 of the key>.tobj`. AOT operators keep their libraries under
//! `<root>/aot/` with the same root, digests and atomic writes ([`default_root`],
//! [`hex`], [`write_atomic`]). An entry:
//!
//! | bytes | field |
//! | --- | --- |
//! | 8 | magic `TRITOBJ2` |
//! | 64 | the key hash, hex (an entry copied under another name is rejected) |
//! | 8 | `meta`, u64 LE (PTX's shared-memory bytes; the CPU's scratch bytes, which its loader takes from the object instead) |
//! | 8 | length of `bytes`, u64 LE (trailing bytes are rejected) |
//! | 32 | SHA-256 of everything above and `bytes` |
//! | n | `bytes`: the object file, or the PTX text |
//!
//! The digest covers the header too. It is not a secret, so a forger can re-digest an
//! entry: what memory the code needs therefore comes from the code (a CPU object declares
//! its scratch bytes as a constant the loader reads), never from `meta` alone. Writes go
//! to a temporary file that is renamed into place, so readers never see half an entry; an
//! entry that fails any check is ignored and
//! recompiled (and then overwritten).

use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

const MAGIC: &[u8; 8] = b"TRITOBJ2";
const KEY_LEN: usize = 64;
const HEADER: usize = MAGIC.len() + KEY_LEN + 8 + 8;
const DIGEST: usize = 32;

/// Where a target keeps its entries under the cache root.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Store {
    /// Host object files (`<root>/cpu/`).
    Cpu,
    /// PTX text (`<root>/ptx/`).
    Ptx,
}

impl Store {
    fn dir(self) -> &'static str {
        match self {
            Store::Cpu => "cpu",
            Store::Ptx => "ptx",
        }
    }
}

/// A cached compiled kernel.
pub(crate) struct Entry {
    /// A number the target needs besides the bytes (scratch or shared-memory bytes).
    pub meta: usize,
    /// The compiled kernel.
    pub bytes: Vec<u8>,
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

/// Lower-case hex of `bytes` (digests in cache names).
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A temporary sibling of `dest`, unique to this process and call: what
/// [`write_atomic`] (and a compiler writing its output) writes before renaming.
pub fn temp_path(dest: &Path) -> PathBuf {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let name = dest
        .file_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    dest.with_file_name(format!(".{name}.tmp.{}.{n}", std::process::id()))
}

/// Writes `bytes` to `dest` through a [`temp_path`] renamed into place (creating the
/// directory), so that readers in any process see the old file or the whole new one,
/// never a part. The temporary file is removed when a step fails.
pub fn write_atomic(dest: &Path, bytes: &[u8]) -> std::io::Result<()> {
    if let Some(dir) = dest.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let tmp = temp_path(dest);
    let written = std::fs::write(&tmp, bytes).and_then(|()| std::fs::rename(&tmp, dest));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

/// The file of the CPU entry for `key` (a key hash,
/// [`Compiled::key_hash`](crate::cpu::Compiled)) under cache root `root`.
pub fn entry_path(root: &Path, key: &str) -> PathBuf {
    entry_path_in(root, Store::Cpu, key)
}

/// The file of the entry for `key` in `store` under cache root `root`.
pub fn entry_path_in(root: &Path, store: Store, key: &str) -> PathBuf {
    root.join(store.dir()).join(format!("{key}.tobj"))
}

/// The largest `meta` an entry may carry: a CPU kernel's scratch bytes per thread and a
/// CUDA kernel's shared-memory bytes are both far below it, so a larger one (forged, or a
/// flipped bit behind a recomputed digest) is rejected before a launch allocates it.
pub const MAX_META: usize = 1 << 30;

/// Reads and validates the entry for `key` in `store` under `root`. Only a regular file
/// is read: a FIFO, a device or a socket under an entry's name is rejected unopened (it
/// could block the launch forever).
pub(crate) fn read(root: Option<&Path>, store: Store, key: &str) -> Lookup {
    let Some(root) = root else {
        return Lookup::Missing;
    };
    match read_regular(&entry_path_in(root, store, key)) {
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
    let bytes = read_regular(&entry_path(root, key)).map_err(|e| e.to_string())?;
    decode(&bytes, key).map(|_| ())
}

/// The bytes of `path` if it is a regular file (following symlinks); anything else is an
/// `InvalidData` error, never opened.
fn read_regular(path: &Path) -> std::io::Result<Vec<u8>> {
    if !std::fs::metadata(path)?.is_file() {
        let what = format!("{} is not a regular file", path.display());
        return Err(std::io::Error::new(std::io::ErrorKind::InvalidData, what));
    }
    std::fs::read(path)
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
    let meta = u64_at(MAGIC.len() + KEY_LEN);
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
    let meta = usize::try_from(meta)
        .ok()
        .filter(|m| *m <= MAX_META)
        .ok_or_else(|| format!("meta {meta} is over the limit of {MAX_META}"))?;
    Ok(Entry {
        meta,
        bytes: object.to_vec(),
    })
}

pub(crate) fn encode(key: &str, entry: &Entry) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER + DIGEST + entry.bytes.len());
    out.extend_from_slice(MAGIC);
    let mut k = key.as_bytes().to_vec();
    k.resize(KEY_LEN, b'?');
    out.extend_from_slice(&k);
    out.extend_from_slice(&(entry.meta as u64).to_le_bytes());
    out.extend_from_slice(&(entry.bytes.len() as u64).to_le_bytes());
    let sum = digest(&out, &entry.bytes);
    out.extend_from_slice(&sum);
    out.extend_from_slice(&entry.bytes);
    out
}

/// Writes an entry atomically. Failures are not errors: the cache is an optimization.
pub(crate) fn write(root: Option<&Path>, store: Store, key: &str, entry: &Entry) {
    if let Some(root) = root {
        let _ = write_atomic(&entry_path_in(root, store, key), &encode(key, entry));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    fn sample() -> Vec<u8> {
        encode(
            KEY,
            &Entry {
                meta: 4096,
                bytes: b"\x7fELF pretend object".to_vec(),
            },
        )
    }

    #[test]
    fn round_trip() {
        let e = decode(&sample(), KEY).unwrap();
        assert_eq!(e.meta, 4096);
        assert_eq!(e.bytes, b"\x7fELF pretend object");
    }

    /// Each target reads only its own store: PTX under `ptx/` is never taken for a CPU
    /// object with the same key, nor the reverse.
    #[test]
    fn stores_are_separate() {
        let root =
            std::env::temp_dir().join(format!("tritium-cache-stores-{}", std::process::id()));
        let entry = Entry {
            meta: 7,
            bytes: b".version 8.0".to_vec(),
        };
        write(Some(&root), Store::Ptx, KEY, &entry);
        let hit = |store| matches!(read(Some(&root), store, KEY), Lookup::Hit(e) if e.meta == 7);
        let (ptx, cpu) = (hit(Store::Ptx), hit(Store::Cpu));
        let path = entry_path_in(&root, Store::Ptx, KEY);
        let _ = std::fs::remove_dir_all(&root);
        assert!(ptx && !cpu, "ptx hit {ptx}, cpu hit {cpu}");
        assert!(path.ends_with(format!("ptx/{KEY}.tobj")), "{path:?}");
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
            ("meta", flip(MAGIC.len() + KEY_LEN + 1), KEY),
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
