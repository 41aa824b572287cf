//! The backend's one error type.

/// Everything that can go wrong in the backend: compiling, caching, launching.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An error raised while tracing or verifying the kernel IR.
    #[error(transparent)]
    Dsl(#[from] tritium_dsl::Error),
    /// A launch argument does not match the kernel (dtype, length, borrow kind, grid).
    #[error("launch of kernel `{kernel}`: {message}")]
    Launch {
        /// The kernel being launched.
        kernel: String,
        /// What was wrong.
        message: String,
    },
    /// LLVM failed to compile or load a kernel.
    #[error("compiling kernel `{kernel}`: {message}")]
    Compile {
        /// The kernel being compiled.
        kernel: String,
        /// LLVM's message.
        message: String,
    },
    /// A checked-mode or interpreter run found an invalid memory access or another runtime fault.
    #[error("kernel `{kernel}` at {location}: {message}")]
    Runtime {
        /// The kernel that faulted.
        kernel: String,
        /// Kernel-source location `file:line:col` of the faulting op.
        location: String,
        /// What happened.
        message: String,
    },
    /// A device is unavailable or failed.
    #[error("device: {0}")]
    Device(String),
    /// An I/O error with the path it concerns.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory.
        path: std::path::PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
}

/// The backend's `Result`.
pub type Result<T, E = Error> = std::result::Result<T, E>;
