//! The one error type of AOT operators.

use std::path::PathBuf;

/// Everything that can go wrong while defining, compiling, loading, inferring, running or
/// differentiating an AOT operator. Each variant names what was wrong and where (the source or
/// library path, the symbol, the buffer), so the message alone is enough to act on.
#[derive(Debug, thiserror::Error)]
pub enum AotError {
    /// The `"path:Func"` string could not be understood.
    #[error("AOT function `{spec}`: {reason}")]
    BadFuncSpec {
        /// The string as given.
        spec: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The operator definition is inconsistent (e.g. shapes and dtypes for different output counts).
    #[error("AOT operator `{symbol}`: {message}")]
    Definition {
        /// The operator's main symbol.
        symbol: String,
        /// What is inconsistent.
        message: String,
    },
    /// The C++ compiler or nvcc could not be started.
    #[error("compiling {source_path}: cannot run compiler `{compiler}`: {message}")]
    CompilerNotFound {
        /// The source that needed compiling.
        source_path: PathBuf,
        /// The compiler command that was tried.
        compiler: String,
        /// Why it could not run and how to fix it.
        message: String,
    },
    /// The compiler ran and failed.
    #[error("compiling {source_path} failed ({status}): {command}\n{output}")]
    CompileFailed {
        /// The source being compiled.
        source_path: PathBuf,
        /// The full command line.
        command: String,
        /// The exit status.
        status: String,
        /// The compiler's stderr and stdout.
        output: String,
    },
    /// The compiler exceeded the time limit and was killed.
    #[error("compiling {source_path} took longer than {seconds} s and was stopped: {command}")]
    CompileTimeout {
        /// The source being compiled.
        source_path: PathBuf,
        /// The command line.
        command: String,
        /// The limit.
        seconds: u64,
    },
    /// `TRITIUM_AOT_WHITELIST` is set and the library is outside every listed directory.
    #[error(
        "library {} is not inside any directory of TRITIUM_AOT_WHITELIST ({}); the runtime's cache {} is always allowed",
        library.display(),
        whitelist.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(":"),
        cache_dir.display()
    )]
    NotWhitelisted {
        /// The canonical path of the library that was refused.
        library: PathBuf,
        /// The whitelist as configured.
        whitelist: Vec<PathBuf>,
        /// The compile cache, always allowed.
        cache_dir: PathBuf,
    },
    /// `dlopen` failed.
    #[error("loading library {}: {message}", library.display())]
    LoadFailed {
        /// The library path.
        library: PathBuf,
        /// The loader's message.
        message: String,
    },
    /// A required symbol is not exported by the library.
    #[error("library {} has no symbol `{symbol}` (is it declared extern \"C\"?)", library.display())]
    MissingSymbol {
        /// The library path.
        library: PathBuf,
        /// The missing symbol.
        symbol: String,
    },
    /// An isolated operator's worker process crashed, exited or ran past its timeout (the
    /// next call starts a fresh worker), or could not be started.
    #[error("`{function}` {message}")]
    Worker {
        /// The user function that was running.
        function: String,
        /// What happened (the signal, the exit status, the timeout).
        message: String,
    },
    /// A user function threw a C++ exception (caught by the shim).
    #[error("`{function}` threw a C++ exception: {what}")]
    CppException {
        /// The user function (e.g. `CustomAddInit`).
        function: String,
        /// The exception's `what()`.
        what: String,
    },
    /// A user function (`Func` or `FuncInit`) returned a non-zero status.
    #[error("`{function}` returned error code {code}")]
    ReturnCode {
        /// The user function.
        function: String,
        /// Its return value.
        code: i32,
    },
    /// Output shape or dtype inference failed or gave something unusable.
    #[error("AOT operator `{symbol}`: inference: {message}")]
    Inference {
        /// The operator's main symbol.
        symbol: String,
        /// What went wrong.
        message: String,
    },
    /// An attribute is missing or has another type than requested.
    #[error("attribute `{name}`: {message}")]
    Attr {
        /// The attribute's name.
        name: String,
        /// What went wrong.
        message: String,
    },
    /// The inputs given to a call do not fit the operator.
    #[error("AOT operator `{symbol}`: input: {message}")]
    Input {
        /// The operator's main symbol.
        symbol: String,
        /// What is wrong.
        message: String,
    },
    /// Checked mode found bytes written past the end of an output or workspace.
    #[error(
        "`{function}` wrote past the end of {buffer} ({len} bytes): guard byte {offset} after the end was overwritten"
    )]
    GuardOverwritten {
        /// The kernel.
        function: String,
        /// Which buffer (`output 0`, `workspace 1`, …).
        buffer: String,
        /// The buffer's size in bytes.
        len: usize,
        /// First overwritten guard byte, counted from the end of the buffer.
        offset: usize,
    },
    /// A data-dependent output shape written by the kernel is invalid.
    #[error("`{function}`: output {output}: shape buffer {written:?} does not fit the upper bound {bound:?}")]
    BadShapeBuffer {
        /// The kernel.
        function: String,
        /// Which output.
        output: usize,
        /// What the kernel wrote (`[ndim, d0, …]`).
        written: Vec<u64>,
        /// The upper-bound shape the output was allocated with.
        bound: Vec<usize>,
    },
    /// A buffer the runtime must allocate is too large (or memory ran out).
    #[error("`{function}`: cannot allocate {what} of {bytes} bytes")]
    Alloc {
        /// The kernel.
        function: String,
        /// Which buffer (`output 0`, `workspace 1`, …).
        what: String,
        /// The requested size (saturated on overflow).
        bytes: usize,
    },
    /// A tensor has another dtype than requested.
    #[error("dtype mismatch: expected {expected}, found {found}")]
    DType {
        /// The requested dtype.
        expected: String,
        /// The tensor's dtype.
        found: String,
    },
    /// A tensor's shape and data do not agree, or shapes do not match.
    #[error("shape: {0}")]
    Shape(String),
    /// A serialized package is malformed.
    #[error("AOT package: {0}")]
    Package(String),
    /// Reverse-mode differentiation failed.
    #[error("grad: {0}")]
    Grad(String),
    /// CUDA is unavailable or failed.
    #[error("CUDA: {0}")]
    Cuda(String),
    /// An I/O error with the path it concerns.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
}

impl AotError {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        AotError::Io {
            path: path.into(),
            source,
        }
    }
}

/// `Result` with [`AotError`].
pub type AotResult<T> = std::result::Result<T, AotError>;
