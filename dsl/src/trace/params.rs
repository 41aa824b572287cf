//! Kernel parameters as generated code declares them, and the specialization of a trace.

use super::builder::{with, Builder};
use super::tile::Tile;
use crate::ir::{Const, DType, HintKind, Loc, Op, Type};

/// What a launch specializes beyond constexprs (Triton's specialization of arguments):
/// integer arguments equal to 1 become compile-time constants, so `stride == 1` loops are
/// contiguous and vectorize; and, for GPU targets, integer arguments divisible by 16 and
/// pointers aligned to 16 bytes are promised so (`multiple_of(16)` hints), so that 16-byte
/// accesses need no run-time test.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Specialization {
    /// `ones[i]` is true when runtime parameter `i` is an integer equal to 1.
    pub ones: Vec<bool>,
    /// `sixteens[i]` is true when runtime parameter `i` is an integer divisible by 16 (not
    /// 1), or a pointer aligned to 16 bytes.
    pub sixteens: Vec<bool>,
}

impl Specialization {
    /// Whether parameter `i` is specialized to 1.
    pub fn is_one(&self, i: usize) -> bool {
        self.ones.get(i).copied().unwrap_or(false)
    }

    /// Whether parameter `i` is promised divisible by 16 (aligned to 16 bytes).
    pub fn is_sixteen(&self, i: usize) -> bool {
        self.sixteens.get(i).copied().unwrap_or(false)
    }

    /// A short form for cache keys and dumps: indices of parameters equal to 1, and of
    /// those divisible by 16 when any is.
    pub fn key(&self) -> String {
        let list = |flags: &[bool]| -> String {
            let at: Vec<String> = (flags.iter().enumerate())
                .filter(|(_, f)| **f)
                .map(|(i, _)| i.to_string())
                .collect();
            at.join(",")
        };
        match self.sixteens.iter().any(|s| *s) {
            true => format!("ones=[{}] d16=[{}]", list(&self.ones), list(&self.sixteens)),
            false => format!("ones=[{}]", list(&self.ones)),
        }
    }
}

/// The location of values a specialization adds.
fn specialization_loc() -> Loc {
    Loc {
        file: "<specialization>".into(),
        line: 0,
        col: 0,
    }
}

/// `v` promised a multiple of 16 (an integer) or aligned to 16 bytes (a pointer).
fn sixteen(b: &mut Builder, v: crate::ir::Value) -> crate::ir::Value {
    let t = b.ty(v).clone();
    let hint = Op::Hint {
        x: v,
        kind: HintKind::MultipleOf,
        values: vec![16],
    };
    b.push1(hint, t, specialization_loc())
}

/// Declares pointer parameter `name` to `pointee` elements.
pub fn ptr_param(name: &str, pointee: DType) -> Tile {
    Tile(with(|b| b.add_param(name, Type::ptr(pointee))))
}

/// Declares pointer parameter `name`, runtime parameter `index`: promised aligned to 16
/// bytes when `spec` says so.
pub fn ptr_param_at(name: &str, pointee: DType, index: usize, spec: &Specialization) -> Tile {
    Tile(with(|b| {
        let v = b.add_param(name, Type::ptr(pointee));
        match spec.is_sixteen(index) {
            true => sixteen(b, v),
            false => v,
        }
    }))
}

/// Declares runtime scalar parameter `name`; returns the constant 1, or the parameter
/// promised divisible by 16, when `spec` says so.
pub fn scalar_param(name: &str, dtype: DType, index: usize, spec: &Specialization) -> Tile {
    Tile(with(|b| {
        let v = b.add_param(name, Type::scalar(dtype));
        if spec.is_one(index) && dtype.is_int() {
            b.constant(Const::Int(1), Type::scalar(dtype), &specialization_loc())
        } else if spec.is_sixteen(index) && dtype.is_int() {
            sixteen(b, v)
        } else {
            v
        }
    }))
}
