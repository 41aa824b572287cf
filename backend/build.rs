//! Builds the backend's native parts:
//!
//! - the `__builtin_*` custom-op library (`builtins/builtins.cpp`), with `tritium-build`
//!   (clang 19), into `$OUT_DIR/builtins.bc` (host) and `$OUT_DIR/builtins.nvptx.bc`
//!   (`nvptx64-nvidia-cuda`, sm_80), embedded by `src/builtins.rs`;
//! - `TRITIUM_BACKEND_SOURCE_HASH`, a hash of every file under `src/` and under the IR's
//!   `dsl/src/ir/` (whose analyses and rewrites, `axis_info`, `carry_pointer_offsets`…,
//!   the code generators follow): part of every disk-cache key (`src/pipeline/version.rs`),
//!   so that a cached kernel from other code-generator sources never stands in for what
//!   these generate.

use tritium_build::{Bitcode, Target};

fn main() -> Result<(), tritium_build::Error> {
    println!("cargo:rerun-if-changed=build.rs");
    // The IR's sources are there in the workspace (a packaged crate hashes its own alone).
    let roots: Vec<&str> = ["src", "../dsl/src/ir"]
        .into_iter()
        .filter(|r| std::path::Path::new(r).is_dir())
        .collect();
    for root in &roots {
        println!("cargo:rerun-if-changed={root}");
    }
    let hash = roots.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, root| {
        source_hash(h, std::path::Path::new(root))
    });
    println!("cargo:rustc-env=TRITIUM_BACKEND_SOURCE_HASH={hash:016x}");
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

/// FNV-1a, continued from `h`, over the relative path and contents of every file under
/// `root`, in path order.
fn source_hash(mut h: u64, root: &std::path::Path) -> u64 {
    fn files(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
        let entries = std::fs::read_dir(dir).expect("the hashed sources are readable");
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
    for p in paths {
        let name = p.to_string_lossy().replace('\\', "/");
        let bytes = std::fs::read(&p).expect("a hashed source is readable");
        for b in name.bytes().chain([0]).chain(bytes) {
            h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
    }
    h
}
