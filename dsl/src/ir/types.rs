//! Value types: scalars, pointers and tiles of either, with static shapes.

use super::DType;
use std::fmt;

/// What one element of a value is: a number or a pointer to numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Elem {
    /// A number of this dtype.
    Scalar(DType),
    /// A pointer to elements of this dtype (global memory).
    Ptr(DType),
}

impl Elem {
    /// The number dtype, or `None` for pointers.
    pub fn dtype(self) -> Option<DType> {
        match self {
            Elem::Scalar(d) => Some(d),
            Elem::Ptr(_) => None,
        }
    }

    /// The pointee dtype, or `None` for numbers.
    pub fn pointee(self) -> Option<DType> {
        match self {
            Elem::Ptr(d) => Some(d),
            Elem::Scalar(_) => None,
        }
    }
}

impl fmt::Display for Elem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Elem::Scalar(d) => write!(f, "{d}"),
            Elem::Ptr(d) => write!(f, "ptr<{d}>"),
        }
    }
}

/// The type of an SSA value: an element kind and a static shape (empty for a scalar).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Type {
    /// Element kind.
    pub elem: Elem,
    /// Static shape; `[]` is a scalar.
    pub shape: Vec<usize>,
}

impl Type {
    /// A scalar number.
    pub fn scalar(dtype: DType) -> Type {
        Type {
            elem: Elem::Scalar(dtype),
            shape: vec![],
        }
    }

    /// A scalar pointer.
    pub fn ptr(pointee: DType) -> Type {
        Type {
            elem: Elem::Ptr(pointee),
            shape: vec![],
        }
    }

    /// A tile of `elem` with `shape`.
    pub fn tile(elem: Elem, shape: Vec<usize>) -> Type {
        Type { elem, shape }
    }

    /// The same element kind with another shape.
    pub fn with_shape(&self, shape: Vec<usize>) -> Type {
        Type {
            elem: self.elem,
            shape,
        }
    }

    /// The same shape with another element kind.
    pub fn with_elem(&self, elem: Elem) -> Type {
        Type {
            elem,
            shape: self.shape.clone(),
        }
    }

    /// True when the shape is empty.
    pub fn is_scalar(&self) -> bool {
        self.shape.is_empty()
    }

    /// Number of elements (1 for a scalar). It saturates at `usize::MAX`, which only a type
    /// the verifier rejects reaches.
    pub fn numel(&self) -> usize {
        self.shape
            .iter()
            .try_fold(1usize, |n, d| n.checked_mul(*d))
            .unwrap_or(usize::MAX)
    }

    /// Rank (0 for a scalar).
    pub fn rank(&self) -> usize {
        self.shape.len()
    }

    /// The number dtype, if this is not a pointer type.
    pub fn dtype(&self) -> Option<DType> {
        self.elem.dtype()
    }
}

impl fmt::Display for Type {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.shape.is_empty() {
            return write!(f, "{}", self.elem);
        }
        f.write_str("tile<")?;
        for d in &self.shape {
            write!(f, "{d}x")?;
        }
        write!(f, "{}>", self.elem)
    }
}

/// Numpy broadcasting of two shapes, or `None` when they are incompatible.
pub fn broadcast_shapes(a: &[usize], b: &[usize]) -> Option<Vec<usize>> {
    let rank = a.len().max(b.len());
    let mut out = vec![0; rank];
    for i in 0..rank {
        let da = if i + a.len() >= rank {
            a[i + a.len() - rank]
        } else {
            1
        };
        let db = if i + b.len() >= rank {
            b[i + b.len() - rank]
        } else {
            1
        };
        out[i] = match (da, db) {
            (x, y) if x == y => x,
            (1, y) => y,
            (x, 1) => x,
            _ => return None,
        };
    }
    Some(out)
}
