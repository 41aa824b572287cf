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
    F8E4M3 => F8E4M3, Float;
    F8E5M2 => F8E5M2, Float;
    F8E4B15 => F8E4B15, Float;
}

macro_rules! fp8_type {
    ($(#[$doc:meta])* $name:ident, $format:path) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
        #[repr(transparent)]
        pub struct $name(pub u8);

        impl $name {
            /// `x` rounded to nearest even (finite overflow saturates; see [`crate::ir::fp8`]).
            pub fn from_f64(x: f64) -> Self {
                $name($format.encode(x))
            }
            /// `x` rounded to nearest even.
            pub fn from_f32(x: f32) -> Self {
                Self::from_f64(f64::from(x))
            }
            /// The value, exactly.
            pub fn to_f64(self) -> f64 {
                $format.decode(self.0)
            }
            /// The value, exactly.
            pub fn to_f32(self) -> f32 {
                self.to_f64() as f32
            }
            /// The bits.
            pub fn to_bits(self) -> u8 {
                self.0
            }
            /// The number with these bits.
            pub fn from_bits(bits: u8) -> Self {
                $name(bits)
            }
        }

        impl std::fmt::Debug for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                write!(f, "{}", self.to_f64())
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                write!(f, "{}", self.to_f64())
            }
        }
    };
}

fp8_type!(
    /// An 8-bit float E4M3FN, Triton's `float8e4nv` (Rust has none): 4 exponent bits,
    /// 3 mantissa bits, largest value 448, no infinities. `Ptr<F8E4M3>` takes slices and
    /// arrays of it.
    F8E4M3,
    crate::ir::fp8::E4M3
);
fp8_type!(
    /// An 8-bit float E5M2, Triton's `float8e5`: 5 exponent bits, 2 mantissa bits, largest
    /// value 57344, IEEE infinities.
    F8E5M2,
    crate::ir::fp8::E5M2
);
fp8_type!(
    /// An 8-bit float E4M3 with bias 15, Triton's `float8e4b15`: largest value 1.75, no
    /// infinities.
    F8E4B15,
    crate::ir::fp8::E4B15
);

/// Marks a kernel parameter as a pointer to `T` elements: `fn k(x: Ptr<f32>)`.
/// Inside the kernel the parameter is a [`Tile`](super::Tile) of pointer type.
pub struct Ptr<T: Element>(PhantomData<T>);
