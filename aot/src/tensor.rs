//! Host tensors: an owned, dtype-erased [`Tensor`], borrowed [`TensorRef`] inputs, shapes with
//! MindSpore's dynamic markers, and the [`Inputs`] conversions that let a call take ndarray
//! arrays directly.

use std::fmt;

use ndarray::{ArrayBase, ArrayD, ArrayViewD, Data, Dimension, IxDyn};

use super::dtype::{DType, Element, MindSporeDType};
use super::error::{AotError, AotResult};

/// Runs `$body` with `$T` bound to the Rust element type of `$dtype`.
macro_rules! with_dtype {
    ($dtype:expr, $T:ident, $body:block) => {{
        use $crate::dtype::DType as D;
        match $dtype {
            D::Bool => {
                type $T = bool;
                $body
            }
            D::I8 => {
                type $T = i8;
                $body
            }
            D::I16 => {
                type $T = i16;
                $body
            }
            D::I32 => {
                type $T = i32;
                $body
            }
            D::I64 => {
                type $T = i64;
                $body
            }
            D::U8 => {
                type $T = u8;
                $body
            }
            D::U16 => {
                type $T = u16;
                $body
            }
            D::U32 => {
                type $T = u32;
                $body
            }
            D::U64 => {
                type $T = u64;
                $body
            }
            D::F16 => {
                type $T = half::f16;
                $body
            }
            D::BF16 => {
                type $T = half::bf16;
                $body
            }
            D::F32 => {
                type $T = f32;
                $body
            }
            D::F64 => {
                type $T = f64;
                $body
            }
            D::F8E4M3 => {
                type $T = tritium_dsl::trace::F8E4M3;
                $body
            }
            D::F8E5M2 => {
                type $T = tritium_dsl::trace::F8E5M2;
                $body
            }
            D::F8E4B15 => {
                type $T = tritium_dsl::trace::F8E4B15;
                $body
            }
        }
    }};
}

/// A shape as inference sees it: dimensions may be [`DYN_DIM`] (`-1`, unknown size), and the
/// whole shape may be `[DYN_RANK]` (`[-2]`, unknown rank), as in MindSpore.
pub type Shape = Vec<i64>;

/// An unknown dimension in a [`Shape`].
pub const DYN_DIM: i64 = -1;
/// The single dimension of a [`Shape`] whose rank is unknown: `[DYN_RANK]`.
pub const DYN_RANK: i64 = -2;

/// A shape and dtype without data: what inference works on.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TensorSpec {
    /// The shape; may hold [`DYN_DIM`] or be `[DYN_RANK]`.
    pub shape: Shape,
    /// The element type.
    pub dtype: DType,
}

impl TensorSpec {
    /// A spec from a shape and dtype.
    pub fn new(shape: impl Into<Shape>, dtype: DType) -> Self {
        TensorSpec {
            shape: shape.into(),
            dtype,
        }
    }

    /// A spec of unknown rank (`[-2]`).
    pub fn dynamic_rank(dtype: DType) -> Self {
        TensorSpec {
            shape: vec![DYN_RANK],
            dtype,
        }
    }

    /// True when every dimension is known.
    pub fn is_static(&self) -> bool {
        self.shape.iter().all(|&d| d >= 0)
    }
}

/// 8-byte aligned byte storage, so every dtype can be viewed in place.
#[derive(Clone, Default)]
struct Bytes {
    words: Vec<u64>,
    len: usize,
}

impl Bytes {
    fn zeroed(len: usize) -> Self {
        Bytes {
            words: vec![0; len.div_ceil(8)],
            len,
        }
    }

    fn as_slice(&self) -> &[u8] {
        // SAFETY: `words` holds at least `len` initialized bytes.
        unsafe { std::slice::from_raw_parts(self.words.as_ptr().cast(), self.len) }
    }

    fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as above, uniquely borrowed.
        unsafe { std::slice::from_raw_parts_mut(self.words.as_mut_ptr().cast(), self.len) }
    }
}

/// An owned host tensor of any [`DType`], in C (row-major) order.
///
/// Build one from an ndarray array (`Tensor::from(array)`), read it back with
/// [`Tensor::to_array`] or [`Tensor::view`].
#[derive(Clone)]
pub struct Tensor {
    dtype: DType,
    shape: Vec<usize>,
    bytes: Bytes,
}

fn numel(shape: &[usize]) -> usize {
    shape.iter().product()
}

fn elem_bytes<T: Element>(data: &[T]) -> &[u8] {
    // SAFETY: every `Element` is plain old data without padding.
    unsafe { std::slice::from_raw_parts(data.as_ptr().cast(), std::mem::size_of_val(data)) }
}

impl Tensor {
    /// A zero-filled tensor.
    pub fn zeros(dtype: DType, shape: &[usize]) -> Tensor {
        Tensor {
            dtype,
            shape: shape.to_vec(),
            bytes: Bytes::zeroed(numel(shape) * dtype.size_bytes()),
        }
    }

    /// A tensor from raw little-endian element bytes; `bool` bytes are normalized to 0/1.
    pub fn from_bytes(dtype: DType, shape: &[usize], bytes: &[u8]) -> AotResult<Tensor> {
        let want = numel(shape) * dtype.size_bytes();
        if bytes.len() != want {
            return Err(AotError::Shape(format!(
                "{} bytes for a {} tensor of shape {shape:?}, which needs {want}",
                bytes.len(),
                dtype.ms_name()
            )));
        }
        let mut t = Tensor::zeros(dtype, shape);
        t.bytes.as_mut_slice().copy_from_slice(bytes);
        t.normalize_bools();
        Ok(t)
    }

    /// A tensor from a vector in C order.
    pub fn from_vec<T: Element>(shape: &[usize], data: Vec<T>) -> AotResult<Tensor> {
        if data.len() != numel(shape) {
            return Err(AotError::Shape(format!(
                "{} elements for shape {shape:?}",
                data.len()
            )));
        }
        Tensor::from_bytes(T::DTYPE, shape, elem_bytes(&data))
    }

    /// A copy of an ndarray array (any layout).
    pub fn from_array<T: Element, S: Data<Elem = T>, D: Dimension>(a: &ArrayBase<S, D>) -> Tensor {
        let shape = a.shape().to_vec();
        let mut t = Tensor::zeros(T::DTYPE, &shape);
        match a.as_slice() {
            Some(s) => t.bytes.as_mut_slice().copy_from_slice(elem_bytes(s)),
            None => {
                let v: Vec<T> = a.iter().copied().collect();
                t.bytes.as_mut_slice().copy_from_slice(elem_bytes(&v));
            }
        }
        t
    }

    /// A tensor of ones (or `true`) of this tensor's shape and dtype.
    pub fn ones_like(&self) -> Tensor {
        let mut t = Tensor::zeros(self.dtype, &self.shape);
        let n = t.len();
        with_dtype!(self.dtype, T, {
            let s = t.as_mut_slice_of::<T>();
            for v in s.iter_mut().take(n) {
                *v = T::from_f64(1.0);
            }
        });
        t
    }

    /// A tensor of zeros of this tensor's shape and dtype.
    pub fn zeros_like(&self) -> Tensor {
        Tensor::zeros(self.dtype, &self.shape)
    }

    /// The element type.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// The shape.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// The shape and dtype.
    pub fn spec(&self) -> TensorSpec {
        TensorSpec::new(
            self.shape.iter().map(|&d| d as i64).collect::<Vec<_>>(),
            self.dtype,
        )
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        numel(&self.shape)
    }

    /// True when the tensor has no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The raw element bytes in C order.
    pub fn as_bytes(&self) -> &[u8] {
        self.bytes.as_slice()
    }

    pub(crate) fn as_mut_bytes(&mut self) -> &mut [u8] {
        self.bytes.as_mut_slice()
    }

    fn check<T: Element>(&self) -> AotResult<()> {
        if T::DTYPE != self.dtype {
            return Err(AotError::DType {
                expected: T::DTYPE.ms_name().to_string(),
                found: self.dtype.ms_name().to_string(),
            });
        }
        Ok(())
    }

    fn as_slice_of<T: Element>(&self) -> &[T] {
        // SAFETY: caller checked the dtype; storage is 8-byte aligned and holds len elements;
        // bool bytes are kept 0/1.
        unsafe { std::slice::from_raw_parts(self.bytes.words.as_ptr().cast(), self.len()) }
    }

    fn as_mut_slice_of<T: Element>(&mut self) -> &mut [T] {
        let n = self.len();
        // SAFETY: as in `as_slice_of`.
        unsafe { std::slice::from_raw_parts_mut(self.bytes.words.as_mut_ptr().cast(), n) }
    }

    /// The elements as a slice; errors when `T` is not the tensor's dtype.
    pub fn as_slice<T: Element>(&self) -> AotResult<&[T]> {
        self.check::<T>()?;
        Ok(self.as_slice_of())
    }

    /// A zero-copy ndarray view; errors when `T` is not the tensor's dtype.
    pub fn view<T: Element>(&self) -> AotResult<ArrayViewD<'_, T>> {
        self.check::<T>()?;
        ArrayViewD::from_shape(IxDyn(&self.shape), self.as_slice_of::<T>())
            .map_err(|e| AotError::Shape(e.to_string()))
    }

    /// A copy as an ndarray array; errors when `T` is not the tensor's dtype.
    pub fn to_array<T: Element>(&self) -> AotResult<ArrayD<T>> {
        Ok(self.view::<T>()?.to_owned())
    }

    /// The elements as a vector in C order; errors when `T` is not the tensor's dtype.
    pub fn to_vec<T: Element>(&self) -> AotResult<Vec<T>> {
        Ok(self.as_slice::<T>()?.to_vec())
    }

    /// Keeps the first `numel(shape)` elements under a new shape (data-dependent outputs).
    pub(crate) fn truncate(&mut self, shape: Vec<usize>) {
        let n = numel(&shape) * self.dtype.size_bytes();
        debug_assert!(n <= self.bytes.len);
        self.bytes.len = n;
        self.bytes.words.truncate(n.div_ceil(8));
        self.shape = shape;
    }

    fn normalize_bools(&mut self) {
        if self.dtype == DType::Bool {
            for b in self.bytes.as_mut_slice() {
                *b = (*b != 0) as u8;
            }
        }
    }

    fn zip(&self, other: &Tensor, what: &str, f: impl Fn(f64, f64) -> f64) -> AotResult<Tensor> {
        if self.dtype != other.dtype || self.shape != other.shape {
            return Err(AotError::Shape(format!(
                "{what}: {} {:?} and {} {:?} differ",
                self.dtype.ms_name(),
                self.shape,
                other.dtype.ms_name(),
                other.shape
            )));
        }
        let mut out = self.zeros_like();
        with_dtype!(self.dtype, T, {
            let (a, b) = (self.as_slice_of::<T>(), other.as_slice_of::<T>());
            for (o, (x, y)) in out.as_mut_slice_of::<T>().iter_mut().zip(a.iter().zip(b)) {
                *o = T::from_f64(f(x.to_f64(), y.to_f64()));
            }
        });
        Ok(out)
    }

    /// Elementwise `self + other` (same dtype and shape).
    pub fn add(&self, other: &Tensor) -> AotResult<Tensor> {
        self.zip(other, "add", |a, b| a + b)
    }

    /// Elementwise `self - other` (same dtype and shape).
    pub fn sub(&self, other: &Tensor) -> AotResult<Tensor> {
        self.zip(other, "sub", |a, b| a - b)
    }

    /// Elementwise `self * other` (same dtype and shape).
    pub fn mul(&self, other: &Tensor) -> AotResult<Tensor> {
        self.zip(other, "mul", |a, b| a * b)
    }

    /// Elementwise `self / other` (same dtype and shape).
    pub fn div(&self, other: &Tensor) -> AotResult<Tensor> {
        self.zip(other, "div", |a, b| a / b)
    }

    /// Elementwise `-self`.
    pub fn neg(&self) -> Tensor {
        self.map(|a| -a)
    }

    /// Elementwise `f(self)`, computed in `f64`.
    pub fn map(&self, f: impl Fn(f64) -> f64) -> Tensor {
        let mut out = self.zeros_like();
        with_dtype!(self.dtype, T, {
            let a = self.as_slice_of::<T>();
            for (o, x) in out.as_mut_slice_of::<T>().iter_mut().zip(a) {
                *o = T::from_f64(f(x.to_f64()));
            }
        });
        out
    }
}

impl PartialEq for Tensor {
    fn eq(&self, other: &Tensor) -> bool {
        self.dtype == other.dtype
            && self.shape == other.shape
            && self.as_bytes() == other.as_bytes()
    }
}

impl fmt::Debug for Tensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        with_dtype!(self.dtype, T, {
            let s = self.as_slice_of::<T>();
            let shown: Vec<&T> = s.iter().take(16).collect();
            write!(
                f,
                "Tensor({}, {:?}, {:?}",
                self.dtype.ms_name(),
                self.shape,
                shown
            )?;
            if s.len() > 16 {
                write!(f, " …")?;
            }
            write!(f, ")")
        })
    }
}

impl<T: Element, D: Dimension> From<ndarray::Array<T, D>> for Tensor {
    fn from(a: ndarray::Array<T, D>) -> Tensor {
        Tensor::from_array(&a)
    }
}

impl<T: Element, S: Data<Elem = T>, D: Dimension> From<&ArrayBase<S, D>> for Tensor {
    fn from(a: &ArrayBase<S, D>) -> Tensor {
        Tensor::from_array(a)
    }
}

/// A borrowed (or, for non-contiguous arrays, copied) input tensor.
pub struct TensorRef<'a> {
    dtype: DType,
    shape: Vec<usize>,
    data: RefData<'a>,
}

enum RefData<'a> {
    Borrowed(&'a [u8]),
    Owned(Tensor),
}

impl<'a> TensorRef<'a> {
    /// Borrows an ndarray array; copies it when it is not in standard (C) layout.
    pub fn from_array<T: Element, S: Data<Elem = T>, D: Dimension>(a: &'a ArrayBase<S, D>) -> Self {
        match a.as_slice() {
            Some(s) => TensorRef {
                dtype: T::DTYPE,
                shape: a.shape().to_vec(),
                data: RefData::Borrowed(elem_bytes(s)),
            },
            None => TensorRef::from(Tensor::from_array(a)),
        }
    }

    /// The element type.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// The shape.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// The element bytes in C order.
    pub fn as_bytes(&self) -> &[u8] {
        match &self.data {
            RefData::Borrowed(b) => b,
            RefData::Owned(t) => t.as_bytes(),
        }
    }

    /// An owned copy.
    pub fn to_tensor(&self) -> Tensor {
        match &self.data {
            RefData::Owned(t) => t.clone(),
            RefData::Borrowed(b) => {
                let mut t = Tensor::zeros(self.dtype, &self.shape);
                t.as_mut_bytes().copy_from_slice(b);
                t
            }
        }
    }
}

impl<'a> From<&'a Tensor> for TensorRef<'a> {
    fn from(t: &'a Tensor) -> Self {
        TensorRef {
            dtype: t.dtype,
            shape: t.shape.clone(),
            data: RefData::Borrowed(t.as_bytes()),
        }
    }
}

impl From<Tensor> for TensorRef<'static> {
    fn from(t: Tensor) -> Self {
        TensorRef {
            dtype: t.dtype,
            shape: t.shape.clone(),
            data: RefData::Owned(t),
        }
    }
}

/// Something usable as one input of a call: `&Array`, `&ArrayView`, `&Tensor`, `Tensor`, `TensorRef`.
pub trait AsInput<'a> {
    /// The input as a [`TensorRef`].
    fn into_input(self) -> TensorRef<'a>;
}

impl<'a, T: Element, S: Data<Elem = T>, D: Dimension> AsInput<'a> for &'a ArrayBase<S, D> {
    fn into_input(self) -> TensorRef<'a> {
        TensorRef::from_array(self)
    }
}

impl<'a> AsInput<'a> for &'a Tensor {
    fn into_input(self) -> TensorRef<'a> {
        TensorRef::from(self)
    }
}

impl AsInput<'static> for Tensor {
    fn into_input(self) -> TensorRef<'static> {
        TensorRef::from(self)
    }
}

impl<'a> AsInput<'a> for TensorRef<'a> {
    fn into_input(self) -> TensorRef<'a> {
        self
    }
}

/// The inputs of a call: a tuple of [`AsInput`]s (`(&x, &y)`), an array of them, a slice or
/// vector of [`Tensor`]s, or a vector of [`TensorRef`]s.
pub trait Inputs<'a> {
    /// The inputs in order.
    fn into_inputs(self) -> Vec<TensorRef<'a>>;
}

impl<'a> Inputs<'a> for () {
    fn into_inputs(self) -> Vec<TensorRef<'a>> {
        Vec::new()
    }
}

impl<'a> Inputs<'a> for &'a [Tensor] {
    fn into_inputs(self) -> Vec<TensorRef<'a>> {
        self.iter().map(TensorRef::from).collect()
    }
}

impl<'a> Inputs<'a> for &'a Vec<Tensor> {
    fn into_inputs(self) -> Vec<TensorRef<'a>> {
        self.iter().map(TensorRef::from).collect()
    }
}

impl<'a> Inputs<'a> for Vec<TensorRef<'a>> {
    fn into_inputs(self) -> Vec<TensorRef<'a>> {
        self
    }
}

impl<'a, A: AsInput<'a>, const N: usize> Inputs<'a> for [A; N] {
    fn into_inputs(self) -> Vec<TensorRef<'a>> {
        self.into_iter().map(AsInput::into_input).collect()
    }
}

macro_rules! tuple_inputs {
    ($($name:ident),+) => {
        impl<'a, $($name: AsInput<'a>),+> Inputs<'a> for ($($name,)+) {
            #[allow(non_snake_case)]
            fn into_inputs(self) -> Vec<TensorRef<'a>> {
                let ($($name,)+) = self;
                vec![$($name.into_input()),+]
            }
        }
    };
}
tuple_inputs!(A);
tuple_inputs!(A, B);
tuple_inputs!(A, B, C);
tuple_inputs!(A, B, C, D);
tuple_inputs!(A, B, C, D, E);
tuple_inputs!(A, B, C, D, E, F);
tuple_inputs!(A, B, C, D, E, F, G);
tuple_inputs!(A, B, C, D, E, F, G, H);
