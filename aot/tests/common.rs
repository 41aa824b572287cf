//! Helpers shared by the AOT tests.
use std::path::{Path, PathBuf};
use std::process::Command;

use tritium_aot::{AotOp, AotOpBuilder, AotOptions, CompileOptions};

/// `tests/data/<name>`.
pub fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name)
}

/// `"tests/data/<file>:<func>"`.
pub fn func(file: &str, func: &str) -> String {
    format!("{}:{func}", data(file).display())
}

/// A scratch directory under cargo's per-target temp dir.
pub fn scratch(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("aot")
        .join(name);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// The compile cache the tests share (kept out of `~/.cache`).
pub fn cache() -> PathBuf {
    scratch("cache")
}

/// Options with the tests' cache and an empty environment-independent whitelist setting.
pub fn options() -> AotOptions {
    AotOptions {
        checked: false,
        compile: CompileOptions {
            cache_dir: Some(cache()),
            ..CompileOptions::default()
        },
        whitelist: None,
    }
}

/// A builder using [`options`].
pub fn op(file: &str, f: &str) -> AotOpBuilder {
    AotOp::builder(func(file, f)).options(options())
}

/// Compiles `tests/data/<src>` into `<dir>/lib<stem>.so` with g++ as a user would.
pub fn prebuilt(src: &str, dir: &Path) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let stem = Path::new(src).file_stem().unwrap().to_string_lossy();
    let out = dir.join(format!("lib{stem}.so"));
    let tmp = dir.join(format!(".lib{stem}.{}.tmp.so", std::process::id()));
    let status = Command::new("g++")
        .args([
            "-std=c++17",
            "--shared",
            "-fPIC",
            "-D_GLIBCXX_USE_CXX11_ABI=0",
        ])
        .arg(format!(
            "-I{}",
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("shim/include")
                .display()
        ))
        .arg("-o")
        .arg(&tmp)
        .arg(data(src))
        .status()
        .expect("g++ runs");
    assert!(status.success(), "g++ failed on {src}");
    std::fs::rename(&tmp, &out).unwrap();
    out
}
