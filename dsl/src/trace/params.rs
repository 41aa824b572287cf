//! Kernel parameters as generated code declares them, and the specialization of a trace.

use super::builder::with;
use super::tile::Tile;
use crate::ir::{Const, DType, Loc, Type};

/// What a launch specializes beyond constexprs: integer arguments equal to 1 become
/// compile-time constants (Triton's specialization of strides), so `stride == 1` loops
/// are contiguous and vectorize.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Specialization {
    /// `ones[i]` is true when runtime parameter `i` is an integer equal to 1.
    pub ones: Vec<bool>,
}

impl Specialization {
    /// Whether parameter `i` is specialized to 1.
    pub fn is_one(&self, i: usize) -> bool {
        self.ones.get(i).copied().unwrap_or(false)
    }

    /// A short form for cache keys and dumps: indices of parameters equal to 1.
    pub fn key(&self) -> String {
        let ones: Vec<String> = self
            .ones
            .iter()
            .enumerate()
            .filter(|(_, o)| **o)
            .map(|(i, _)| i.to_string())
            .collect();
        format!("ones=[{}]", ones.join(","))
    }
}

/// Declares pointer parameter `name` to `pointee` elements.
pub fn ptr_param(name: &str, pointee: DType) -> Tile {
    Tile(with(|b| b.add_param(name, Type::ptr(pointee))))
}

/// Declares runtime scalar parameter `name`; returns the constant 1 when `spec` says so.
pub fn scalar_param(name: &str, dtype: DType, index: usize, spec: &Specialization) -> Tile {
    Tile(with(|b| {
        let v = b.add_param(name, Type::scalar(dtype));
        if spec.is_one(index) && dtype.is_int() {
            let loc = Loc {
                file: "<specialization>".into(),
                line: 0,
                col: 0,
            };
            b.constant(Const::Int(1), Type::scalar(dtype), &loc)
        } else {
            v
        }
    }))
}
