//! Runtime values: one ndarray per SSA value, in the representation of its element kind.
//!
//! The dtype is not stored here; it is always read from the function's types. Each
//! representation holds every dtype of its kind exactly:
//! - floats (f16, bf16, f32, f64) as `f64` holding a value already rounded to the dtype,
//! - signed integers as `i64` sign-extended from the dtype's width,
//! - unsigned integers as `u64` zero-extended,
//! - bools as `bool`, pointers as byte addresses.

use ndarray::{ArrayD, IxDyn};
use tritium_dsl::ir::{DType, Elem, Type};

/// A scalar (0-D array) or a tile, in the representation of its element kind.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Data {
    /// f16, bf16, f32, f64.
    Float(ArrayD<f64>),
    /// i8..i64, sign-extended.
    Int(ArrayD<i64>),
    /// u8..u64, zero-extended.
    UInt(ArrayD<u64>),
    /// bool.
    Bool(ArrayD<bool>),
    /// Pointers (byte addresses).
    Ptr(ArrayD<usize>),
}

/// The representation a dtype uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Repr {
    Float,
    Int,
    UInt,
    Bool,
    Ptr,
}

impl Repr {
    /// The representation of numbers of `d`.
    pub(crate) fn of(d: DType) -> Repr {
        if d.is_float() {
            Repr::Float
        } else if d.is_signed_int() {
            Repr::Int
        } else if d.is_unsigned_int() {
            Repr::UInt
        } else {
            Repr::Bool
        }
    }

    /// The representation of the elements of a type.
    pub(crate) fn of_elem(e: Elem) -> Repr {
        match e {
            Elem::Scalar(d) => Repr::of(d),
            Elem::Ptr(_) => Repr::Ptr,
        }
    }
}

/// Applies the same generic expression to the array inside any variant and rewraps it.
macro_rules! map_data {
    ($data:expr, |$a:ident| $body:expr) => {
        match $data {
            Data::Float($a) => Data::Float($body),
            Data::Int($a) => Data::Int($body),
            Data::UInt($a) => Data::UInt($body),
            Data::Bool($a) => Data::Bool($body),
            Data::Ptr($a) => Data::Ptr($body),
        }
    };
}

/// Like [`map_data`] for expressions that may fail (`Option`).
macro_rules! try_map_data {
    ($data:expr, |$a:ident| $body:expr) => {
        match $data {
            Data::Float($a) => $body.map(Data::Float),
            Data::Int($a) => $body.map(Data::Int),
            Data::UInt($a) => $body.map(Data::UInt),
            Data::Bool($a) => $body.map(Data::Bool),
            Data::Ptr($a) => $body.map(Data::Ptr),
        }
    };
}

impl Data {
    /// The shape (`[]` for a scalar).
    pub(crate) fn shape(&self) -> &[usize] {
        match self {
            Data::Float(a) => a.shape(),
            Data::Int(a) => a.shape(),
            Data::UInt(a) => a.shape(),
            Data::Bool(a) => a.shape(),
            Data::Ptr(a) => a.shape(),
        }
    }

    /// The representation of this value.
    pub(crate) fn repr(&self) -> Repr {
        match self {
            Data::Float(_) => Repr::Float,
            Data::Int(_) => Repr::Int,
            Data::UInt(_) => Repr::UInt,
            Data::Bool(_) => Repr::Bool,
            Data::Ptr(_) => Repr::Ptr,
        }
    }

    /// True when the value has the representation and shape `ty` demands.
    pub(crate) fn fits(&self, ty: &Type) -> bool {
        self.repr() == Repr::of_elem(ty.elem) && self.shape() == ty.shape.as_slice()
    }

    /// The first element as an exact integer (for loop bounds and the like).
    pub(crate) fn first_int(&self) -> Option<i128> {
        match self {
            Data::Int(a) => a.iter().next().map(|&v| v as i128),
            Data::UInt(a) => a.iter().next().map(|&v| v as i128),
            Data::Bool(a) => a.iter().next().map(|&v| v as i128),
            _ => None,
        }
    }

    /// The first lane (row-major) active in `mask` where `self` and `other` differ in
    /// bits (any NaN equals any NaN: payloads need not survive a narrowing store).
    pub(crate) fn first_difference(
        &self,
        other: &Data,
        mask: Option<&ArrayD<bool>>,
    ) -> Option<usize> {
        fn first<T>(
            a: &ArrayD<T>,
            b: &ArrayD<T>,
            mask: Option<&ArrayD<bool>>,
            same: impl Fn(&T, &T) -> bool,
        ) -> Option<usize> {
            let mut active = mask.map(|m| m.iter());
            a.iter().zip(b.iter()).position(|(x, y)| {
                let on = active.as_mut().is_none_or(|m| m.next() == Some(&true));
                on && !same(x, y)
            })
        }
        match (self, other) {
            (Data::Float(a), Data::Float(b)) => first(a, b, mask, |x: &f64, y: &f64| {
                x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan())
            }),
            (Data::Int(a), Data::Int(b)) => first(a, b, mask, PartialEq::eq),
            (Data::UInt(a), Data::UInt(b)) => first(a, b, mask, PartialEq::eq),
            (Data::Bool(a), Data::Bool(b)) => first(a, b, mask, PartialEq::eq),
            (Data::Ptr(a), Data::Ptr(b)) => first(a, b, mask, PartialEq::eq),
            _ => Some(0),
        }
    }

    /// The first element of a bool value.
    pub(crate) fn first_bool(&self) -> Option<bool> {
        match self {
            Data::Bool(a) => a.iter().next().copied(),
            _ => None,
        }
    }

    /// A 0-D pointer value.
    pub(crate) fn ptr_scalar(addr: usize) -> Data {
        Data::Ptr(ArrayD::from_elem(IxDyn(&[]), addr))
    }

    /// A 0-D i32 value.
    pub(crate) fn i32_scalar(v: i32) -> Data {
        Data::Int(ArrayD::from_elem(IxDyn(&[]), v as i64))
    }

    /// Repeats the only element of a scalar to `shape`; `None` when `self` is not a scalar.
    pub(crate) fn splat(&self, shape: &[usize]) -> Option<Data> {
        try_map_data!(self, |a| a
            .iter()
            .next()
            .map(|v| ArrayD::from_elem(IxDyn(shape), *v)))
    }

    /// Numpy broadcasting (size-1 dims and missing leading dims) to `shape`.
    pub(crate) fn broadcast(&self, shape: &[usize]) -> Option<Data> {
        try_map_data!(self, |a| a.broadcast(IxDyn(shape)).map(|v| v.to_owned()))
    }

    /// Inserts a size-1 dim at `axis`.
    pub(crate) fn expand_dims(&self, axis: usize) -> Option<Data> {
        if axis > self.shape().len() {
            return None;
        }
        Some(map_data!(self, |a| a
            .clone()
            .insert_axis(ndarray::Axis(axis))))
    }

    /// The same elements in row-major order with another shape.
    pub(crate) fn reshape(&self, shape: &[usize]) -> Option<Data> {
        try_map_data!(self, |a| a
            .to_shape((IxDyn(shape), ndarray::Order::RowMajor))
            .ok()
            .map(|v| v.into_owned()))
    }

    /// The elements in reverse order along `axis`.
    pub(crate) fn flip(&self, axis: usize) -> Option<Data> {
        if axis >= self.shape().len() {
            return None;
        }
        Some(map_data!(self, |a| {
            let mut v = a.view();
            v.invert_axis(ndarray::Axis(axis));
            v.as_standard_layout().into_owned()
        }))
    }

    /// Elements picked along `axis` by the integer `index` (an index outside the axis gives
    /// zero: the IR's `gather`).
    pub(crate) fn gather(&self, index: &Data, axis: usize) -> Option<Data> {
        let positions: ArrayD<i128> = match index {
            Data::Int(i) => i.mapv(|v| v as i128),
            Data::UInt(i) => i.mapv(|v| v as i128),
            _ => return None,
        };
        let n = *self.shape().get(axis)? as i128;
        try_map_data!(self, |a| {
            let pick = |idx: IxDyn| {
                let p = positions[&idx];
                let mut at = idx.clone();
                at[axis] = p.clamp(0, n - 1) as usize;
                (p >= 0 && p < n).then(|| a[&at])
            };
            Some(ArrayD::from_shape_fn(positions.raw_dim(), |idx| {
                pick(idx).unwrap_or_default()
            }))
        })
    }

    /// Result dim `i` is dim `dims[i]` (the result is in standard row-major layout).
    pub(crate) fn permute(&self, dims: &[u32]) -> Option<Data> {
        let mut sorted = dims.to_vec();
        sorted.sort_unstable();
        if !sorted.iter().copied().eq(0..self.shape().len() as u32) {
            return None;
        }
        let axes: Vec<usize> = dims.iter().map(|&d| d as usize).collect();
        Some(map_data!(self, |a| a
            .view()
            .permuted_axes(axes.clone())
            .as_standard_layout()
            .into_owned()))
    }
}
