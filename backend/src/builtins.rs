//! The `__builtin_*` custom-op library, shipped inside the backend.
//!
//! Names starting with `__builtin_` are reserved for these ops (seed 003): they need no
//! registration and no bitcode file at run time. Their C++ implementation
//! (`backend/builtins/builtins.cpp`) is compiled by `build.rs` with clang 19 and embedded
//! here as LLVM bitcode ([`BUILTINS_BC`]); the CPU lowering links it like a user's bitcode
//! and always calls the whole-tile (Simd) entry, whatever the op's mode.
//!
//! The plain-Rust functions below ([`gather_load`], [`index_select`],
//! [`indirect_atomic`], [`histogram`]) define the same semantics over slices; the
//! reference interpreter runs them. Exact semantics and the symbol table are in
//! `docs/custom_ops.md` ("Builtins").
//!
//! | op | entry (`T` element, `I` index) | arguments |
//! | --- | --- | --- |
//! | `__builtin_gather_load` | `_mlir_ciface___builtin_gather_load_<T>_<I>` | `(const T* src, memref<I,1>* index, i64 bound, memref<T,1>* out)` |
//! | `__builtin_index_select` | `_mlir_ciface___builtin_index_select_<T>_<I>` | `(const T* src, memref<I,1>* index, i64 row_stride, i64 num_rows, memref<T,2>* out)` |
//! | `__builtin_indirect_atomic` | `_mlir_ciface___builtin_indirect_atomic_<T>_<I>` | `(T* dst, memref<I,1>* index, memref<T,1>* value, i64 bound, i32 kind, memref<T,1>* out)` |
//! | `__builtin_histogram` | `_mlir_ciface___builtin_histogram_<I>` | `(memref<I,1>* values, memref<i32,1>* out)` |

/// The builtin library compiled for the host CPU (LLVM bitcode, clang 19, `-O2`).
pub static BUILTINS_BC: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/builtins.bc"));

/// The builtin library compiled for `nvptx64-nvidia-cuda`, sm_80 (for the CUDA backend).
pub static BUILTINS_NVPTX_BC: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/builtins.nvptx.bc"));

/// `__builtin_gather_load`.
pub const GATHER_LOAD: &str = "__builtin_gather_load";
/// `__builtin_index_select`.
pub const INDEX_SELECT: &str = "__builtin_index_select";
/// `__builtin_indirect_atomic`.
pub const INDIRECT_ATOMIC: &str = "__builtin_indirect_atomic";
/// `__builtin_histogram`.
pub const HISTOGRAM: &str = "__builtin_histogram";

/// The four builtin op names.
pub const NAMES: &[&str] = &[GATHER_LOAD, INDEX_SELECT, INDIRECT_ATOMIC, HISTOGRAM];

/// The prefix every builtin name starts with (names with it are reserved).
pub const PREFIX: &str = "__builtin_";

/// Element types (dtype str names) of `__builtin_gather_load` and `__builtin_index_select`.
pub const ELEM_TYPES: &[&str] = &[
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "float16",
    "bfloat16",
    "float32",
    "float64",
    "float8_e4m3fn",
    "float8_e5m2",
    "float8_e4b15",
];

/// Element types of `__builtin_indirect_atomic`: [`ELEM_TYPES`] without the 16- and 8-bit
/// floats.
pub const ATOMIC_ELEM_TYPES: &[&str] = &[
    "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float32", "float64",
];

/// Index types (dtype str names) of every builtin.
pub const INDEX_TYPES: &[&str] = &["int32", "int64"];

/// The op symbol of builtin `name` for element dtype `elem` and index dtype `index`
/// (str names): `__builtin_gather_load_float32_int32`. The entry the backend calls is
/// `_mlir_ciface_` + this ([`entry`]). `elem` is ignored for `__builtin_histogram`
/// (its bins are int32). `None` when the library has no such instantiation.
pub fn symbol(name: &str, elem: &str, index: &str) -> Option<String> {
    if !INDEX_TYPES.contains(&index) {
        return None;
    }
    let elems = match name {
        GATHER_LOAD | INDEX_SELECT => ELEM_TYPES,
        INDIRECT_ATOMIC => ATOMIC_ELEM_TYPES,
        HISTOGRAM => return Some(format!("{name}_{index}")),
        _ => return None,
    };
    elems
        .contains(&elem)
        .then(|| format!("{name}_{elem}_{index}"))
}

/// The Simd entry point of [`symbol`]: `_mlir_ciface___builtin_gather_load_float32_int32`.
pub fn entry(name: &str, elem: &str, index: &str) -> Option<String> {
    symbol(name, elem, index).map(|s| format!("_mlir_ciface_{s}"))
}

/// Every entry point the library defines (70 of them).
pub fn all_entries() -> Vec<String> {
    let mut out = Vec::new();
    for name in NAMES {
        for index in INDEX_TYPES {
            for elem in ELEM_TYPES {
                if let Some(e) = entry(name, elem, index) {
                    if !out.contains(&e) {
                        out.push(e);
                    }
                }
            }
        }
    }
    out
}

/// The `kind` argument of `__builtin_indirect_atomic`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(i32)]
pub enum AtomicKind {
    /// `*p += v` (integers wrap).
    Add = 0,
    /// `*p = max(*p, v)` (floats: maximumNumber, as Tritium's `max`).
    Max = 1,
    /// `*p = min(*p, v)` (floats: minimumNumber, as Tritium's `min`).
    Min = 2,
    /// `*p = v`.
    Xchg = 3,
}

impl AtomicKind {
    /// The kind for an `i32` code; `None` for codes the library ignores.
    pub fn from_code(code: i32) -> Option<Self> {
        match code {
            0 => Some(AtomicKind::Add),
            1 => Some(AtomicKind::Max),
            2 => Some(AtomicKind::Min),
            3 => Some(AtomicKind::Xchg),
            _ => None,
        }
    }

    /// The `i32` code passed to the library.
    pub fn code(self) -> i32 {
        self as i32
    }

    /// The kind matching the IR's atomic op (`None` for the bitwise ops, which the
    /// library does not have).
    pub fn from_op(op: tritium_dsl::ir::AtomicOp) -> Option<Self> {
        use tritium_dsl::ir::AtomicOp;
        match op {
            AtomicOp::Add => Some(AtomicKind::Add),
            AtomicOp::Max => Some(AtomicKind::Max),
            AtomicOp::Min => Some(AtomicKind::Min),
            AtomicOp::Xchg => Some(AtomicKind::Xchg),
            AtomicOp::And | AtomicOp::Or | AtomicOp::Xor => None,
        }
    }
}

/// An element type `__builtin_indirect_atomic` supports, with the library's arithmetic.
pub trait AtomicElem: Copy {
    /// `self + v`: wrapping for integers, rounded once for floats.
    fn atomic_add(self, v: Self) -> Self;
    /// The larger; for floats, the other operand when one is NaN, and +0 over -0.
    fn atomic_max(self, v: Self) -> Self;
    /// The smaller; for floats, the other operand when one is NaN, and -0 under +0.
    fn atomic_min(self, v: Self) -> Self;
}

macro_rules! atomic_int {
    ($($t:ty),*) => {$(
        impl AtomicElem for $t {
            fn atomic_add(self, v: Self) -> Self { self.wrapping_add(v) }
            fn atomic_max(self, v: Self) -> Self { Ord::max(self, v) }
            fn atomic_min(self, v: Self) -> Self { Ord::min(self, v) }
        }
    )*};
}
atomic_int!(i8, i16, i32, i64, u8, u16, u32, u64);

use crate::float_order::MaxNumber;

macro_rules! atomic_float {
    ($($t:ty),*) => {$(
        impl AtomicElem for $t {
            fn atomic_add(self, v: Self) -> Self { self + v }
            fn atomic_max(self, v: Self) -> Self { self.max_number(v) }
            fn atomic_min(self, v: Self) -> Self { self.min_number(v) }
        }
    )*};
}
atomic_float!(f32, f64);

/// `index` as an offset when `0 <= index < bound`.
fn in_range<I: Copy + Into<i64>>(index: I, bound: i64) -> Option<usize> {
    let k: i64 = index.into();
    (0..bound).contains(&k).then_some(k as usize)
}

/// `__builtin_gather_load`: for every `e`, `out[e] = src[index[e]]` when
/// `0 <= index[e] < bound`; other lanes keep their value (the "other").
///
/// Runs over `min(index.len(), out.len())` lanes; an index inside `bound` but past
/// `src.len()` is treated as out of range (the compiled library would read past `src`).
pub fn gather_load<T: Copy, I: Copy + Into<i64>>(
    src: &[T],
    index: &[I],
    bound: i64,
    out: &mut [T],
) {
    for (o, &i) in out.iter_mut().zip(index) {
        if let Some(v) = in_range(i, bound).and_then(|k| src.get(k)) {
            *o = *v;
        }
    }
}

/// `__builtin_index_select`: `out` is `[N, row_len]` row-major; for every row `i` with
/// `0 <= index[i] < num_rows`, `out[i][j] = src[index[i] * row_stride + j]` for
/// `j < row_len`; rows with an out-of-range index keep their values.
///
/// Runs over `min(index.len(), out.len() / row_len)` rows; a source element outside
/// `src` (or a negative offset) leaves its `out` element unchanged.
pub fn index_select<T: Copy, I: Copy + Into<i64>>(
    src: &[T],
    index: &[I],
    row_stride: i64,
    num_rows: i64,
    out: &mut [T],
    row_len: usize,
) {
    if row_len == 0 {
        return;
    }
    for (row, &i) in out.chunks_exact_mut(row_len).zip(index) {
        let Some(k) = in_range(i, num_rows) else {
            continue;
        };
        let Some(base) = (k as i64).checked_mul(row_stride) else {
            continue;
        };
        for (j, o) in row.iter_mut().enumerate() {
            let at = base.checked_add(j as i64).filter(|a| *a >= 0);
            if let Some(v) = at.and_then(|a| src.get(a as usize)) {
                *o = *v;
            }
        }
    }
}

/// `__builtin_indirect_atomic`: for every `e` with `0 <= index[e] < bound`, in lane
/// order, `out[e] = dst[index[e]]` then `dst[index[e]] = op(dst[index[e]], value[e])`
/// with `op` given by `kind` ([`AtomicKind`] codes: 0 add, 1 max, 2 min, 3 xchg).
/// Out-of-range lanes keep their `out` value; an unknown `kind` does nothing.
///
/// Runs over `min(index.len(), value.len(), out.len())` lanes; an index past
/// `dst.len()` is treated as out of range.
pub fn indirect_atomic<T: AtomicElem, I: Copy + Into<i64>>(
    dst: &mut [T],
    index: &[I],
    value: &[T],
    bound: i64,
    kind: i32,
    out: &mut [T],
) {
    let Some(kind) = AtomicKind::from_code(kind) else {
        return;
    };
    for ((o, &i), &v) in out.iter_mut().zip(index).zip(value) {
        let Some(slot) = in_range(i, bound).and_then(|k| dst.get_mut(k)) else {
            continue;
        };
        let old = *slot;
        *slot = match kind {
            AtomicKind::Add => old.atomic_add(v),
            AtomicKind::Max => old.atomic_max(v),
            AtomicKind::Min => old.atomic_min(v),
            AtomicKind::Xchg => v,
        };
        *o = old;
    }
}

/// `__builtin_histogram`: `out` has `B = out.len()` bins; for every `e` with
/// `0 <= values[e] < B`, `out[values[e]] += 1` (wrapping), starting from `out`'s values.
pub fn histogram<I: Copy + Into<i64>>(values: &[I], out: &mut [i32]) {
    let bins = out.len() as i64;
    for &v in values {
        if let Some(k) = in_range(v, bins) {
            out[k] = out[k].wrapping_add(1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn has(bytes: &[u8], needle: &str) -> bool {
        bytes.windows(needle.len()).any(|w| w == needle.as_bytes())
    }

    fn is_bitcode(bytes: &[u8]) -> bool {
        bytes.starts_with(b"BC\xC0\xDE") || bytes.starts_with(&[0xDE, 0xC0, 0x17, 0x0B])
    }

    #[test]
    fn embedded_bitcode_has_the_magic() {
        assert!(is_bitcode(BUILTINS_BC));
        assert!(is_bitcode(BUILTINS_NVPTX_BC));
    }

    /// Function names are stored verbatim in the bitcode's string table, so the bytes
    /// show which entries the library defines.
    #[test]
    fn embedded_bitcode_defines_every_entry() {
        let entries = all_entries();
        assert_eq!(entries.len(), 2 * (15 + 15 + 10) + 2);
        for bc in [BUILTINS_BC, BUILTINS_NVPTX_BC] {
            for e in &entries {
                assert!(has(bc, e), "{e} missing from the builtin bitcode");
            }
        }
    }

    /// The library links into a kernel module without any runtime library.
    #[test]
    fn embedded_bitcode_calls_no_libc() {
        for bc in [BUILTINS_BC, BUILTINS_NVPTX_BC] {
            for f in [
                "memcpy", "memset", "memmove", "fmaxf", "fminf", "abort", "malloc",
            ] {
                assert!(!has(bc, f), "the builtin bitcode refers to {f}");
            }
        }
    }

    #[test]
    fn symbols() {
        let check = |name, elem, index, expect: Option<&str>| {
            assert_eq!(
                entry(name, elem, index).as_deref(),
                expect,
                "{name} {elem} {index}"
            );
        };
        check(
            GATHER_LOAD,
            "float32",
            "int32",
            Some("_mlir_ciface___builtin_gather_load_float32_int32"),
        );
        check(
            INDEX_SELECT,
            "bfloat16",
            "int64",
            Some("_mlir_ciface___builtin_index_select_bfloat16_int64"),
        );
        check(
            INDIRECT_ATOMIC,
            "uint8",
            "int32",
            Some("_mlir_ciface___builtin_indirect_atomic_uint8_int32"),
        );
        check(INDIRECT_ATOMIC, "float16", "int32", None);
        check(
            HISTOGRAM,
            "int32",
            "int64",
            Some("_mlir_ciface___builtin_histogram_int64"),
        );
        check(GATHER_LOAD, "int1", "int32", None);
        check(GATHER_LOAD, "int32", "int16", None);
        check("__builtin_nope", "int32", "int32", None);
        assert_eq!(
            symbol(GATHER_LOAD, "int8", "int64").as_deref(),
            Some("__builtin_gather_load_int8_int64")
        );
        assert!(NAMES.iter().all(|n| n.starts_with(PREFIX)));
    }

    #[test]
    fn gather_load_keeps_out_of_range_lanes() {
        let src = [10.0f32, 11.0, 12.0, 13.0];
        let index: [i32; 6] = [3, -1, 0, 4, 2, 1];
        let mut out = [-7.0f32; 6];
        gather_load(&src, &index, 4, &mut out);
        assert_eq!(out, [13.0, -7.0, 10.0, -7.0, 12.0, 11.0]);
        // `bound` limits further than src; a bound past src is clamped to it.
        let mut out = [0.0f32; 6];
        gather_load(&src, &index, 2, &mut out);
        assert_eq!(out, [0.0, 0.0, 10.0, 0.0, 0.0, 11.0]);
        let mut out = [0.0f32; 6];
        gather_load(&src, &index, 100, &mut out);
        assert_eq!(out, [13.0, 0.0, 10.0, 0.0, 12.0, 11.0]);
        // i64 indices, half elements.
        let src = [half::f16::from_f32(1.5), half::f16::from_f32(-2.0)];
        let mut out = [half::f16::ZERO; 3];
        gather_load(&src, &[1i64, i64::MIN, 0], 2, &mut out);
        assert_eq!(out, [src[1], half::f16::ZERO, src[0]]);
    }

    #[test]
    fn index_select_copies_rows() {
        // 3 rows of 4 with a row stride of 5 (one padding element per row).
        let src: Vec<i32> = (0..15).collect();
        let mut out = vec![-1; 4 * 3];
        index_select(&src, &[2i64, 0, 3, -1], 5, 3, &mut out, 3);
        assert_eq!(
            out,
            [10, 11, 12, 0, 1, 2, -1, -1, -1, -1, -1, -1],
            "rows 2 and 3 have out-of-range indices"
        );
        // Elements past src stay unchanged.
        let mut out = vec![-1; 4];
        index_select(&src, &[3i32], 5, 10, &mut out, 4);
        assert_eq!(out, [-1; 4], "row 3 starts at 15 = src.len()");
        let mut out = vec![-1; 4];
        index_select(&src, &[2i32], 6, 10, &mut out, 4);
        assert_eq!(out, [12, 13, 14, -1]);
        // Zero-length rows do nothing.
        index_select(&src, &[0i32], 5, 3, &mut out, 0);
    }

    #[test]
    fn indirect_atomic_applies_in_lane_order() {
        let index = [1i32, 0, 1, 5, 1];
        let value = [10i32, 20, 30, 40, i32::MAX];
        let mut dst = [1i32, 2];
        let mut out = [-9i32; 5];
        indirect_atomic(
            &mut dst,
            &index,
            &value,
            2,
            AtomicKind::Add.code(),
            &mut out,
        );
        assert_eq!(out, [2, 1, 12, -9, 42]);
        assert_eq!(dst, [21, 42i32.wrapping_add(i32::MAX)]);

        let mut dst = [5u8, 5];
        let mut out = [0u8; 3];
        indirect_atomic(&mut dst, &[0i64, 0, 1], &[9u8, 3, 1], 2, 1, &mut out);
        assert_eq!((dst, out), ([9, 5], [5, 9, 5]));
        let mut dst = [5u8, 5];
        indirect_atomic(&mut dst, &[0i64, 0, 1], &[9u8, 3, 1], 2, 2, &mut out);
        assert_eq!((dst, out), ([3, 1], [5, 5, 5]));
        let mut dst = [5u8, 5];
        indirect_atomic(&mut dst, &[0i64, 0, 1], &[9u8, 3, 1], 2, 3, &mut out);
        assert_eq!((dst, out), ([3, 1], [5, 9, 5]));

        // Unknown kind: nothing, not even out.
        let mut dst = [5u8, 5];
        let mut out = [7u8; 3];
        indirect_atomic(&mut dst, &[0i64, 0, 1], &[9u8, 3, 1], 2, 4, &mut out);
        assert_eq!((dst, out), ([5, 5], [7, 7, 7]));

        // Floats: max ignores NaN; bound past dst is clamped.
        let mut dst = [f32::NAN, 1.0];
        let mut out = [0.0f32; 3];
        indirect_atomic(
            &mut dst,
            &[0i32, 1, 7],
            &[2.0, f32::NAN, 3.0],
            8,
            1,
            &mut out,
        );
        assert_eq!(dst, [2.0, 1.0]);
        assert!(out[0].is_nan());
        assert_eq!(&out[1..], [1.0, 0.0]);
        let mut dst = [0.5f64];
        let mut out = [0.0f64; 2];
        indirect_atomic(&mut dst, &[0i64, 0], &[0.25, -1.0], 1, 0, &mut out);
        assert_eq!((dst, out), ([-0.25], [0.5, 0.75]));
    }

    #[test]
    fn histogram_counts_in_range_values() {
        let mut out = [0i32, 100, 0, i32::MAX];
        histogram(&[0i32, 1, 1, -1, 4, 3, 0], &mut out);
        assert_eq!(out, [2, 102, 0, i32::MIN]);
        let mut out = [0i32; 2];
        histogram(&[1i64, i64::MAX, 1], &mut out);
        assert_eq!(out, [0, 2]);
        histogram::<i32>(&[0, 1], &mut []);
    }

    #[test]
    fn atomic_kinds_round_trip() {
        for k in [
            AtomicKind::Add,
            AtomicKind::Max,
            AtomicKind::Min,
            AtomicKind::Xchg,
        ] {
            assert_eq!(AtomicKind::from_code(k.code()), Some(k));
        }
        assert_eq!(AtomicKind::from_code(-1), None);
        assert_eq!(
            AtomicKind::from_op(tritium_dsl::ir::AtomicOp::Xchg),
            Some(AtomicKind::Xchg)
        );
    }
}

/// Runs the embedded host bitcode (MCJIT) against the Rust reference functions: the C ABI
/// of every entry kind, the semantics, and atomicity under threads.
#[cfg(test)]
mod compiled_tests {
    use super::*;
    use inkwell::context::Context;
    use inkwell::execution_engine::ExecutionEngine;
    use inkwell::memory_buffer::MemoryBuffer;
    use inkwell::module::Module;
    use inkwell::OptimizationLevel;

    /// `memref_t<T, R>` of `custom_op.h`.
    #[repr(C)]
    struct Memref<T, const R: usize> {
        allocated: *mut T,
        aligned: *mut T,
        offset: i64,
        sizes: [i64; R],
        strides: [i64; R],
    }

    /// A rank-1 memref over `v[1..]` (offset 1, to check that the library honours it).
    fn m1<T>(v: &mut [T]) -> Memref<T, 1> {
        Memref {
            allocated: v.as_mut_ptr(),
            aligned: v.as_mut_ptr(),
            offset: 1,
            sizes: [v.len() as i64 - 1],
            strides: [1],
        }
    }

    fn m2<T>(v: &mut [T], rows: usize, cols: usize) -> Memref<T, 2> {
        assert_eq!(v.len(), rows * cols);
        Memref {
            allocated: v.as_mut_ptr(),
            aligned: v.as_mut_ptr(),
            offset: 0,
            sizes: [rows as i64, cols as i64],
            strides: [cols as i64, 1],
        }
    }

    /// Test values from small integers (`as` conversion; int8 wraps).
    trait Small: Copy {
        fn small(v: u8) -> Self;
    }
    macro_rules! small {
        ($($t:ty),*) => {$( impl Small for $t { fn small(v: u8) -> Self { v as $t } } )*};
    }
    small!(i8, i16, i32, i64, u8, u16, u32, u64, f32, f64);

    /// A small deterministic generator (xorshift).
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
        /// In `lo..hi`.
        fn range(&mut self, lo: i64, hi: i64) -> i64 {
            lo + (self.next() % (hi - lo) as u64) as i64
        }
    }

    fn with_library(f: impl FnOnce(&ExecutionEngine<'_>)) {
        let ctx = Context::create();
        let buf = MemoryBuffer::create_from_memory_range_copy(BUILTINS_BC, "builtins.bc");
        let module = Module::parse_bitcode_from_buffer(&buf, &ctx).expect("valid bitcode");
        let ee = module
            .create_jit_execution_engine(OptimizationLevel::Default)
            .expect("an MCJIT engine");
        f(&ee)
    }

    fn addr(ee: &ExecutionEngine<'_>, name: &str) -> usize {
        ee.get_function_address(name)
            .unwrap_or_else(|e| panic!("{name}: {e:?}"))
    }

    type Gather<T, I> = unsafe extern "C" fn(*const T, *mut Memref<I, 1>, i64, *mut Memref<T, 1>);
    type Select<T, I> =
        unsafe extern "C" fn(*const T, *mut Memref<I, 1>, i64, i64, *mut Memref<T, 2>);
    type Atomic<T, I> = unsafe extern "C" fn(
        *mut T,
        *mut Memref<I, 1>,
        *mut Memref<T, 1>,
        i64,
        i32,
        *mut Memref<T, 1>,
    );
    type Histogram<I> = unsafe extern "C" fn(*mut Memref<I, 1>, *mut Memref<i32, 1>);

    fn check_gather<T, I>(ee: &ExecutionEngine<'_>, elem: &str, index: &str, rng: &mut Rng)
    where
        T: Copy + PartialEq + std::fmt::Debug + Small,
        I: Copy + Into<i64> + TryFrom<i64>,
        <I as TryFrom<i64>>::Error: std::fmt::Debug,
    {
        let f: Gather<T, I> = unsafe {
            std::mem::transmute::<usize, Gather<T, I>>(addr(
                ee,
                &entry(GATHER_LOAD, elem, index).unwrap(),
            ))
        };
        let src: Vec<T> = (0..40u8).map(T::small).collect();
        for bound in [0, 17, 40] {
            let mut idx: Vec<I> = (0..33)
                .map(|_| I::try_from(rng.range(-5, 45)).unwrap())
                .collect();
            let mut out: Vec<T> = (0..33).map(|i| T::small(100 + i as u8)).collect();
            let mut expect = out.clone();
            gather_load(&src, &idx[1..], bound, &mut expect[1..]);
            unsafe { f(src.as_ptr(), &mut m1(&mut idx), bound, &mut m1(&mut out)) };
            assert_eq!(out, expect, "gather_load {elem} {index} bound {bound}");
        }
    }

    fn check_select<T, I>(ee: &ExecutionEngine<'_>, elem: &str, index: &str, rng: &mut Rng)
    where
        T: Copy + PartialEq + std::fmt::Debug + Small,
        I: Copy + Into<i64> + TryFrom<i64>,
        <I as TryFrom<i64>>::Error: std::fmt::Debug,
    {
        let f: Select<T, I> = unsafe {
            std::mem::transmute::<usize, Select<T, I>>(addr(
                ee,
                &entry(INDEX_SELECT, elem, index).unwrap(),
            ))
        };
        // 10 rows of 7 with row stride 9.
        let src: Vec<T> = (0..90u8).map(T::small).collect();
        let (rows, cols) = (6, 7);
        let mut idx: Vec<I> = (0..rows + 1)
            .map(|_| I::try_from(rng.range(-3, 13)).unwrap())
            .collect();
        let mut out: Vec<T> = (0..rows * cols).map(|i| T::small(200 - i as u8)).collect();
        let mut expect = out.clone();
        index_select(&src, &idx[1..], 9, 10, &mut expect, cols);
        unsafe {
            f(
                src.as_ptr(),
                &mut m1(&mut idx),
                9,
                10,
                &mut m2(&mut out, rows, cols),
            )
        };
        assert_eq!(out, expect, "index_select {elem} {index}");
    }

    fn check_atomic<T, I>(ee: &ExecutionEngine<'_>, elem: &str, index: &str, rng: &mut Rng)
    where
        T: AtomicElem + PartialEq + std::fmt::Debug + Small,
        I: Copy + Into<i64> + TryFrom<i64>,
        <I as TryFrom<i64>>::Error: std::fmt::Debug,
    {
        let f: Atomic<T, I> = unsafe {
            std::mem::transmute::<usize, Atomic<T, I>>(addr(
                ee,
                &entry(INDIRECT_ATOMIC, elem, index).unwrap(),
            ))
        };
        for kind in [0, 1, 2, 3, 7] {
            let mut dst: Vec<T> = (0..8).map(|_| T::small(rng.range(0, 100) as u8)).collect();
            let mut idx: Vec<I> = (0..25)
                .map(|_| I::try_from(rng.range(-2, 10)).unwrap())
                .collect();
            let mut val: Vec<T> = (0..25).map(|_| T::small(rng.range(0, 100) as u8)).collect();
            let mut out: Vec<T> = vec![T::small(250); 25];
            let (mut dst_ref, mut out_ref) = (dst.clone(), out.clone());
            indirect_atomic(
                &mut dst_ref,
                &idx[1..],
                &val[1..],
                8,
                kind,
                &mut out_ref[1..],
            );
            unsafe {
                f(
                    dst.as_mut_ptr(),
                    &mut m1(&mut idx),
                    &mut m1(&mut val),
                    8,
                    kind,
                    &mut m1(&mut out),
                )
            };
            assert_eq!(
                (&dst, &out),
                (&dst_ref, &out_ref),
                "indirect_atomic {elem} {index} kind {kind}"
            );
        }
    }

    fn check_histogram<I>(ee: &ExecutionEngine<'_>, index: &str, rng: &mut Rng)
    where
        I: Copy + Into<i64> + TryFrom<i64>,
        <I as TryFrom<i64>>::Error: std::fmt::Debug,
    {
        let f: Histogram<I> = unsafe {
            std::mem::transmute::<usize, Histogram<I>>(addr(
                ee,
                &entry(HISTOGRAM, "int32", index).unwrap(),
            ))
        };
        let mut values: Vec<I> = (0..100)
            .map(|_| I::try_from(rng.range(-4, 20)).unwrap())
            .collect();
        let mut out: Vec<i32> = (0..17).map(|i| i * 3).collect();
        let mut expect = out.clone();
        histogram(&values[1..], &mut expect[1..]);
        unsafe { f(&mut m1(&mut values), &mut m1(&mut out)) };
        assert_eq!(out, expect, "histogram {index}");
    }

    macro_rules! each_index {
        ($check:ident, $ee:expr, $rng:expr, $($t:ty => $name:literal),*) => {$(
            $check::<$t, i32>($ee, $name, "int32", $rng);
            $check::<$t, i64>($ee, $name, "int64", $rng);
        )*};
    }

    #[test]
    fn library_matches_the_reference_semantics() {
        with_library(|ee| {
            let rng = &mut Rng(0x9E37_79B9_7F4A_7C15);
            each_index!(check_gather, ee, rng,
                i8 => "int8", i16 => "int16", i32 => "int32", i64 => "int64",
                u8 => "uint8", u16 => "uint16", u32 => "uint32", u64 => "uint64",
                u16 => "float16", u16 => "bfloat16", f32 => "float32", f64 => "float64");
            each_index!(check_select, ee, rng,
                i8 => "int8", i16 => "int16", i32 => "int32", i64 => "int64",
                u8 => "uint8", u16 => "uint16", u32 => "uint32", u64 => "uint64",
                u16 => "float16", u16 => "bfloat16", f32 => "float32", f64 => "float64");
            each_index!(check_atomic, ee, rng,
                i8 => "int8", i16 => "int16", i32 => "int32", i64 => "int64",
                u8 => "uint8", u16 => "uint16", u32 => "uint32", u64 => "uint64",
                f32 => "float32", f64 => "float64");
            check_histogram::<i32>(ee, "int32", rng);
            check_histogram::<i64>(ee, "int64", rng);
        });
    }

    /// int8 has no `From<u8>`; check its wrapping add and signed max directly.
    #[test]
    fn int8_atomics_are_signed_and_wrap() {
        with_library(|ee| {
            let f: Atomic<i8, i32> = unsafe {
                std::mem::transmute::<usize, Atomic<i8, i32>>(addr(
                    ee,
                    "_mlir_ciface___builtin_indirect_atomic_int8_int32",
                ))
            };
            for kind in 0..4 {
                let mut dst = [120i8, -128];
                let mut idx = [0i32, 0, 1, 0, 1];
                let mut val = [0i8, 10, -1, -100, 127];
                let mut out = [0i8; 5];
                let (mut dst_ref, mut out_ref) = (dst, out);
                indirect_atomic(
                    &mut dst_ref,
                    &idx[1..],
                    &val[1..],
                    2,
                    kind,
                    &mut out_ref[1..],
                );
                unsafe {
                    f(
                        dst.as_mut_ptr(),
                        &mut m1(&mut idx),
                        &mut m1(&mut val),
                        2,
                        kind,
                        &mut m1(&mut out),
                    )
                };
                assert_eq!((dst, out), (dst_ref, out_ref), "kind {kind}");
            }
        });
    }

    /// Threads adding into the same slots lose no update (float add is a CAS loop).
    #[test]
    fn atomics_are_atomic_across_threads() {
        with_library(|ee| {
            let fi = addr(ee, "_mlir_ciface___builtin_indirect_atomic_int32_int64");
            let ff = addr(ee, "_mlir_ciface___builtin_indirect_atomic_float32_int32");
            let mut ints = [0i32; 4];
            let mut floats = [0f32; 4];
            let (ip, fp) = (ints.as_mut_ptr() as usize, floats.as_mut_ptr() as usize);
            std::thread::scope(|s| {
                for _ in 0..4 {
                    s.spawn(move || {
                        let fi: Atomic<i32, i64> =
                            unsafe { std::mem::transmute::<usize, Atomic<i32, i64>>(fi) };
                        let ff: Atomic<f32, i32> =
                            unsafe { std::mem::transmute::<usize, Atomic<f32, i32>>(ff) };
                        for _ in 0..500 {
                            let mut idx64: Vec<i64> = (0..65).map(|i| i % 4).collect();
                            let mut idx32: Vec<i32> = (0..65).map(|i| i % 4).collect();
                            let mut vi = vec![1i32; 65];
                            let mut vf = vec![1f32; 65];
                            let mut oi = vec![0i32; 65];
                            let mut of = vec![0f32; 65];
                            unsafe {
                                fi(
                                    ip as *mut i32,
                                    &mut m1(&mut idx64),
                                    &mut m1(&mut vi),
                                    4,
                                    0,
                                    &mut m1(&mut oi),
                                );
                                ff(
                                    fp as *mut f32,
                                    &mut m1(&mut idx32),
                                    &mut m1(&mut vf),
                                    4,
                                    0,
                                    &mut m1(&mut of),
                                );
                            }
                        }
                    });
                }
            });
            assert_eq!(ints, [4 * 500 * 16; 4]);
            assert_eq!(floats, [(4 * 500 * 16) as f32; 4]);
        });
    }
}
