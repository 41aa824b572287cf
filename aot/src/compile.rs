//! Auto-compilation of `.cc`/`.cpp`/`.cu` sources into a content-addressed cache.
//!
//! The cache lives in `$TRITIUM_CACHE_DIR/aot` (default `~/.cache/tritium/aot`). A library's
//! file name carries a SHA-256 of everything that determines it: the compiler's identity and
//! `--version`, the flags, the shipped header, the source and the headers next to it. So two
//! sources with the same basename never collide, and any process reuses what another built.
//! Outputs are written to a unique temporary name and renamed into place, so two processes
//! compiling the same source at once are safe.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};
use tritium_backend::pipeline::cache::{self, temp_path};

use super::abi::{CUSTOM_AOT_EXTRA_H, CUSTOM_AOT_TYPEID_H};
use super::error::{AotError, AotResult};

/// What a `"path:Func"` path names, by suffix as in MindSpore.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SourceKind {
    /// `.cc` or `.cpp`: compiled with the C++ compiler.
    Cpp,
    /// `.cu`: compiled with nvcc.
    Cuda,
    /// Anything else: a shared library loaded as is.
    Library,
}

impl SourceKind {
    /// The kind of `path`.
    pub fn of(path: &Path) -> SourceKind {
        match path.extension().and_then(|e| e.to_str()) {
            Some("cc") | Some("cpp") => SourceKind::Cpp,
            Some("cu") => SourceKind::Cuda,
            _ => SourceKind::Library,
        }
    }
}

/// How sources are compiled. `Default` reads the environment.
#[derive(Clone, Debug)]
pub struct CompileOptions {
    /// The C++ compiler; default `$CXX`, else `g++`.
    pub cxx: Option<String>,
    /// nvcc; default `$NVCC`, else `nvcc` on `PATH`, else `$CUDA_HOME/bin/nvcc`.
    pub nvcc: Option<String>,
    /// Extra flags appended after the defaults.
    pub flags: Vec<String>,
    /// CUDA architecture for `-gencode` (e.g. `"80"`); default `$TRITIUM_CUDA_ARCH`, else
    /// CUDA device 0's, else 80 for CUDA ≥ 11 and 70 before. The library holds the machine
    /// code for it and its PTX, which newer GPUs compile when they load it.
    pub cuda_arch: Option<String>,
    /// The compile time limit; default `$TRITIUM_AOT_COMPILE_TIMEOUT` seconds, else 300 s.
    pub timeout: Duration,
    /// The cache directory; default [`cache_dir`].
    pub cache_dir: Option<PathBuf>,
}

impl Default for CompileOptions {
    fn default() -> Self {
        let timeout = std::env::var("TRITIUM_AOT_COMPILE_TIMEOUT")
            .ok()
            .and_then(|s| s.parse::<u64>().ok())
            .unwrap_or(300);
        CompileOptions {
            cxx: None,
            nvcc: None,
            flags: Vec::new(),
            cuda_arch: None,
            timeout: Duration::from_secs(timeout),
            cache_dir: None,
        }
    }
}

impl CompileOptions {
    /// The cache directory these options use.
    pub fn cache_dir(&self) -> PathBuf {
        self.cache_dir.clone().unwrap_or_else(cache_dir)
    }
}

/// The AOT cache: `$TRITIUM_CACHE_DIR/aot`, default `~/.cache/tritium/aot` (the kernel
/// cache's root; the system's temporary directory where there is no home).
pub fn cache_dir() -> PathBuf {
    cache::default_root()
        .unwrap_or_else(|| std::env::temp_dir().join("tritium-cache"))
        .join("aot")
}

/// Writes `bytes` to `dest` atomically (the kernel cache's [`cache::write_atomic`]);
/// leaves an existing `dest` with the same content alone.
pub(crate) fn write_atomic(dest: &Path, bytes: &[u8]) -> AotResult<()> {
    if std::fs::read(dest).map(|b| b == bytes).unwrap_or(false) {
        return Ok(());
    }
    cache::write_atomic(dest, bytes).map_err(|e| AotError::io(dest, e))
}

/// The directory holding the shipped `custom_aot_extra.h` (and `custom_aot_typeid.h`) inside
/// `cache`, written on first use.
pub fn header_dir(cache: &Path) -> AotResult<PathBuf> {
    let mut h = Sha256::new();
    h.update(CUSTOM_AOT_EXTRA_H);
    h.update(CUSTOM_AOT_TYPEID_H);
    let dir = cache.join(format!("include-{}", &hex(&h.finalize())[..16]));
    write_atomic(
        &dir.join("custom_aot_extra.h"),
        CUSTOM_AOT_EXTRA_H.as_bytes(),
    )?;
    write_atomic(
        &dir.join("custom_aot_typeid.h"),
        CUSTOM_AOT_TYPEID_H.as_bytes(),
    )?;
    Ok(dir)
}

pub(crate) use cache::hex;

/// Output of a finished process.
struct Finished {
    status: std::process::ExitStatus,
    output: String,
}

enum RunError {
    Spawn(std::io::Error),
    Timeout,
}

/// Runs `cmd`, killing it after `timeout`; collects stderr then stdout.
fn run_with_timeout(mut cmd: Command, timeout: Duration) -> Result<Finished, RunError> {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().map_err(RunError::Spawn)?;
    let mut out = child.stdout.take().expect("piped");
    let mut err = child.stderr.take().expect("piped");
    let t_out = std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = out.read_to_end(&mut s);
        s
    });
    let t_err = std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = err.read_to_end(&mut s);
        s
    });
    let start = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(st)) => break st,
            Ok(None) if start.elapsed() >= timeout => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(RunError::Timeout);
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(10)),
            Err(e) => return Err(RunError::Spawn(e)),
        }
    };
    let stdout = t_out.join().unwrap_or_default();
    let stderr = t_err.join().unwrap_or_default();
    let mut output = String::from_utf8_lossy(&stderr).into_owned();
    let stdout = String::from_utf8_lossy(&stdout);
    if !stdout.trim().is_empty() {
        output.push_str(&stdout);
    }
    Ok(Finished { status, output })
}

fn command_line(program: &str, args: &[String]) -> String {
    std::iter::once(program.to_string())
        .chain(args.iter().cloned())
        .collect::<Vec<_>>()
        .join(" ")
}

/// `<compiler> --version`, memoized per compiler command.
fn compiler_version(compiler: &str, source: &Path) -> AotResult<String> {
    static VERSIONS: OnceLock<Mutex<std::collections::HashMap<String, String>>> = OnceLock::new();
    let map = VERSIONS.get_or_init(Default::default);
    if let Some(v) = map.lock().unwrap_or_else(|p| p.into_inner()).get(compiler) {
        return Ok(v.clone());
    }
    let mut cmd = Command::new(compiler);
    cmd.arg("--version");
    let finished =
        run_with_timeout(cmd, Duration::from_secs(60)).map_err(|e| AotError::CompilerNotFound {
            source_path: source.to_path_buf(),
            compiler: compiler.to_string(),
            message: match e {
                RunError::Spawn(e) => format!("{e}"),
                RunError::Timeout => "`--version` did not answer within 60 s".to_string(),
            },
        })?;
    if !finished.status.success() {
        return Err(AotError::CompilerNotFound {
            source_path: source.to_path_buf(),
            compiler: compiler.to_string(),
            message: format!("`{compiler} --version` failed: {}", finished.output.trim()),
        });
    }
    let v = finished.output;
    map.lock()
        .unwrap_or_else(|p| p.into_inner())
        .insert(compiler.to_string(), v.clone());
    Ok(v)
}

fn find_nvcc(opts: &CompileOptions) -> Option<String> {
    if let Some(n) = &opts.nvcc {
        return Some(n.clone());
    }
    if let Ok(n) = std::env::var("NVCC") {
        if !n.is_empty() {
            return Some(n);
        }
    }
    let on_path = std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p)
            .map(|d| d.join("nvcc"))
            .find(|c| c.is_file())
    });
    if let Some(p) = on_path {
        return Some(p.to_string_lossy().into_owned());
    }
    let homes = [
        std::env::var_os("CUDA_HOME").map(PathBuf::from),
        std::env::var_os("CUDA_PATH").map(PathBuf::from),
        Some(PathBuf::from("/usr/local/cuda")),
    ];
    homes
        .into_iter()
        .flatten()
        .map(|h| h.join("bin").join("nvcc"))
        .find(|c| c.is_file())
        .map(|p| p.to_string_lossy().into_owned())
}

/// nvcc's `-gencode` value for `arch`: machine code for `sm_<arch>` and the PTX beside it.
/// Machine code runs only on GPUs of its major version (sm_80's not on an sm_90 H100, where
/// the kernel would silently never launch); the driver compiles the PTX for any newer GPU.
fn gencode(arch: &str) -> String {
    format!("arch=compute_{arch},code=[sm_{arch},compute_{arch}]")
}

/// The architecture compiled for when none is named: CUDA device 0's when there is one
/// (its own machine code, no JIT at load), else 80 (70 before CUDA 11).
fn default_cuda_arch(nvcc_version: &str) -> String {
    // `open` says why not (no driver, no device) instead of panicking.
    if let Ok(gpu) = tritium_backend::cuda::CudaDevice::open(0) {
        let (major, minor) = gpu.compute_capability();
        return format!("{major}{minor}");
    }
    if nvcc_version.contains("release 10.") || nvcc_version.contains("release 9.") {
        "70".to_string()
    } else {
        "80".to_string()
    }
}

/// True when nvcc can be found (for tests and examples that skip CUDA otherwise).
pub fn nvcc_available() -> bool {
    find_nvcc(&CompileOptions::default()).is_some()
}

/// Hashes the headers directly beside the source (`-I<srcdir>` makes them part of the build).
fn hash_neighbor_headers(h: &mut Sha256, dir: &Path) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    let mut files: Vec<PathBuf> = rd
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            matches!(
                p.extension().and_then(|e| e.to_str()),
                Some("h" | "hh" | "hpp" | "hxx" | "cuh" | "inc" | "inl")
            ) && p.is_file()
        })
        .collect();
    files.sort();
    for f in files {
        if let Ok(bytes) = std::fs::read(&f) {
            h.update(f.file_name().unwrap_or_default().as_encoded_bytes());
            h.update([0]);
            h.update((bytes.len() as u64).to_le_bytes());
            h.update(&bytes);
        }
    }
}

/// The C++ compiler of user sources: `CompileOptions::cxx`, `$CXX`, or `g++`.
fn cxx(opts: &CompileOptions) -> String {
    opts.cxx
        .clone()
        .or_else(|| std::env::var("CXX").ok().filter(|s| !s.is_empty()))
        .unwrap_or_else(|| "g++".to_string())
}

/// Runs `compiler args… -o <tmp>` and renames the result to `out`; errors name `source`.
fn run_compiler(
    compiler: &str,
    mut args: Vec<String>,
    source: &Path,
    out: &Path,
    timeout: Duration,
) -> AotResult<()> {
    let tmp = temp_path(out);
    args.push("-o".to_string());
    args.push(tmp.display().to_string());
    let line = command_line(compiler, &args);
    let mut cmd = Command::new(compiler);
    cmd.args(&args);
    let finished = match run_with_timeout(cmd, timeout) {
        Ok(f) => f,
        Err(RunError::Spawn(e)) => {
            let _ = std::fs::remove_file(&tmp);
            return Err(AotError::CompilerNotFound {
                source_path: source.to_path_buf(),
                compiler: compiler.to_string(),
                message: e.to_string(),
            });
        }
        Err(RunError::Timeout) => {
            let _ = std::fs::remove_file(&tmp);
            return Err(AotError::CompileTimeout {
                source_path: source.to_path_buf(),
                command: line,
                seconds: timeout.as_secs(),
            });
        }
    };
    if !finished.status.success() || !tmp.is_file() {
        let _ = std::fs::remove_file(&tmp);
        return Err(AotError::CompileFailed {
            source_path: source.to_path_buf(),
            command: line,
            status: finished.status.to_string(),
            output: finished.output,
        });
    }
    std::fs::rename(&tmp, out).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        AotError::io(out, e)
    })
}

/// The isolation worker's sources (`shim/worker.cc`, which includes the shim).
const WORKER_SOURCES: [(&str, &str); 2] = [
    ("worker.cc", include_str!("../shim/worker.cc")),
    ("shim.cc", include_str!("../shim/shim.cc")),
];

/// The executable that runs isolated operators ([`crate::operator::AotOpBuilder::isolated`]),
/// built into the cache with the C++ compiler of user sources (so the standard library's ABI
/// matches theirs), reused while the compiler and the sources are unchanged.
pub(crate) fn worker_executable(opts: &CompileOptions) -> AotResult<PathBuf> {
    let cache = opts.cache_dir();
    std::fs::create_dir_all(&cache).map_err(|e| AotError::io(&cache, e))?;
    let headers = header_dir(&cache)?;
    let compiler = cxx(opts);
    let mut h = Sha256::new();
    h.update(b"tritium-aot-worker-v1\0");
    h.update(compiler.as_bytes());
    h.update(CUSTOM_AOT_EXTRA_H.as_bytes());
    for (name, text) in WORKER_SOURCES {
        h.update(name.as_bytes());
        h.update(text.as_bytes());
    }
    let key = hex(&h.finalize());
    let out = cache.join(format!("tritium-aot-worker-{}", &key[..32]));
    if out.is_file() {
        return Ok(out);
    }
    let dir = cache.join(format!("worker-src-{}", &key[..32]));
    std::fs::create_dir_all(&dir).map_err(|e| AotError::io(&dir, e))?;
    for (name, text) in WORKER_SOURCES {
        write_atomic(&dir.join(name), text.as_bytes())?;
    }
    let main = dir.join("worker.cc");
    let args = vec![
        "-std=c++17".to_string(),
        "-O2".to_string(),
        "-D_GLIBCXX_USE_CXX11_ABI=0".to_string(),
        format!("-I{}", headers.display()),
        main.display().to_string(),
        "-ldl".to_string(),
    ];
    run_compiler(&compiler, args, &main, &out, opts.timeout)?;
    Ok(out)
}

/// Compiles `source` (a `.cc`, `.cpp` or `.cu` file) into a shared library in the cache and
/// returns the library's path; an up-to-date library already in the cache is reused.
///
/// C++: `$CXX -std=c++17 --shared -fPIC -D_GLIBCXX_USE_CXX11_ABI=0 -I<srcdir> -I<headers>`.
/// CUDA: `nvcc --shared -Xcompiler -fPIC -O3 -gencode arch=compute_XX,code=[sm_XX,compute_XX]
/// --use_fast_math --expt-relaxed-constexpr -D_GLIBCXX_USE_CXX11_ABI=0 -I<srcdir> -I<headers>`.
pub fn compile_source(source: &Path, opts: &CompileOptions) -> AotResult<PathBuf> {
    compile_source_impl(source, opts, false)
}

/// Like [`compile_source`], but ignores (and replaces) a cached library.
pub(crate) fn recompile_source(source: &Path, opts: &CompileOptions) -> AotResult<PathBuf> {
    compile_source_impl(source, opts, true)
}

fn compile_source_impl(source: &Path, opts: &CompileOptions, force: bool) -> AotResult<PathBuf> {
    let kind = SourceKind::of(source);
    let src_bytes = std::fs::read(source).map_err(|e| AotError::io(source, e))?;
    let source = std::fs::canonicalize(source).map_err(|e| AotError::io(source, e))?;
    let src_dir = source.parent().unwrap_or(Path::new("/")).to_path_buf();
    let cache = opts.cache_dir();
    std::fs::create_dir_all(&cache).map_err(|e| AotError::io(&cache, e))?;
    let headers = header_dir(&cache)?;

    let (compiler, mut args) = match kind {
        SourceKind::Cpp => {
            let cxx = cxx(opts);
            let args = vec![
                "-std=c++17".to_string(),
                "--shared".to_string(),
                "-fPIC".to_string(),
                "-D_GLIBCXX_USE_CXX11_ABI=0".to_string(),
            ];
            (cxx, args)
        }
        SourceKind::Cuda => {
            let nvcc = find_nvcc(opts).ok_or_else(|| AotError::CompilerNotFound {
                source_path: source.clone(),
                compiler: "nvcc".to_string(),
                message: "nvcc was not found on PATH, in $NVCC, $CUDA_HOME/bin or \
                          /usr/local/cuda/bin; install the CUDA toolkit or set NVCC"
                    .to_string(),
            })?;
            let version = compiler_version(&nvcc, &source)?;
            let arch = opts
                .cuda_arch
                .clone()
                .or_else(|| std::env::var("TRITIUM_CUDA_ARCH").ok())
                .unwrap_or_else(|| default_cuda_arch(&version));
            let args = vec![
                "--shared".to_string(),
                "-Xcompiler".to_string(),
                "-fPIC".to_string(),
                "-O3".to_string(),
                "-gencode".to_string(),
                gencode(&arch),
                "--use_fast_math".to_string(),
                "--expt-relaxed-constexpr".to_string(),
                "-D_GLIBCXX_USE_CXX11_ABI=0".to_string(),
            ];
            (nvcc, args)
        }
        SourceKind::Library => {
            return Err(AotError::BadFuncSpec {
                spec: source.display().to_string(),
                reason: "not a .cc, .cpp or .cu source".to_string(),
            })
        }
    };
    args.push(format!("-I{}", src_dir.display()));
    args.push(format!("-I{}", headers.display()));
    args.extend(opts.flags.iter().cloned());
    let version = compiler_version(&compiler, &source)?;

    let mut h = Sha256::new();
    h.update(b"tritium-aot-compile-v1\0");
    h.update(compiler.as_bytes());
    h.update([0]);
    h.update(version.as_bytes());
    h.update([0]);
    for a in &args {
        // The header dir's name is itself a hash of the header; the source dir is hashed by content.
        if a.starts_with("-I") {
            continue;
        }
        h.update(a.as_bytes());
        h.update([0]);
    }
    h.update(CUSTOM_AOT_EXTRA_H.as_bytes());
    h.update(CUSTOM_AOT_TYPEID_H.as_bytes());
    h.update((src_bytes.len() as u64).to_le_bytes());
    h.update(&src_bytes);
    hash_neighbor_headers(&mut h, &src_dir);
    let key = hex(&h.finalize());
    let stem = source
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "kernel".to_string());
    let out = cache.join(format!("lib{stem}-{}.so", &key[..32]));
    if out.is_file() && !force {
        return Ok(out);
    }

    let mut full = args.clone();
    full.push(source.display().to_string());
    run_compiler(&compiler, full, &source, &out, opts.timeout)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::gencode;

    /// An H100 (sm_90) runs no sm_80 machine code: a library built for sm_80 alone never
    /// launched its kernels there and left its outputs as they were. The PTX beside it is
    /// what a newer GPU compiles.
    #[test]
    fn cuda_libraries_carry_ptx_for_newer_gpus() {
        for arch in ["80", "90"] {
            assert_eq!(
                gencode(arch),
                format!("arch=compute_{arch},code=[sm_{arch},compute_{arch}]")
            );
        }
    }
}
