//! What a definition names: the `"path:Func"` string, and the target the operator runs on.

use std::path::PathBuf;

use crate::compile::SourceKind;
use crate::error::{AotError, AotResult};

/// A parsed `"path:Func"`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FuncSpec {
    /// The source or library path.
    pub path: PathBuf,
    /// The main function's symbol.
    pub symbol: String,
}

impl FuncSpec {
    /// Parses `"path/to/file.cc:Func"` (the last `:` separates the symbol).
    pub fn parse(spec: &str) -> AotResult<FuncSpec> {
        let bad = |reason: &str| AotError::BadFuncSpec {
            spec: spec.to_string(),
            reason: reason.to_string(),
        };
        let (path, symbol) = spec
            .rsplit_once(':')
            .ok_or_else(|| bad("expected \"path:Func\" (e.g. \"add.cc:CustomAdd\")"))?;
        if path.is_empty() {
            return Err(bad("the path before ':' is empty"));
        }
        let mut chars = symbol.chars();
        let ok = matches!(chars.next(), Some(c) if c == '_' || c.is_ascii_alphabetic())
            && chars.all(|c| c == '_' || c.is_ascii_alphanumeric());
        if !ok {
            return Err(bad("the function name after ':' is not a C identifier"));
        }
        Ok(FuncSpec {
            path: PathBuf::from(path),
            symbol: symbol.to_string(),
        })
    }

    /// What the path names (source or library), by suffix.
    pub fn kind(&self) -> SourceKind {
        SourceKind::of(&self.path)
    }
}

/// Where an operator runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// Host memory, `stream` is null.
    Cpu,
    /// A CUDA source (`.cu`): device memory and a CUDA stream.
    Cuda,
}
