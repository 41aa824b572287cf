//! Builds the backend's native parts:
//!
//! - the `__builtin_*` custom-op library (`builtins/builtins.cpp`), with `tritium-build`
//!   (clang 19), into `$OUT_DIR/builtins.bc` (host) and `$OUT_DIR/builtins.nvptx.bc`
//!   (`nvptx64-nvidia-cuda`, sm_80), embedded by `src/builtins.rs`;
//! - `TRITIUM_BACKEND_SOURCE_HASH`, a hash of every file under `src/`: part of every
//!   disk-cache key (`src/pipeline/version.rs`), so that a cached kernel from other
//!   code-generator sources never stands in for what these generate.

use tritium_build::{Bitcode, Target};

fn main() -> Result<(), tritium_build::Error> {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=src");
    println!(
        "cargo:rustc-env=TRITIUM_BACKEND_SOURCE_HASH={:016x}",
        source_hash(std::path::Path::new("src"))
    );
    let mut builtins = Bitcode::new();
    builtins
        .file("builtins/builtins.cpp")
        // The float atomics reinterpret the element as its bit pattern.
        .flag("-fno-strict-aliasing")
        .flag("-Werror");
    builtins.clone().target(Target::Host).compile("builtins")?;
    builtins
        .clone()
        .target(Target::Nvptx { sm: 80 })
        .compile("builtins.nvptx")?;
    Ok(())
}

/// FNV-1a over the relative path and contents of every file under `root`, in path order.
fn source_hash(root: &std::path::Path) -> u64 {
    fn files(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
        let entries = std::fs::read_dir(dir).expect("the backend's src/ is readable");
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                files(&p, out);
            } else {
                out.push(p);
            }
        }
    }
    let mut paths = Vec::new();
    files(root, &mut paths);
    paths.sort();
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    for p in paths {
        let name = p.to_string_lossy().replace('\\', "/");
        let bytes = std::fs::read(&p).expect("a backend source is readable");
        for b in name.bytes().chain([0]).chain(bytes) {
            h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
    }
    h
}
