//! Element data types.

use std::fmt;

/// The element type of a scalar, a tile, or the target of a pointer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DType {
    /// 1-bit boolean (stored as one byte in memory).
    Bool,
    /// Signed 8-bit integer.
    I8,
    /// Signed 16-bit integer.
    I16,
    /// Signed 32-bit integer.
    I32,
    /// Signed 64-bit integer.
    I64,
    /// Unsigned 8-bit integer.
    U8,
    /// Unsigned 16-bit integer.
    U16,
    /// Unsigned 32-bit integer.
    U32,
    /// Unsigned 64-bit integer.
    U64,
    /// IEEE half precision.
    F16,
    /// bfloat16.
    BF16,
    /// IEEE single precision.
    F32,
    /// IEEE double precision.
    F64,
    /// 8-bit float E4M3FN (Triton's `float8e4nv`): largest 448, no infinities. Computed
    /// in f32 and rounded after every op, as f16 and bf16 are (see [`super::fp8`]).
    F8E4M3,
    /// 8-bit float E5M2 (Triton's `float8e5`): largest 57344, IEEE infinities.
    F8E5M2,
    /// 8-bit float E4M3 with bias 15 (Triton's software format `float8e4b15`): largest
    /// 1.75, no infinities.
    F8E4B15,
}

impl DType {
    /// Triton's `ptr.dtype.element_ty`: a pointer tile's `dtype()` is already its
    /// pointee's, so this is `self` (kept so the Triton spelling ports unchanged).
    pub fn element_ty(self) -> DType {
        self
    }

    /// Every dtype, in declaration order.
    pub const ALL: [DType; 16] = [
        DType::Bool,
        DType::I8,
        DType::I16,
        DType::I32,
        DType::I64,
        DType::U8,
        DType::U16,
        DType::U32,
        DType::U64,
        DType::F16,
        DType::BF16,
        DType::F32,
        DType::F64,
        DType::F8E4M3,
        DType::F8E5M2,
        DType::F8E4B15,
    ];

    /// The short name used in IR text: `i32`, `f16`, `bool`.
    pub fn name(self) -> &'static str {
        match self {
            DType::Bool => "bool",
            DType::I8 => "i8",
            DType::I16 => "i16",
            DType::I32 => "i32",
            DType::I64 => "i64",
            DType::U8 => "u8",
            DType::U16 => "u16",
            DType::U32 => "u32",
            DType::U64 => "u64",
            DType::F16 => "f16",
            DType::BF16 => "bf16",
            DType::F32 => "f32",
            DType::F64 => "f64",
            DType::F8E4M3 => "fp8e4nv",
            DType::F8E5M2 => "fp8e5",
            DType::F8E4B15 => "fp8e4b15",
        }
    }

    /// The seed's `str(dtype)` form used in custom-op symbols: `int32`, `float16`, `bfloat16`.
    pub fn str_name(self) -> &'static str {
        match self {
            DType::Bool => "int1",
            DType::I8 => "int8",
            DType::I16 => "int16",
            DType::I32 => "int32",
            DType::I64 => "int64",
            DType::U8 => "uint8",
            DType::U16 => "uint16",
            DType::U32 => "uint32",
            DType::U64 => "uint64",
            DType::F16 => "float16",
            DType::BF16 => "bfloat16",
            DType::F32 => "float32",
            DType::F64 => "float64",
            DType::F8E4M3 => "float8_e4m3fn",
            DType::F8E5M2 => "float8_e5m2",
            DType::F8E4B15 => "float8_e4b15",
        }
    }

    /// The C type name, as triton-ascend's `cname`: `int32_t`, `half`, `bfloat16_t`, `float`.
    pub fn cname(self) -> &'static str {
        match self {
            DType::Bool => "bool",
            DType::I8 => "int8_t",
            DType::I16 => "int16_t",
            DType::I32 => "int32_t",
            DType::I64 => "int64_t",
            DType::U8 => "uint8_t",
            DType::U16 => "uint16_t",
            DType::U32 => "uint32_t",
            DType::U64 => "uint64_t",
            DType::F16 => "half",
            DType::BF16 => "bfloat16_t",
            DType::F32 => "float",
            DType::F64 => "double",
            DType::F8E4M3 => "fp8_e4m3",
            DType::F8E5M2 => "fp8_e5m2",
            DType::F8E4B15 => "fp8_e4b15",
        }
    }

    /// Parses the short name (`i32`) or the `str(dtype)` name (`int32`).
    pub fn from_name(name: &str) -> Option<DType> {
        DType::ALL
            .into_iter()
            .find(|d| d.name() == name || d.str_name() == name)
    }

    /// Size of one element in memory, in bytes.
    pub fn size_bytes(self) -> usize {
        match self {
            DType::Bool
            | DType::I8
            | DType::U8
            | DType::F8E4M3
            | DType::F8E5M2
            | DType::F8E4B15 => 1,
            DType::I16 | DType::U16 | DType::F16 | DType::BF16 => 2,
            DType::I32 | DType::U32 | DType::F32 => 4,
            DType::I64 | DType::U64 | DType::F64 => 8,
        }
    }

    /// Width in bits of the value (1 for bool).
    pub fn bits(self) -> u32 {
        match self {
            DType::Bool => 1,
            other => other.size_bytes() as u32 * 8,
        }
    }

    /// The dtype scans, reductions and `dot` accumulate this dtype in: f32 for f16, bf16
    /// and the fp8s (rounded once per result), itself otherwise.
    pub fn accumulator(self) -> DType {
        match self {
            DType::F16 | DType::BF16 | DType::F8E4M3 | DType::F8E5M2 | DType::F8E4B15 => DType::F32,
            d => d,
        }
    }

    /// True for the floats: f16, bf16, f32, f64 and the fp8s.
    pub fn is_float(self) -> bool {
        matches!(
            self,
            DType::F16
                | DType::BF16
                | DType::F32
                | DType::F64
                | DType::F8E4M3
                | DType::F8E5M2
                | DType::F8E4B15
        )
    }

    /// The 8-bit float format of an fp8 dtype.
    pub fn fp8_format(self) -> Option<super::fp8::Fp8Format> {
        match self {
            DType::F8E4M3 => Some(super::fp8::E4M3),
            DType::F8E5M2 => Some(super::fp8::E5M2),
            DType::F8E4B15 => Some(super::fp8::E4B15),
            _ => None,
        }
    }

    /// True for the floats computed in f32 and rounded to their dtype after every op:
    /// f16, bf16 and the fp8s.
    pub fn is_narrow_float(self) -> bool {
        self.is_float() && self.bits() < 32
    }

    /// True for the signed and unsigned integers (not bool).
    pub fn is_int(self) -> bool {
        !self.is_float() && self != DType::Bool
    }

    /// True for the signed integers.
    pub fn is_signed_int(self) -> bool {
        matches!(self, DType::I8 | DType::I16 | DType::I32 | DType::I64)
    }

    /// True for the unsigned integers.
    pub fn is_unsigned_int(self) -> bool {
        matches!(self, DType::U8 | DType::U16 | DType::U32 | DType::U64)
    }

    /// True for bool.
    pub fn is_bool(self) -> bool {
        self == DType::Bool
    }

    /// The smallest and largest integer of an integer or bool dtype (`0..=1` for bool);
    /// `None` for floats.
    pub fn int_range(self) -> Option<(i128, i128)> {
        let bits = self.bits();
        if self.is_float() {
            None
        } else if self.is_signed_int() {
            Some((-(1i128 << (bits - 1)), (1i128 << (bits - 1)) - 1))
        } else {
            Some((0, (1i128 << bits) - 1))
        }
    }

    /// `i` as a value of this integer dtype: bool is `i != 0`, the integers keep the low
    /// bits (two's complement), as every backend reads an integer constant. Floats: `i`.
    pub fn wrap_int(self, i: i128) -> i128 {
        match self.int_range() {
            _ if self.is_bool() => (i != 0) as i128,
            Some((lo, _)) => {
                let bits = self.bits();
                let low = i & ((1i128 << bits) - 1);
                if lo < 0 && low >= 1i128 << (bits - 1) {
                    low - (1i128 << bits)
                } else {
                    low
                }
            }
            None => i,
        }
    }

    /// The dtype two operands are converted to (Triton's `computation_type_impl`, for
    /// operators other than `/` and `%`): f64, then f32, then f16 win; two bf16s stay bf16,
    /// bf16 with anything else (an integer, an fp8) gives f32; two different fp8s give f16;
    /// a float beats an integer; among integers the wider wins and, at equal width, unsigned
    /// wins; bool is the weakest.
    pub fn promote(a: DType, b: DType) -> DType {
        use DType::*;
        if a == b {
            return a;
        }
        let either = |d: DType| a == d || b == d;
        match (a.is_float(), b.is_float()) {
            _ if either(F64) => F64,
            _ if either(F32) => F32,
            _ if either(F16) => F16,
            _ if either(BF16) => F32,
            (true, true) => F16,
            (true, false) => a,
            (false, true) => b,
            (false, false) => {
                if a == Bool {
                    return b;
                }
                if b == Bool {
                    return a;
                }
                match a.bits().cmp(&b.bits()) {
                    std::cmp::Ordering::Greater => a,
                    std::cmp::Ordering::Less => b,
                    std::cmp::Ordering::Equal => {
                        if a.is_unsigned_int() {
                            a
                        } else {
                            b
                        }
                    }
                }
            }
        }
    }

    /// The dtype `/` and `%` compute in: [`promote`](DType::promote)'s, but 16-bit floats
    /// divide in f32 (as Triton: PTX has no f16 division or remainder).
    pub fn promote_for_division(a: DType, b: DType) -> DType {
        match DType::promote(a, b) {
            DType::F16 | DType::BF16 => DType::F32,
            d => d,
        }
    }

    /// The dtype of `a << b` and `a >> b`: the wider width, with `a`'s signedness (an
    /// arithmetic right shift for a signed `a`, as in Triton and Rust).
    pub fn promote_for_shift(a: DType, b: DType) -> DType {
        use DType::*;
        let bits = a.bits().max(b.bits());
        let signed = !a.is_unsigned_int();
        match (bits, signed) {
            (64, true) => I64,
            (64, false) => U64,
            (32, true) => I32,
            (32, false) => U32,
            (16, true) => I16,
            (16, false) => U16,
            (_, true) => I8,
            (_, false) => U8,
        }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
