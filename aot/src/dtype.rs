//! Element types: MindSpore's dtype strings and `TypeId` values, and the Rust types behind them.

use std::fmt;

/// The element type, shared with the kernel DSL (`tritium_dsl::DType`), so one `DType` serves
/// kernels and AOT operators. MindSpore's names and `TypeId`s come from [`MindSporeDType`].
pub use tritium_dsl::DType;

/// MindSpore's view of a [`DType`]: the strings kernels see in `dtypes[i]` and the `TypeId`
/// values of `FuncInferType`.
pub trait MindSporeDType: Sized {
    /// The string MindSpore passes in `dtypes[i]` (`"float32"`, `"int64"`, `"bool"`, …).
    fn ms_name(self) -> &'static str;
    /// The same name NUL-terminated, for the C ABI.
    fn ms_cname(self) -> &'static std::ffi::CStr;
    /// Parses a MindSpore dtype string, including the aliases `"float"` (float32), `"int"`
    /// (int32) and `"uint"` (uint32).
    fn from_ms_name(name: &str) -> Option<Self>;
    /// MindSpore's `TypeId` value (`kNumberTypeFloat32` = 43, …); `None` for the fp8s.
    fn type_id(self) -> Option<i32>;
    /// The dtype of a MindSpore `TypeId`; the generic `Int` (31), `UInt` (36) and `Float` (41)
    /// map to their 32-bit forms.
    fn from_type_id(id: i32) -> Option<Self>;
}

impl MindSporeDType for DType {
    fn ms_name(self) -> &'static str {
        // MindSpore's strings are the seed's `str(dtype)` names, except that bool is "bool".
        match self {
            DType::Bool => "bool",
            d => d.str_name(),
        }
    }

    fn ms_cname(self) -> &'static std::ffi::CStr {
        match self {
            DType::Bool => c"bool",
            DType::I8 => c"int8",
            DType::I16 => c"int16",
            DType::I32 => c"int32",
            DType::I64 => c"int64",
            DType::U8 => c"uint8",
            DType::U16 => c"uint16",
            DType::U32 => c"uint32",
            DType::U64 => c"uint64",
            DType::F16 => c"float16",
            DType::BF16 => c"bfloat16",
            DType::F32 => c"float32",
            DType::F64 => c"float64",
            DType::F8E4M3 => c"float8_e4m3fn",
            DType::F8E5M2 => c"float8_e5m2",
            DType::F8E4B15 => c"float8_e4b15",
        }
    }

    fn from_ms_name(name: &str) -> Option<DType> {
        Some(match name {
            "bool" => DType::Bool,
            "int8" => DType::I8,
            "int16" => DType::I16,
            "int32" | "int" => DType::I32,
            "int64" => DType::I64,
            "uint8" => DType::U8,
            "uint16" => DType::U16,
            "uint32" | "uint" => DType::U32,
            "uint64" => DType::U64,
            "float16" => DType::F16,
            "bfloat16" => DType::BF16,
            "float32" | "float" => DType::F32,
            "float64" => DType::F64,
            "float8_e4m3fn" => DType::F8E4M3,
            "float8_e5m2" => DType::F8E5M2,
            "float8_e4b15" => DType::F8E4B15,
            _ => return None,
        })
    }

    fn type_id(self) -> Option<i32> {
        Some(match self {
            DType::Bool => 30,
            DType::I8 => 32,
            DType::I16 => 33,
            DType::I32 => 34,
            DType::I64 => 35,
            DType::U8 => 37,
            DType::U16 => 38,
            DType::U32 => 39,
            DType::U64 => 40,
            DType::F16 => 42,
            DType::F32 => 43,
            DType::F64 => 44,
            DType::BF16 => 45,
            // MindSpore's ids of its fp8 types are not part of the AOT ABI we follow.
            DType::F8E4M3 | DType::F8E5M2 | DType::F8E4B15 => return None,
        })
    }

    fn from_type_id(id: i32) -> Option<DType> {
        Some(match id {
            30 => DType::Bool,
            31 | 34 => DType::I32,
            32 => DType::I8,
            33 => DType::I16,
            35 => DType::I64,
            36 | 39 => DType::U32,
            37 => DType::U8,
            38 => DType::U16,
            40 => DType::U64,
            41 | 43 => DType::F32,
            42 => DType::F16,
            44 => DType::F64,
            45 => DType::BF16,
            _ => return None,
        })
    }
}

mod sealed {
    pub trait Sealed {}
}

/// A Rust element type with a [`DType`]: `bool`, `i8`…`i64`, `u8`…`u64`, `f16`, `bf16`, `f32`, `f64`.
///
/// Sealed: every implementor is plain old data whose bytes are exactly what a C kernel sees.
pub trait Element: sealed::Sealed + Copy + Send + Sync + fmt::Debug + 'static {
    /// The dtype of this element type.
    const DTYPE: DType;
    /// Converts to `f64` (used by gradient arithmetic).
    fn to_f64(self) -> f64;
    /// Converts from `f64`, rounding as `as` does.
    fn from_f64(v: f64) -> Self;
}

macro_rules! element {
    ($($t:ty => $d:ident),* $(,)?) => {$(
        impl sealed::Sealed for $t {}
        impl Element for $t {
            const DTYPE: DType = DType::$d;
            fn to_f64(self) -> f64 { self as f64 }
            fn from_f64(v: f64) -> Self { v as $t }
        }
    )*};
}
element!(i8 => I8, i16 => I16, i32 => I32, i64 => I64, u8 => U8, u16 => U16, u32 => U32, u64 => U64,
         f32 => F32, f64 => F64);

macro_rules! fp8_element {
    ($($t:ident),*) => {$(
        impl sealed::Sealed for tritium_dsl::trace::$t {}
        impl Element for tritium_dsl::trace::$t {
            const DTYPE: DType = DType::$t;
            fn to_f64(self) -> f64 {
                self.to_f64()
            }
            fn from_f64(v: f64) -> Self {
                tritium_dsl::trace::$t::from_f64(v)
            }
        }
    )*};
}
fp8_element!(F8E4M3, F8E5M2, F8E4B15);

impl sealed::Sealed for bool {}
impl Element for bool {
    const DTYPE: DType = DType::Bool;
    fn to_f64(self) -> f64 {
        if self {
            1.0
        } else {
            0.0
        }
    }
    fn from_f64(v: f64) -> Self {
        v != 0.0
    }
}

impl sealed::Sealed for half::f16 {}
impl Element for half::f16 {
    const DTYPE: DType = DType::F16;
    fn to_f64(self) -> f64 {
        self.to_f64()
    }
    fn from_f64(v: f64) -> Self {
        half::f16::from_f64(v)
    }
}

impl sealed::Sealed for half::bf16 {}
impl Element for half::bf16 {
    const DTYPE: DType = DType::BF16;
    fn to_f64(self) -> f64 {
        self.to_f64()
    }
    fn from_f64(v: f64) -> Self {
        half::bf16::from_f64(v)
    }
}
