//! Rust element types that map to IR dtypes, and the pointer marker used in kernel signatures.

use crate::ir::DType;
use std::marker::PhantomData;

/// A Rust type that is a Tritium element: `f32`, `i32`, `half::f16`, `bool`, …
pub trait Element: Copy + Send + Sync + 'static {
    /// Its dtype.
    const DTYPE: DType;
}

/// Floating-point elements, for kernels generic over dtypes (`fn k<T: Float>(…)`).
pub trait Float: Element {}
/// Integer elements (signed and unsigned).
pub trait Int: Element {}

macro_rules! element {
    ($($t:ty => $d:ident $(, $marker:ident)?;)*) => {$(
        impl Element for $t { const DTYPE: DType = DType::$d; }
        $(impl $marker for $t {})?
    )*};
}

element! {
    bool => Bool;
    i8 => I8, Int;
    i16 => I16, Int;
    i32 => I32, Int;
    i64 => I64, Int;
    u8 => U8, Int;
    u16 => U16, Int;
    u32 => U32, Int;
    u64 => U64, Int;
    half::f16 => F16, Float;
    half::bf16 => BF16, Float;
    f32 => F32, Float;
    f64 => F64, Float;
}

/// Marks a kernel parameter as a pointer to `T` elements: `fn k(x: Ptr<f32>)`.
/// Inside the kernel the parameter is a [`Tile`](super::Tile) of pointer type.
pub struct Ptr<T: Element>(PhantomData<T>);
