//! Mutations of AOT operator packages: the loader never panics, and a package damaged in any
//! byte is refused before its library is written or loaded (its SHA-256 covers every byte).
//!
//! [`sample_package`] builds a package as `AotOp::to_package` lays it out (symbol, target,
//! host, library bytes, attributes, output shapes and dtypes, flags); [`run`] flips,
//! truncates, inserts, deletes and duplicates bytes of it, and checks that
//! `AotOpBuilder::from_package` refuses every mutant that differs from the original.

use crate::Rng;
use std::panic::{catch_unwind, AssertUnwindSafe};
use tritium_aot::{AotOpBuilder, AotOptions, Package};

/// A package shaped like an operator's, with `lib` as its library bytes.
pub fn sample_package(lib: &[u8]) -> Vec<u8> {
    let nested = |entries: &[(&str, Vec<u8>)]| {
        let mut p = Package::new();
        for (k, v) in entries {
            p.insert(*k, v.clone()).expect("distinct keys");
        }
        p.encode()
    };
    let host = format!("{}-{}", std::env::consts::ARCH, std::env::consts::OS);
    let shape: Vec<u8> = [4i64, 8].iter().flat_map(|d| d.to_le_bytes()).collect();
    let mut p = Package::new();
    let entries: Vec<(&str, Vec<u8>)> = vec![
        ("tritium.aot.symbol", b"AddFunc".to_vec()),
        ("tritium.aot.target", b"cpu".to_vec()),
        ("tritium.aot.host", host.into_bytes()),
        ("tritium.aot.library_name", b"add.so".to_vec()),
        ("tritium.aot.library", lib.to_vec()),
        ("tritium.aot.attrs", nested(&[])),
        ("tritium.aot.out_shapes", nested(&[("0", shape)])),
        (
            "tritium.aot.out_dtypes",
            nested(&[("0", b"float32".to_vec())]),
        ),
        ("tritium.aot.num_inputs", 2u32.to_le_bytes().to_vec()),
        ("tritium.aot.num_outputs", 1u32.to_le_bytes().to_vec()),
        ("tritium.aot.tuple_infer", vec![0]),
        ("tritium.aot.data_dependent", vec![0]),
    ];
    for (k, v) in entries {
        p.insert(k, v).expect("distinct keys");
    }
    p.encode()
}

/// One to three random byte-level edits of `bytes`.
pub fn mutate(bytes: &[u8], rng: &mut Rng) -> Vec<u8> {
    let mut b = bytes.to_vec();
    for _ in 0..1 + rng.below(3) {
        if b.is_empty() {
            b.push(rng.below(256) as u8);
            continue;
        }
        let at = rng.below(b.len());
        match rng.below(6) {
            0 => b[at] ^= 1 << rng.below(8),
            1 => b[at] = rng.below(256) as u8,
            2 => b.truncate(at),
            3 => b.insert(at, rng.below(256) as u8),
            4 => {
                b.remove(at);
            }
            _ => {
                let end = (at + 1 + rng.below(16)).min(b.len());
                let chunk = b[at..end].to_vec();
                let to = rng.below(b.len() + 1);
                b.splice(to..to, chunk);
            }
        }
    }
    b
}

/// What [`run`] found.
#[derive(Debug, Default)]
pub struct Report {
    /// Mutants tried.
    pub mutants: u64,
    /// Mutants equal to the original (accepted, as they should be).
    pub unchanged: u64,
    /// Failures: a panic, or a changed package that was accepted.
    pub failures: Vec<String>,
}

/// Mutates a sample package `n` times from `seed` and loads each mutant, with the cache
/// under `cache` (nothing may be written there: every changed mutant must be refused first).
pub fn run(n: u64, seed: u64, cache: &std::path::Path) -> Report {
    let mut rng = Rng::new(seed);
    let lib: Vec<u8> = (0..512).map(|i| (i * 31 % 251) as u8).collect();
    let original = sample_package(&lib);
    let mut report = Report::default();
    let mut options = AotOptions::default();
    options.compile.cache_dir = Some(cache.join("original"));
    if let Err(e) = AotOpBuilder::from_package(&original, options) {
        report
            .failures
            .push(format!("the unmutated package is refused: {e}"));
    }
    for _ in 0..n {
        let m = mutate(&original, &mut rng);
        report.mutants += 1;
        let mut options = AotOptions::default();
        options.compile.cache_dir = Some(cache.to_path_buf());
        let loaded = catch_unwind(AssertUnwindSafe(|| {
            AotOpBuilder::from_package(&m, options).map(|_| ())
        }));
        match loaded {
            Err(_) => report
                .failures
                .push(format!("panicked on a mutant of {} bytes", m.len())),
            Ok(Ok(())) if m == original => report.unchanged += 1,
            Ok(Ok(())) => report.failures.push(format!(
                "accepted a damaged package ({} bytes, {} differ from the original's {})",
                m.len(),
                m.iter().zip(&original).filter(|(a, b)| a != b).count(),
                original.len()
            )),
            Ok(Err(_)) => {}
        }
    }
    report
}

#[cfg(test)]
mod tests {
    /// A short run (the long one is `tritium-fuzz --package-mutants N`): no panics, every
    /// damaged package refused, nothing written to the cache.
    #[test]
    fn damaged_packages_are_refused_before_anything_is_written() {
        let dir = std::env::temp_dir().join(format!("tritium-pkg-fuzz-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let r = super::run(3000, 11, &dir);
        assert!(
            r.failures.is_empty(),
            "{:?}",
            &r.failures[..r.failures.len().min(5)]
        );
        assert_eq!(r.mutants, 3000);
        let written = std::fs::read_dir(dir.join("packages")).map_or(0, |d| d.count());
        assert_eq!(
            written,
            r.unchanged.min(1) as usize,
            "only the original may be written"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
