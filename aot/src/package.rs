//! Portable packages in GE's serialized-binary format, and an operator's package.
//!
//! Format (all integers little-endian `u32`): `[magic 0x56415231][version 2][count]`, then per
//! entry `[key_len][key][val_len][val]`, then the SHA-256 of every byte before it. Decoding
//! checks the digest first, so a package damaged in any byte (library, shapes, attributes,
//! lengths) is refused before anything in it is read, written or loaded; then it rejects a
//! bad magic or version, truncation, duplicate keys, non-UTF-8 keys and trailing bytes.
//! Version 1 packages (without the digest) are refused: rebuild them with `to_package`.
//!
//! An operator's package holds its compiled library and everything of its definition that is
//! data (symbol, attributes, fixed shapes and dtypes, flags), so it loads back on a machine
//! without a compiler. Closures (shape/dtype inference, Rust backwards) are code, not data:
//! attach them again to the builder [`AotOpBuilder::from_package`] returns.

use sha2::{Digest, Sha256};

use super::attrs::Attrs;
use super::compile::{hex, write_atomic};
use super::dtype::{DType, MindSporeDType};
use super::error::{AotError, AotResult};
use super::operator::{AotOp, AotOpBuilder, AotOptions, Target};

/// The package magic, `"1RAV"` as little-endian bytes.
pub const PACKAGE_MAGIC: u32 = 0x5641_5231;
/// The package format version (2: with the SHA-256 of the content).
pub const PACKAGE_VERSION: u32 = 2;

/// Bytes of the trailing digest.
const DIGEST_BYTES: usize = 32;

/// An ordered set of uniquely keyed binary entries.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Package {
    entries: Vec<(String, Vec<u8>)>,
}

impl Package {
    /// An empty package.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds an entry; a key that is already present is an error.
    pub fn insert(&mut self, key: impl Into<String>, value: impl Into<Vec<u8>>) -> AotResult<()> {
        let key = key.into();
        if self.get(&key).is_some() {
            return Err(AotError::Package(format!("duplicate key `{key}`")));
        }
        self.entries.push((key, value.into()));
        Ok(())
    }

    /// The value of `key`.
    pub fn get(&self, key: &str) -> Option<&[u8]> {
        self.entries
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_slice())
    }

    /// The entries in order.
    pub fn entries(&self) -> &[(String, Vec<u8>)] {
        &self.entries
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when there are no entries.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The serialized bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend_from_slice(&PACKAGE_MAGIC.to_le_bytes());
        out.extend_from_slice(&PACKAGE_VERSION.to_le_bytes());
        out.extend_from_slice(&(self.entries.len() as u32).to_le_bytes());
        for (k, v) in &self.entries {
            out.extend_from_slice(&(k.len() as u32).to_le_bytes());
            out.extend_from_slice(k.as_bytes());
            out.extend_from_slice(&(v.len() as u32).to_le_bytes());
            out.extend_from_slice(v);
        }
        let digest = Sha256::digest(&out);
        out.extend_from_slice(&digest);
        out
    }

    /// Parses serialized bytes, rejecting anything malformed with the reason and offset.
    pub fn decode(bytes: &[u8]) -> AotResult<Package> {
        if bytes.len() < 12 + DIGEST_BYTES {
            return Err(AotError::Package(format!(
                "truncated: {} bytes, a package has at least {}",
                bytes.len(),
                12 + DIGEST_BYTES
            )));
        }
        let (bytes, digest) = bytes.split_at(bytes.len() - DIGEST_BYTES);
        if bytes[4..8] == 1u32.to_le_bytes() && bytes[..4] == PACKAGE_MAGIC.to_le_bytes() {
            return Err(AotError::Package(
                "a version 1 package carries no checksum; rebuild it with to_package".into(),
            ));
        }
        if Sha256::digest(bytes).as_slice() != digest {
            return Err(AotError::Package(
                "damaged: the SHA-256 of its content does not match the one it carries".into(),
            ));
        }
        let mut pos = 0usize;
        let u32_at = |what: &str, pos: &mut usize| -> AotResult<u32> {
            let end = *pos + 4;
            let b = bytes.get(*pos..end).ok_or_else(|| {
                AotError::Package(format!(
                    "truncated: {what} at byte {} needs 4 bytes, {} left",
                    *pos,
                    bytes.len().saturating_sub(*pos)
                ))
            })?;
            *pos = end;
            Ok(u32::from_le_bytes(b.try_into().unwrap()))
        };
        let magic = u32_at("magic", &mut pos)?;
        if magic != PACKAGE_MAGIC {
            return Err(AotError::Package(format!(
                "bad magic {magic:#010x} (expected {PACKAGE_MAGIC:#010x})"
            )));
        }
        let version = u32_at("version", &mut pos)?;
        if version != PACKAGE_VERSION {
            return Err(AotError::Package(format!(
                "unsupported version {version} (this runtime reads version {PACKAGE_VERSION})"
            )));
        }
        let count = u32_at("entry count", &mut pos)?;
        let mut pkg = Package::new();
        let take = |len: usize, what: &str, pos: &mut usize| -> AotResult<Vec<u8>> {
            let end = pos
                .checked_add(len)
                .filter(|&e| e <= bytes.len())
                .ok_or_else(|| {
                    AotError::Package(format!(
                        "truncated: {what} at byte {} declares {len} bytes, {} left",
                        *pos,
                        bytes.len().saturating_sub(*pos)
                    ))
                })?;
            let v = bytes[*pos..end].to_vec();
            *pos = end;
            Ok(v)
        };
        for n in 0..count {
            let klen = u32_at(&format!("key length of entry {n}"), &mut pos)? as usize;
            let key = take(klen, &format!("key of entry {n}"), &mut pos)?;
            let key = String::from_utf8(key)
                .map_err(|_| AotError::Package(format!("key of entry {n} is not UTF-8")))?;
            let vlen = u32_at(&format!("value length of `{key}`"), &mut pos)? as usize;
            let val = take(vlen, &format!("value of `{key}`"), &mut pos)?;
            pkg.insert(key, val)?;
        }
        if pos != bytes.len() {
            return Err(AotError::Package(format!(
                "{} trailing bytes after {count} entries",
                bytes.len() - pos
            )));
        }
        Ok(pkg)
    }
}

const K_SYMBOL: &str = "tritium.aot.symbol";
const K_TARGET: &str = "tritium.aot.target";
const K_HOST: &str = "tritium.aot.host";
const K_LIBRARY: &str = "tritium.aot.library";
const K_LIBRARY_NAME: &str = "tritium.aot.library_name";
const K_ATTRS: &str = "tritium.aot.attrs";
const K_OUT_SHAPES: &str = "tritium.aot.out_shapes";
const K_OUT_DTYPES: &str = "tritium.aot.out_dtypes";
const K_NUM_INPUTS: &str = "tritium.aot.num_inputs";
const K_NUM_OUTPUTS: &str = "tritium.aot.num_outputs";
const K_TUPLE: &str = "tritium.aot.tuple_infer";
const K_DATA_DEP: &str = "tritium.aot.data_dependent";

fn host() -> String {
    format!("{}-{}", std::env::consts::ARCH, std::env::consts::OS)
}

fn nested(entries: Vec<(String, Vec<u8>)>) -> AotResult<Vec<u8>> {
    let mut p = Package::new();
    for (k, v) in entries {
        p.insert(k, v)?;
    }
    Ok(p.encode())
}

fn opt_u32(v: Option<usize>) -> Vec<u8> {
    match v {
        Some(n) => (n as u32).to_le_bytes().to_vec(),
        None => Vec::new(),
    }
}

fn read_opt_u32(pkg: &Package, key: &str) -> AotResult<Option<usize>> {
    match pkg.get(key) {
        None | Some([]) => Ok(None),
        Some(b) if b.len() == 4 => Ok(Some(u32::from_le_bytes(b.try_into().unwrap()) as usize)),
        Some(b) => Err(AotError::Package(format!(
            "`{key}` has {} bytes, expected 4",
            b.len()
        ))),
    }
}

fn read_flag(pkg: &Package, key: &str) -> AotResult<bool> {
    match pkg.get(key) {
        None => Ok(false),
        Some([b]) => Ok(*b != 0),
        Some(b) => Err(AotError::Package(format!(
            "`{key}` has {} bytes, expected 1",
            b.len()
        ))),
    }
}

fn required<'p>(pkg: &'p Package, key: &str) -> AotResult<&'p [u8]> {
    pkg.get(key)
        .ok_or_else(|| AotError::Package(format!("missing entry `{key}`")))
}

fn utf8(pkg: &Package, key: &str) -> AotResult<String> {
    String::from_utf8(required(pkg, key)?.to_vec())
        .map_err(|_| AotError::Package(format!("`{key}` is not UTF-8")))
}

impl AotOp {
    /// Serializes the operator's compiled library and data definition into a portable package.
    pub fn to_package(&self) -> AotResult<Vec<u8>> {
        let lib_path = self.library_path();
        let lib = std::fs::read(lib_path).map_err(|e| AotError::io(lib_path, e))?;
        let mut p = Package::new();
        p.insert(K_SYMBOL, self.symbol().as_bytes())?;
        let target: &[u8] = match self.target() {
            Target::Cpu => b"cpu",
            Target::Cuda => b"cuda",
        };
        p.insert(K_TARGET, target)?;
        p.insert(K_HOST, host().into_bytes())?;
        let name = lib_path
            .file_name()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| "kernel.so".to_string());
        p.insert(K_LIBRARY_NAME, name.into_bytes())?;
        p.insert(K_LIBRARY, lib)?;
        p.insert(K_ATTRS, nested(self.attrs().encode())?)?;
        if let Some(shapes) = self.fixed_shapes() {
            let entries = shapes
                .iter()
                .enumerate()
                .map(|(k, s)| {
                    (
                        k.to_string(),
                        s.iter().flat_map(|d| d.to_le_bytes()).collect(),
                    )
                })
                .collect();
            p.insert(K_OUT_SHAPES, nested(entries)?)?;
        }
        if let Some(dtypes) = self.fixed_dtypes() {
            let entries = dtypes
                .iter()
                .enumerate()
                .map(|(k, d)| (k.to_string(), d.ms_name().as_bytes().to_vec()))
                .collect();
            p.insert(K_OUT_DTYPES, nested(entries)?)?;
        }
        let (ni, no, tuple, dd) = self.flags();
        p.insert(K_NUM_INPUTS, opt_u32(ni))?;
        p.insert(K_NUM_OUTPUTS, opt_u32(no))?;
        p.insert(K_TUPLE, vec![tuple as u8])?;
        p.insert(K_DATA_DEP, vec![dd as u8])?;
        Ok(p.encode())
    }
}

impl AotOpBuilder {
    /// Loads an operator package: writes its library into the cache (content-addressed; no
    /// compiler needed) and returns a builder with the packaged definition. Attach closures
    /// again if the original used them, then [`AotOpBuilder::build`].
    pub fn from_package(bytes: &[u8], options: AotOptions) -> AotResult<AotOpBuilder> {
        let pkg = Package::decode(bytes)?;
        let symbol = utf8(&pkg, K_SYMBOL)?;
        let target = utf8(&pkg, K_TARGET)?;
        if target != "cpu" && target != "cuda" {
            return Err(AotError::Package(format!("unknown target `{target}`")));
        }
        let built_for = utf8(&pkg, K_HOST)?;
        if built_for != host() {
            return Err(AotError::Package(format!(
                "the library was built for {built_for}, this machine is {}",
                host()
            )));
        }
        let name = utf8(&pkg, K_LIBRARY_NAME)?;
        let lib = required(&pkg, K_LIBRARY)?;
        let safe_name: String = name
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        let digest = hex(&Sha256::digest(lib));
        let ext = if target == "cuda" { "cu.so" } else { "so" };
        let stem = safe_name.trim_end_matches(".so");
        let dest = options
            .compile
            .cache_dir()
            .join("packages")
            .join(format!("{stem}-{}.{ext}", &digest[..32]));
        write_atomic(&dest, lib)?;

        let attrs = Attrs::decode(Package::decode(required(&pkg, K_ATTRS)?)?.entries())?;
        let mut b = AotOpBuilder::new(String::new())
            .options(options)
            .attrs(&attrs)
            .target(if target == "cuda" {
                Target::Cuda
            } else {
                Target::Cpu
            });
        if let Some(raw) = pkg.get(K_OUT_SHAPES) {
            let inner = Package::decode(raw)?;
            let mut shapes = Vec::new();
            for (k, v) in inner.entries() {
                if v.len() % 8 != 0 {
                    return Err(AotError::Package(format!("out shape `{k}` is not i64s")));
                }
                shapes.push(
                    v.chunks_exact(8)
                        .map(|c| i64::from_le_bytes(c.try_into().unwrap()))
                        .collect::<Vec<i64>>(),
                );
            }
            b = b.out_shapes(shapes);
        }
        if let Some(raw) = pkg.get(K_OUT_DTYPES) {
            let inner = Package::decode(raw)?;
            let mut dtypes = Vec::new();
            for (k, v) in inner.entries() {
                let s = std::str::from_utf8(v).unwrap_or("");
                dtypes.push(DType::from_ms_name(s).ok_or_else(|| {
                    AotError::Package(format!("out dtype `{k}` is unknown: {s:?}"))
                })?);
            }
            b = b.out_dtypes(dtypes);
        }
        let b = b.set_flags(
            read_opt_u32(&pkg, K_NUM_INPUTS)?,
            read_opt_u32(&pkg, K_NUM_OUTPUTS)?,
            read_flag(&pkg, K_TUPLE)?,
            read_flag(&pkg, K_DATA_DEP)?,
        );
        Ok(b.set_func(format!("{}:{symbol}", dest.display())))
    }
}
