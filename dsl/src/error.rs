//! The DSL's one error type.

/// Errors raised while tracing, verifying, printing or parsing kernel IR.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// A kernel-source construct is ill-typed or unsupported; names the user's `file:line:col`.
    #[error("{location}: {message}")]
    Trace {
        /// `file:line:col` in the kernel source.
        location: String,
        /// What was wrong.
        message: String,
    },
    /// The verifier rejected the IR.
    #[error("{location}: verifier: {message}")]
    Verify {
        /// `file:line:col` of the offending op.
        location: String,
        /// What was wrong.
        message: String,
    },
    /// The IR text could not be parsed.
    #[error("IR text line {line}: {message}")]
    Parse {
        /// 1-based line in the text.
        line: usize,
        /// What was wrong.
        message: String,
    },
}

/// The DSL's `Result`.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// The error with the kernel named in its message (a launch knows which kernel it
    /// traced; the tracer's messages name only the line).
    pub fn in_kernel(self, kernel: &str) -> Error {
        let tag = format!("kernel `{kernel}`");
        let name = |message: String| {
            if message.contains(&tag) {
                message
            } else {
                format!("{tag}: {message}")
            }
        };
        match self {
            Error::Trace { location, message } => Error::Trace {
                location,
                message: name(message),
            },
            Error::Verify { location, message } => Error::Verify {
                location,
                message: name(message),
            },
            e => e,
        }
    }
}
