//! How a definition decides its outputs' shapes and dtypes: fixed, a Rust closure, or the
//! library's `FuncInferShape`/`FuncInferType`. Fixed rules are what a package can carry.

use std::sync::Arc;

use crate::attrs::Attrs;
use crate::dtype::DType;
use crate::tensor::Shape;

/// Output-shape inference closure: input shapes (with `-1`/`[-2]` when dynamic) and attributes
/// to output shapes.
pub type ShapeFn = dyn Fn(&[Shape], &Attrs) -> Result<Vec<Shape>, String> + Send + Sync;
/// Output-dtype inference closure.
pub type DTypeFn = dyn Fn(&[DType], &Attrs) -> Result<Vec<DType>, String> + Send + Sync;

/// Where output shapes come from.
#[derive(Clone)]
pub(super) enum ShapeRule {
    /// The library's `FuncInferShape`.
    Library,
    Fixed(Vec<Shape>),
    Fn(Arc<ShapeFn>),
}

/// Where output dtypes come from.
#[derive(Clone)]
pub(super) enum DTypeRule {
    /// The library's `FuncInferType`.
    Library,
    Fixed(Vec<DType>),
    Fn(Arc<DTypeFn>),
}

impl ShapeRule {
    /// The fixed shapes, if the rule is fixed.
    pub(super) fn fixed(&self) -> Option<&[Shape]> {
        match self {
            ShapeRule::Fixed(v) => Some(v),
            _ => None,
        }
    }
}

impl DTypeRule {
    /// The fixed dtypes, if the rule is fixed.
    pub(super) fn fixed(&self) -> Option<&[DType]> {
        match self {
            DTypeRule::Fixed(v) => Some(v),
            _ => None,
        }
    }
}
