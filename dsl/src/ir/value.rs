//! SSA values and source locations.

use std::fmt;

/// An SSA value: an index into [`Function::types`](super::Function::types).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Value(pub u32);

impl Value {
    /// The index as `usize`.
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "%{}", self.0)
    }
}

/// A kernel-source location, `file:line:col`, carried by every op.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct Loc {
    /// Source file as the compiler names it (e.g. `kernels/src/softmax.rs`).
    pub file: String,
    /// 1-based line.
    pub line: u32,
    /// 1-based column.
    pub col: u32,
}

impl Loc {
    /// The location of a `#[track_caller]` caller.
    pub fn from_caller(loc: &std::panic::Location<'_>) -> Loc {
        Loc {
            file: loc.file().to_string(),
            line: loc.line(),
            col: loc.column(),
        }
    }
}

impl fmt::Display for Loc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}", self.file, self.line, self.col)
    }
}
