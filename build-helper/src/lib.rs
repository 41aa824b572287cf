//! Compiles C++ custom-op sources to LLVM bitcode for Tritium, from a `build.rs`.
//!
//! Tritium kernels call user C++ through `custom(...)`; the backend links the user's
//! code in as LLVM bitcode. This crate turns C++ sources into that bitcode with clang 19
//! (the LLVM version Tritium links against, so that LLVM can read it), for the host CPU
//! or for `nvptx64-nvidia-cuda`, and ships the C++ header `custom_op.h`
//! (`memref_t`, `half`, `bfloat16_t`, helpers) that those sources include.
//!
//! It is a light build-dependency (it never needs LLVM's libraries): the `cc` crate
//! configures clang for the target, as for any C++ a build script compiles, and clang
//! and, for several sources, `llvm-link` run as processes.
//!
//! # Usage
//!
//! `Cargo.toml`:
//!
//! ```toml
//! [build-dependencies]
//! tritium-build = { path = "../build-helper" }
//! ```
//!
//! `build.rs`:
//!
//! ```no_run
//! use tritium_build::{Bitcode, Target};
//!
//! fn main() -> Result<(), tritium_build::Error> {
//!     println!("cargo:rerun-if-changed=build.rs");
//!     // $OUT_DIR/add.bc, for the CPU backend
//!     Bitcode::new().file("csrc/add.cpp").compile("add")?;
//!     // $OUT_DIR/add.nvptx.bc, for CUDA (sm_80)
//!     Bitcode::new()
//!         .file("csrc/add.cpp")
//!         .target(Target::Nvptx { sm: 80 })
//!         .compile("add.nvptx")?;
//!     Ok(())
//! }
//! ```
//!
//! The crate then embeds the bitcode (the build helper cannot do this part: it only
//! exists at build time):
//!
//! ```ignore
//! pub static ADD_BC: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/add.bc"));
//! ```
//!
//! # What `compile` does
//!
//! - finds clang ([`find_clang`]): `$TRITIUM_CLANG`, else `clang-19` on `PATH`, else
//!   `$LLVM_SYS_191_PREFIX/bin/clang`, else `/usr/lib/llvm-19/bin/clang`, else `clang` on
//!   `PATH` if its major version is 19;
//! - writes the shipped header to `$OUT_DIR/tritium-build/include/custom_op.h` and adds
//!   that directory with `-I`, so `#include "custom_op.h"` works wherever this crate is
//!   unpacked;
//! - compiles every source with clang as the `cc` crate configures it for the target
//!   (`--target=`, `-O<level>`, `-fPIC` on the host, `CXXFLAGS`/`CXXFLAGS_<target>` from
//!   the environment, `-Wall -Wextra`), plus [`BASE_FLAGS`] and, for [`Target::Nvptx`],
//!   `-march=sm_XX -nostdlibinc` and the PTX ISA version that `sm_XX` needs;
//! - links several sources into one module with `llvm-link` (one source is written
//!   directly), atomically replacing `$OUT_DIR/<name>.bc`; intermediate files (clang's
//!   dependency files, the parts of a linked module) go to `$OUT_DIR/tritium-build/<name>.bc/`;
//! - prints `cargo:rerun-if-changed` for every source and every header it included (from
//!   clang's dependency file; system headers excluded), `cargo:rerun-if-env-changed` for
//!   the variables above, and clang's warnings as `cargo:warning`;
//! - returns an [`Error`] (never panics) naming the file and carrying clang's stderr.
#![deny(missing_docs)]

pub mod signature;

use std::ffi::OsString;
use std::fmt;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The text of the shipped C++ header `custom_op.h` (`memref_t`, element typedefs,
/// helpers). [`Bitcode::compile`] writes it to `$OUT_DIR` and adds its directory with `-I`.
pub const HEADER: &str = include_str!("../include/custom_op.h");

/// The file name under which [`HEADER`] is written (`#include "custom_op.h"`).
pub const HEADER_NAME: &str = "custom_op.h";

/// The flags every source is compiled with, on every target.
///
/// `-ffp-contract=on` lets clang fuse `a * b + c` within one expression (as CUDA does);
/// `-fno-math-errno` turns `sqrtf` and friends into LLVM intrinsics instead of libm calls.
/// `-Xclang -disable-llvm-passes` leaves all optimization to the kernel's own pipeline,
/// which sees the CPU it runs on: loops vectorized here stayed at the baseline's 128-bit
/// vectors (a Simd add over 1024 floats ran 17% slower than the native add on an
/// AVX-512 host), unrolled ones did not vectorize there (their copies' accesses overlap
/// for LLVM's run-time alias checks, which then always fail), and `-fno-unroll-loops`
/// marks every loop `llvm.loop.unroll.disable`, which keeps it from being interleaved.
pub const BASE_FLAGS: &[&str] = &[
    "-emit-llvm",
    "-c",
    "-x",
    "c++",
    "-std=c++17",
    "-fno-exceptions",
    "-fno-rtti",
    "-ffp-contract=on",
    "-fno-math-errno",
    "-Xclang",
    "-disable-llvm-passes",
];

/// The clang major version whose bitcode Tritium's LLVM reads.
pub const LLVM_MAJOR: u32 = 19;

/// Environment variable naming the clang to use.
pub const ENV_CLANG: &str = "TRITIUM_CLANG";

/// Environment variable naming the `llvm-link` to use.
pub const ENV_LLVM_LINK: &str = "TRITIUM_LLVM_LINK";

/// What the bitcode is compiled for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Target {
    /// The CPU the Rust crate is built for (clang's default triple; when cross-compiling,
    /// cargo's `$TARGET`). No `-march`: functions carry the baseline `target-cpu` (on
    /// x86-64, `"x86-64"`), and the kernel linker drops it for the kernel's own CPU.
    #[default]
    Host,
    /// `nvptx64-nvidia-cuda` for the compute capability `sm` (`80` is `sm_80`).
    Nvptx {
        /// The compute capability as a number: 70, 75, 80, 86, 89, 90.
        sm: u32,
    },
}

impl Target {
    /// The target triple handed to `cc` (which turns it into clang's `--target=`): cargo's
    /// `$TARGET` for [`Target::Host`] inside a build script, else the triple this helper
    /// was built for.
    pub fn triple(self) -> String {
        match self {
            Target::Host => std::env::var("TARGET").unwrap_or_else(|_| BUILT_FOR.to_string()),
            Target::Nvptx { .. } => "nvptx64-nvidia-cuda".to_string(),
        }
    }

    /// The clang flags this target adds to what `cc` configures (`--target=`, `-fPIC` on
    /// the host).
    pub fn flags(self) -> Vec<String> {
        match self {
            Target::Host => Vec::new(),
            Target::Nvptx { sm } => vec![
                format!("-march=sm_{sm}"),
                // No host libc headers: clang's own stdint.h/stddef.h/stdbool.h suffice.
                "-nostdlibinc".to_string(),
                "-Xclang".to_string(),
                "-target-feature".to_string(),
                "-Xclang".to_string(),
                format!("+ptx{}", ptx_version(sm)),
            ],
        }
    }
}

/// The triple this crate was compiled for: as a build-dependency, the build machine's.
const BUILT_FOR: &str = env!("TRITIUM_BUILD_HOST");

/// The PTX ISA version (times ten: `70` is PTX 7.0) that LLVM 19 needs at least for
/// `sm_<sm>`. Without it clang (outside CUDA mode) marks functions `+ptx42`.
pub fn ptx_version(sm: u32) -> u32 {
    match sm {
        0..=62 => 50,
        63..=70 => 60,
        71..=72 => 61,
        73..=75 => 63,
        76..=80 => 70,
        81..=86 => 71,
        87 => 74,
        _ => 78,
    }
}

/// An error of the build helper. `Debug` prints the same text as `Display`, so a
/// `build.rs` whose `main` returns `Result<(), tritium_build::Error>` shows a readable
/// message, clang's diagnostics included.
pub enum Error {
    /// `$OUT_DIR` is unset and no [`Bitcode::out_dir`] was given.
    NoOutDir,
    /// [`Bitcode::compile`] was called without any source file.
    NoSources {
        /// The output name passed to `compile`.
        name: String,
    },
    /// A source file does not exist.
    MissingSource {
        /// The path as given.
        file: PathBuf,
    },
    /// No usable tool (clang or llvm-link) was found.
    ToolNotFound {
        /// `"clang"` or `"llvm-link"`.
        tool: &'static str,
        /// Each candidate tried, with why it was rejected.
        tried: Vec<String>,
    },
    /// clang or llvm-link ran and failed.
    ToolFailed {
        /// What was being done: `"clang failed to compile"`, `"llvm-link failed to link"`.
        what: &'static str,
        /// The file being compiled (or the output being linked).
        file: PathBuf,
        /// The command line.
        command: String,
        /// The exit status, `None` when killed by a signal or when it could not start.
        status: Option<i32>,
        /// The tool's stderr (its diagnostics).
        stderr: String,
    },
    /// `cc` could not configure clang for the target.
    Cc {
        /// The target triple.
        target: String,
        /// `cc`'s message.
        message: String,
    },
    /// The tool reported success but its output is not LLVM bitcode.
    NotBitcode {
        /// The output file.
        file: PathBuf,
    },
    /// Reading or writing a file failed.
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The underlying error.
        source: io::Error,
    },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::NoOutDir => write!(
                f,
                "tritium-build: OUT_DIR is not set (call from a build.rs, or set Bitcode::out_dir)"
            ),
            Error::NoSources { name } => {
                write!(f, "tritium-build: no source files given for `{name}`")
            }
            Error::MissingSource { file } => {
                write!(
                    f,
                    "tritium-build: source file {} does not exist",
                    file.display()
                )
            }
            Error::ToolNotFound { tool, tried } => {
                write!(f, "tritium-build: no usable {tool} {LLVM_MAJOR} found")?;
                for t in tried {
                    write!(f, "\n  tried {t}")?;
                }
                let hint = if *tool == "clang" {
                    ENV_CLANG
                } else {
                    ENV_LLVM_LINK
                };
                write!(
                    f,
                    "\n  install clang-{LLVM_MAJOR} / llvm-{LLVM_MAJOR} (Debian/Ubuntu: apt-get install clang-{LLVM_MAJOR} llvm-{LLVM_MAJOR}) or set {hint}"
                )
            }
            Error::ToolFailed {
                what,
                file,
                command,
                status,
                stderr,
            } => {
                write!(f, "tritium-build: {what} {}", file.display())?;
                match status {
                    Some(code) => write!(f, " (exit status {code})")?,
                    None => write!(f, " (no exit status)")?,
                }
                write!(f, "\ncommand: {command}")?;
                if !stderr.trim().is_empty() {
                    write!(f, "\n{}", stderr.trim_end())?;
                }
                Ok(())
            }
            Error::Cc { target, message } => write!(
                f,
                "tritium-build: cc cannot configure clang for {target}: {message}"
            ),
            Error::NotBitcode { file } => write!(
                f,
                "tritium-build: {} is not LLVM bitcode (no BC\\xC0\\xDE magic)",
                file.display()
            ),
            Error::Io { path, source } => {
                write!(f, "tritium-build: {}: {source}", path.display())
            }
        }
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// This crate's `Result`.
pub type Result<T, E = Error> = std::result::Result<T, E>;

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> Error + '_ {
    move |source| Error::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// True when `bytes` starts with the LLVM bitcode magic `BC\xC0\xDE` or the bitcode
/// wrapper magic `0x0B17C0DE` (little-endian).
pub fn is_bitcode(bytes: &[u8]) -> bool {
    bytes.starts_with(b"BC\xC0\xDE") || bytes.starts_with(&[0xDE, 0xC0, 0x17, 0x0B])
}

/// A clang found by [`find_clang`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Clang {
    /// The executable (as found: a name on `PATH` is resolved to its full path).
    pub path: PathBuf,
    /// The major version, from `clang --version`.
    pub major: u32,
    /// The first line of `clang --version`.
    pub version: String,
}

/// Parses the major version out of `clang --version`'s first line
/// (`"Debian clang version 19.1.7 (3~deb12u1)"` gives 19).
pub fn parse_clang_major(version_output: &str) -> Option<u32> {
    let line = version_output.lines().next()?;
    let at = line.find("clang version ")?;
    let rest = &line[at + "clang version ".len()..];
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

fn probe_clang(path: &Path) -> Result<Clang, String> {
    let out = Command::new(path)
        .arg("--version")
        .output()
        .map_err(|e| format!("{}: {e}", path.display()))?;
    if !out.status.success() {
        return Err(format!("{}: `--version` failed", path.display()));
    }
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let major = parse_clang_major(&text)
        .ok_or_else(|| format!("{}: not clang ({:?})", path.display(), text.lines().next()))?;
    Ok(Clang {
        path: path.to_path_buf(),
        major,
        version: text.lines().next().unwrap_or_default().to_string(),
    })
}

/// Finds an executable on `PATH` (a path with a separator is returned as is if it exists).
fn which(name: &str) -> Option<PathBuf> {
    let p = Path::new(name);
    if p.components().count() > 1 {
        return p.is_file().then(|| p.to_path_buf());
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|cand| cand.is_file())
}

/// Finds clang: `$TRITIUM_CLANG` (trusted whatever its version), else `clang-19` on `PATH`,
/// else `$LLVM_SYS_191_PREFIX/bin/clang`, else `/usr/lib/llvm-19/bin/clang`, else `clang`
/// on `PATH` when its major version is 19. Each candidate must run `--version`.
pub fn find_clang() -> Result<Clang> {
    let mut tried = Vec::new();
    if let Some(env) = std::env::var_os(ENV_CLANG).filter(|v| !v.is_empty()) {
        let name = env.to_string_lossy().into_owned();
        return match which(&name).map(|p| probe_clang(&p)) {
            Some(Ok(c)) => Ok(c),
            Some(Err(why)) => Err(Error::ToolNotFound {
                tool: "clang",
                tried: vec![format!("${ENV_CLANG}={name}: {why}")],
            }),
            None => Err(Error::ToolNotFound {
                tool: "clang",
                tried: vec![format!("${ENV_CLANG}={name}: not found")],
            }),
        };
    }
    let mut candidates: Vec<(String, bool)> = vec![(format!("clang-{LLVM_MAJOR}"), false)];
    if let Some(prefix) = std::env::var_os("LLVM_SYS_191_PREFIX").filter(|v| !v.is_empty()) {
        let p = PathBuf::from(prefix).join("bin").join("clang");
        candidates.push((p.to_string_lossy().into_owned(), true));
    }
    candidates.push((format!("/usr/lib/llvm-{LLVM_MAJOR}/bin/clang"), true));
    candidates.push(("clang".to_string(), true));
    for (name, check_major) in candidates {
        let Some(path) = which(&name) else {
            tried.push(format!("{name}: not found"));
            continue;
        };
        match probe_clang(&path) {
            Ok(c) if !check_major || c.major == LLVM_MAJOR => return Ok(c),
            Ok(c) => tried.push(format!(
                "{}: version {} (need {LLVM_MAJOR})",
                path.display(),
                c.major
            )),
            Err(why) => tried.push(why),
        }
    }
    Err(Error::ToolNotFound {
        tool: "clang",
        tried,
    })
}

/// Finds `llvm-link` for `clang`: `$TRITIUM_LLVM_LINK`, else `llvm-link` next to clang's
/// real path (`/usr/bin/clang-19` resolves to `/usr/lib/llvm-19/bin/clang`), else
/// `llvm-link-<major>` on `PATH`, else `/usr/lib/llvm-<major>/bin/llvm-link`.
pub fn find_llvm_link(clang: &Clang) -> Result<PathBuf> {
    if let Some(env) = std::env::var_os(ENV_LLVM_LINK).filter(|v| !v.is_empty()) {
        let name = env.to_string_lossy().into_owned();
        return which(&name).ok_or_else(|| Error::ToolNotFound {
            tool: "llvm-link",
            tried: vec![format!("${ENV_LLVM_LINK}={name}: not found")],
        });
    }
    let mut tried = Vec::new();
    if let Ok(real) = fs::canonicalize(&clang.path) {
        if let Some(dir) = real.parent() {
            let cand = dir.join("llvm-link");
            if cand.is_file() {
                return Ok(cand);
            }
            tried.push(format!("{}: not found", cand.display()));
        }
    }
    let major = clang.major;
    for name in [
        format!("llvm-link-{major}"),
        format!("/usr/lib/llvm-{major}/bin/llvm-link"),
    ] {
        match which(&name) {
            Some(p) => return Ok(p),
            None => tried.push(format!("{name}: not found")),
        }
    }
    Err(Error::ToolNotFound {
        tool: "llvm-link",
        tried,
    })
}

/// Writes the shipped header into `<out_dir>/tritium-build/include/` (only when its
/// content differs, so its mtime stays put) and returns that directory.
pub fn write_header(out_dir: &Path) -> Result<PathBuf> {
    let dir = out_dir.join("tritium-build").join("include");
    fs::create_dir_all(&dir).map_err(io_err(&dir))?;
    let file = dir.join(HEADER_NAME);
    if fs::read(&file).ok().as_deref() != Some(HEADER.as_bytes()) {
        write_atomic(&file, HEADER.as_bytes())?;
    }
    Ok(dir)
}

fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let tmp = tmp_path(path);
    fs::write(&tmp, bytes).map_err(io_err(&tmp))?;
    fs::rename(&tmp, path).map_err(io_err(path))
}

fn tmp_path(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(format!(".tmp{}", std::process::id()));
    path.with_file_name(name)
}

/// The prerequisites listed in a Makefile-style dependency file written by `clang -MD`
/// (`out.bc: a.cpp b.h \` continued lines; `\ ` escapes a space, `$$` a dollar).
pub fn parse_depfile(text: &str) -> Vec<PathBuf> {
    let joined = text.replace("\\\r\n", " ").replace("\\\n", " ");
    let mut deps = Vec::new();
    for rule in joined.lines() {
        // The target ends at the first ": " (a Windows drive letter is "C:\").
        let Some(colon) = rule
            .find(": ")
            .or_else(|| rule.strip_suffix(':').map(|r| r.len()))
        else {
            continue;
        };
        let mut cur = String::new();
        let mut chars = rule[colon + 1..].chars().peekable();
        while let Some(c) = chars.next() {
            match c {
                '\\' if chars.peek() == Some(&' ') => {
                    cur.push(' ');
                    chars.next();
                }
                '$' if chars.peek() == Some(&'$') => {
                    cur.push('$');
                    chars.next();
                }
                c if c.is_whitespace() => {
                    if !cur.is_empty() {
                        deps.push(PathBuf::from(std::mem::take(&mut cur)));
                    }
                }
                c => cur.push(c),
            }
        }
        if !cur.is_empty() {
            deps.push(PathBuf::from(cur));
        }
    }
    deps
}

fn render_command(cmd: &Command) -> String {
    let mut s = cmd.get_program().to_string_lossy().into_owned();
    for a in cmd.get_args() {
        let a = a.to_string_lossy();
        s.push(' ');
        if a.contains(' ') || a.is_empty() {
            s.push('\'');
            s.push_str(&a);
            s.push('\'');
        } else {
            s.push_str(&a);
        }
    }
    s
}

/// A bitcode build: sources, flags and a target, compiled by [`Bitcode::compile`].
///
/// Setters take `&mut self` and return it, like `cc::Build`, so both
/// `Bitcode::new().file(..).compile(..)` and a reused, cloned configuration work.
#[derive(Clone, Debug)]
pub struct Bitcode {
    files: Vec<PathBuf>,
    includes: Vec<PathBuf>,
    defines: Vec<(String, Option<String>)>,
    flags: Vec<OsString>,
    target: Target,
    opt_level: u32,
    warnings: bool,
    cargo_metadata: bool,
    out_dir: Option<PathBuf>,
    clang: Option<PathBuf>,
    llvm_link: Option<PathBuf>,
}

impl Default for Bitcode {
    fn default() -> Self {
        Self::new()
    }
}

impl Bitcode {
    /// A build with no sources, for [`Target::Host`], at `-O2`, with `-Wall -Wextra` and
    /// cargo metadata on.
    pub fn new() -> Self {
        Bitcode {
            files: Vec::new(),
            includes: Vec::new(),
            defines: Vec::new(),
            flags: Vec::new(),
            target: Target::Host,
            opt_level: 2,
            warnings: true,
            cargo_metadata: true,
            out_dir: None,
            clang: None,
            llvm_link: None,
        }
    }

    /// Adds a C++ source file (relative paths are relative to the build script's working
    /// directory, the package root).
    pub fn file(&mut self, path: impl AsRef<Path>) -> &mut Self {
        self.files.push(path.as_ref().to_path_buf());
        self
    }

    /// Adds several source files.
    pub fn files<P: AsRef<Path>>(&mut self, paths: impl IntoIterator<Item = P>) -> &mut Self {
        for p in paths {
            self.file(p);
        }
        self
    }

    /// Adds an include directory (`-I`), searched before the shipped header's directory.
    pub fn include(&mut self, dir: impl AsRef<Path>) -> &mut Self {
        self.includes.push(dir.as_ref().to_path_buf());
        self
    }

    /// Defines a preprocessor macro: `define("N", Some("4"))` is `-DN=4`,
    /// `define("FAST", None)` is `-DFAST`.
    pub fn define(&mut self, name: &str, value: Option<&str>) -> &mut Self {
        self.defines
            .push((name.to_string(), value.map(str::to_string)));
        self
    }

    /// Adds a raw clang flag, after the built-in ones (so `-O3` overrides `-O2`).
    pub fn flag(&mut self, flag: impl Into<OsString>) -> &mut Self {
        self.flags.push(flag.into());
        self
    }

    /// Sets the target (default [`Target::Host`]).
    pub fn target(&mut self, target: Target) -> &mut Self {
        self.target = target;
        self
    }

    /// Sets the optimization level `-O<level>` (default 2; Tritium optimizes again after
    /// linking, so the point of `-O2` is to hand it clean, inlinable code).
    pub fn opt_level(&mut self, level: u32) -> &mut Self {
        self.opt_level = level;
        self
    }

    /// Turns `-Wall -Wextra` on or off (default on). Warnings never fail the build; they
    /// are shown as `cargo:warning` lines.
    pub fn warnings(&mut self, on: bool) -> &mut Self {
        self.warnings = on;
        self
    }

    /// Turns the `cargo:` lines (rerun-if-changed, rerun-if-env-changed, warning) on or
    /// off (default on; turn off outside build scripts).
    pub fn cargo_metadata(&mut self, on: bool) -> &mut Self {
        self.cargo_metadata = on;
        self
    }

    /// Sets the output directory (default `$OUT_DIR`).
    pub fn out_dir(&mut self, dir: impl AsRef<Path>) -> &mut Self {
        self.out_dir = Some(dir.as_ref().to_path_buf());
        self
    }

    /// Uses this clang instead of searching ([`find_clang`]).
    pub fn clang(&mut self, path: impl AsRef<Path>) -> &mut Self {
        self.clang = Some(path.as_ref().to_path_buf());
        self
    }

    /// Uses this `llvm-link` instead of searching ([`find_llvm_link`]).
    pub fn llvm_link(&mut self, path: impl AsRef<Path>) -> &mut Self {
        self.llvm_link = Some(path.as_ref().to_path_buf());
        self
    }

    fn meta(&self, line: impl fmt::Display) {
        if self.cargo_metadata {
            println!("cargo:{line}");
        }
    }

    /// Compiles the sources into `<out_dir>/<name>.bc` (`name` may already end in `.bc`;
    /// `"add.nvptx"` gives `add.nvptx.bc`) and returns that path. One source is compiled
    /// directly; several are compiled one by one under `<out_dir>/tritium-build/<name>.bc/`
    /// and linked with `llvm-link` into one module.
    pub fn compile(&self, name: &str) -> Result<PathBuf> {
        let out_dir = match &self.out_dir {
            Some(d) => d.clone(),
            None => std::env::var_os("OUT_DIR")
                .map(PathBuf::from)
                .ok_or(Error::NoOutDir)?,
        };
        if self.files.is_empty() {
            return Err(Error::NoSources {
                name: name.to_string(),
            });
        }
        for var in [ENV_CLANG, ENV_LLVM_LINK, "LLVM_SYS_191_PREFIX"] {
            self.meta(format_args!("rerun-if-env-changed={var}"));
        }
        // Report every source up front so that a failed build reruns once it is fixed.
        for f in &self.files {
            self.meta(format_args!("rerun-if-changed={}", f.display()));
        }
        for f in &self.files {
            if !f.is_file() {
                return Err(Error::MissingSource { file: f.clone() });
            }
        }
        let clang = match &self.clang {
            Some(p) => probe_clang(p).map_err(|why| Error::ToolNotFound {
                tool: "clang",
                tried: vec![why],
            })?,
            None => find_clang()?,
        };
        if clang.major != LLVM_MAJOR {
            self.meta(format_args!(
                "warning=tritium-build: {} is clang {}; Tritium's LLVM {LLVM_MAJOR} cannot read bitcode from a newer clang",
                clang.path.display(),
                clang.major
            ));
        }
        let header_dir = write_header(&out_dir)?;
        let file_name = if name.ends_with(".bc") {
            name.to_string()
        } else {
            format!("{name}.bc")
        };
        let output = out_dir.join(&file_name);

        // Intermediate files (dependency files, the parts of a linked module).
        let work = out_dir.join("tritium-build").join(&file_name);
        fs::create_dir_all(&work).map_err(io_err(&work))?;
        if let [single] = self.files.as_slice() {
            let tmp = tmp_path(&output);
            let depfile = work.join("deps.d");
            self.compile_one(&clang, &header_dir, single, &tmp, &depfile)?;
            fs::rename(&tmp, &output).map_err(io_err(&output))?;
        } else {
            let mut parts = Vec::new();
            for (i, f) in self.files.iter().enumerate() {
                let stem = f.file_stem().unwrap_or_default().to_string_lossy();
                let part = work.join(format!("{i}-{stem}.bc"));
                let depfile = work.join(format!("{i}-{stem}.d"));
                self.compile_one(&clang, &header_dir, f, &part, &depfile)?;
                parts.push(part);
            }
            let link = match &self.llvm_link {
                Some(p) => p.clone(),
                None => find_llvm_link(&clang)?,
            };
            let tmp = tmp_path(&output);
            let mut cmd = Command::new(&link);
            cmd.arg("-o").arg(&tmp).args(&parts);
            run(cmd, "llvm-link failed to link", &output)?;
            fs::rename(&tmp, &output).map_err(io_err(&output))?;
        }
        let head = fs::read(&output).map_err(io_err(&output))?;
        if !is_bitcode(&head) {
            return Err(Error::NotBitcode { file: output });
        }
        Ok(output)
    }

    /// clang as `cc` configures it for the target: `-O<level>`, `-fPIC` and `--target=` for
    /// the host, the `CXXFLAGS`/`CXXFLAGS_<target>` of the environment (`cc`'s usual rules,
    /// announced with `rerun-if-env-changed`), and `-Wall -Wextra` or `-w`.
    fn cc_command(&self, clang: &Clang, out_dir: &Path) -> Result<Command> {
        let host = std::env::var("HOST").unwrap_or_else(|_| BUILT_FOR.to_string());
        let triple = self.target.triple();
        let mut build = cc::Build::new();
        build
            .cpp(true)
            .compiler(&clang.path)
            .target(&triple)
            .host(&host)
            .opt_level(self.opt_level)
            .debug(false)
            .pic(self.target == Target::Host)
            .warnings(self.warnings)
            .extra_warnings(self.warnings)
            .cargo_metadata(self.cargo_metadata)
            .cargo_warnings(false)
            .inherit_rustflags(false)
            .out_dir(out_dir);
        build
            .try_get_compiler()
            .map(|tool| tool.to_command())
            .map_err(|e| Error::Cc {
                target: triple,
                message: e.to_string(),
            })
    }

    /// clang with every flag of a compile, before the output and the source.
    fn clang_command(&self, clang: &Clang, header_dir: &Path, out: &Path) -> Result<Command> {
        let mut cmd = self.cc_command(clang, out.parent().unwrap_or(Path::new(".")))?;
        cmd.args(BASE_FLAGS).args(self.target.flags());
        for dir in &self.includes {
            cmd.arg("-I").arg(dir);
        }
        cmd.arg("-I").arg(header_dir);
        for (k, v) in &self.defines {
            match v {
                Some(v) => cmd.arg(format!("-D{k}={v}")),
                None => cmd.arg(format!("-D{k}")),
            };
        }
        cmd.args(&self.flags);
        Ok(cmd)
    }

    /// Compiles `src` to `out`, then embeds its functions' signature records (see
    /// [`signature`]): `src` is compiled once more with `-g` to textual IR, and, when it
    /// has records, a wrapper that includes `src` and defines them is compiled to `out`.
    /// A source whose signatures cannot be read keeps the plain compile.
    fn compile_one(
        &self,
        clang: &Clang,
        header_dir: &Path,
        src: &Path,
        out: &Path,
        depfile: &Path,
    ) -> Result<()> {
        self.compile_plain(clang, header_dir, src, out, depfile)?;
        let ll = out.with_extension("sig.ll");
        let mut cmd = self.clang_command(clang, header_dir, out)?;
        cmd.arg("-g").arg("-S").arg("-o").arg(&ll).arg(src);
        let Ok(text) = run(cmd, "clang failed to read signatures", src)
            .and_then(|_| fs::read_to_string(&ll).map_err(io_err(&ll)))
        else {
            return Ok(());
        };
        let records = signature::records(&text);
        let _ = fs::remove_file(&ll);
        if records.is_empty() {
            return Ok(());
        }
        let abs = fs::canonicalize(src).unwrap_or_else(|_| src.to_path_buf());
        let quoted = abs
            .display()
            .to_string()
            .replace('\\', "\\\\")
            .replace('"', "\\\"");
        let wrapper = out.with_extension("sig.cc");
        let text = format!(
            "#include \"{quoted}\"\n{}",
            signature::definitions(&records)
        );
        fs::write(&wrapper, text).map_err(io_err(&wrapper))?;
        let signed = out.with_extension("signed.bc");
        let mut cmd = self.clang_command(clang, header_dir, out)?;
        cmd.arg("-o").arg(&signed).arg(&wrapper);
        if run(cmd, "clang failed to embed signatures", src).is_ok() {
            fs::rename(&signed, out).map_err(io_err(out))?;
        }
        Ok(())
    }

    fn compile_plain(
        &self,
        clang: &Clang,
        header_dir: &Path,
        src: &Path,
        out: &Path,
        depfile: &Path,
    ) -> Result<()> {
        let mut cmd = self.clang_command(clang, header_dir, out)?;
        cmd.arg("-MMD")
            .arg("-MF")
            .arg(depfile)
            .arg("-o")
            .arg(out)
            .arg(src);
        let stderr = run(cmd, "clang failed to compile", src)?;
        if self.cargo_metadata {
            for line in stderr.lines().filter(|l| !l.trim().is_empty()) {
                println!("cargo:warning={line}");
            }
            if let Ok(text) = fs::read_to_string(depfile) {
                for dep in parse_depfile(&text) {
                    if dep.starts_with(header_dir) || dep == src {
                        continue;
                    }
                    println!("cargo:rerun-if-changed={}", dep.display());
                }
            }
        }
        Ok(())
    }
}

/// Runs `cmd`; on failure returns [`Error::ToolFailed`] naming `file`, else its stderr.
fn run(mut cmd: Command, what: &'static str, file: &Path) -> Result<String> {
    let command = render_command(&cmd);
    let fail = |status, stderr| Error::ToolFailed {
        what,
        file: file.to_path_buf(),
        command: command.clone(),
        status,
        stderr,
    };
    let out = cmd
        .output()
        .map_err(|e| fail(None, format!("could not start: {e}")))?;
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    if !out.status.success() {
        return Err(fail(out.status.code(), stderr));
    }
    Ok(stderr)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn depfile_parsing() {
        let text = "/o/add.bc: csrc/add.cpp /x/custom_op.h \\\n  /with\\ space/a.h /d$$/b.h\n";
        assert_eq!(
            parse_depfile(text),
            [
                "csrc/add.cpp",
                "/x/custom_op.h",
                "/with space/a.h",
                "/d$/b.h"
            ]
            .map(PathBuf::from)
            .to_vec()
        );
        assert!(parse_depfile("").is_empty());
    }

    #[test]
    fn clang_version_parsing() {
        let check = |text: &str, expect: Option<u32>| assert_eq!(parse_clang_major(text), expect);
        check(
            "Debian clang version 19.1.7 (3~deb12u1)\nTarget: x",
            Some(19),
        );
        check("clang version 18.0.0git", Some(18));
        check("Apple clang version 15.0.0 (clang-1500.3.9.4)", Some(15));
        check("gcc (Debian 12.2.0-14) 12.2.0", None);
    }

    #[test]
    fn ptx_versions() {
        let table = [
            (60, 50),
            (70, 60),
            (75, 63),
            (80, 70),
            (86, 71),
            (89, 78),
            (90, 78),
        ];
        for (sm, ptx) in table {
            assert_eq!(ptx_version(sm), ptx, "sm_{sm}");
        }
    }

    #[test]
    fn magic() {
        assert!(is_bitcode(b"BC\xC0\xDE\x35\x14"));
        assert!(is_bitcode(&[0xDE, 0xC0, 0x17, 0x0B, 0, 0]));
        assert!(!is_bitcode(b"\x7fELF"));
        assert!(!is_bitcode(b"BC"));
    }

    #[test]
    fn error_messages_name_the_file_and_carry_stderr() {
        let e = Error::ToolFailed {
            what: "clang failed to compile",
            file: PathBuf::from("csrc/add.cpp"),
            command: "clang-19 -c csrc/add.cpp".into(),
            status: Some(1),
            stderr: "csrc/add.cpp:3:1: error: unknown type name 'foo'\n".into(),
        };
        let text = format!("{e:?}");
        assert!(text.contains("csrc/add.cpp (exit status 1)"), "{text}");
        assert!(text.contains("error: unknown type name 'foo'"), "{text}");
    }
}
