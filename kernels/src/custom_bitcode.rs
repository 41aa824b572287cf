//! LLVM bitcode of the custom-op C++ sources in `csrc/`, compiled by `build.rs` with
//! `tritium-build` (clang 19) and embedded here.
//!
//! `csrc/add.cpp` defines (calling conventions in `docs/custom_ops.md`):
//!
//! | symbol | mode | what |
//! | --- | --- | --- |
//! | `_mlir_ciface_custom_add_{int32,float32,float16}` | Simd | `dst = src0 + src1`, rank 1 |
//! | `custom_add_simt_{int32,float32,float16}` | Simt | `a + b` |
//! | `custom_divmod_int32` | Simt, two outputs | `q = a / b`, `r = a % b`; `b == 0` gives 0, 0 |
//! | `_mlir_ciface_custom_divmod_int32` | Simd, two outputs | the same over rank-1 tiles |
//! | `_mlir_ciface_custom_scale_{float32,int32}_{1,2}d` | Simd | `out = in * 2`, rank 1 or 2 |
//! | `_mlir_ciface_custom_where_float32_{1,2}d` | Simd | `out` = the address of each `in` element |
//! | `_mlir_ciface_custom_where_out_int64_1d` | Simd | `out` = the address of each `out` element |
//! | `custom_add_sub_{int32,int64,float32,float16}` | Simt, two outputs | `a + b`, `a - b` |
//! | `custom_fp8e4m3_to_float16` | Simt | an E4M3FN byte as f16 |
//! | `custom_u8_max_float32` | Simt, two outputs | `(int32)a`, `max((float)a, b)` |

/// `csrc/add.cpp` compiled for the host CPU (`$OUT_DIR/add.bc`).
pub static ADD_BC: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/add.bc"));

/// `csrc/add.cpp` compiled for `nvptx64-nvidia-cuda`, sm_80 (`$OUT_DIR/add.nvptx.bc`).
pub static ADD_NVPTX_BC: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/add.nvptx.bc"));

/// Every symbol `csrc/add.cpp` exports, in both bitcode files.
pub const ADD_SYMBOLS: &[&str] = &[
    "_mlir_ciface_custom_add_int32",
    "_mlir_ciface_custom_add_float32",
    "_mlir_ciface_custom_add_float16",
    "custom_add_simt_int32",
    "custom_add_simt_float32",
    "custom_add_simt_float16",
    "custom_divmod_int32",
    "_mlir_ciface_custom_divmod_int32",
    "_mlir_ciface_custom_scale_float32_1d",
    "_mlir_ciface_custom_scale_float32_2d",
    "_mlir_ciface_custom_scale_int32_1d",
    "_mlir_ciface_custom_scale_int32_2d",
    "_mlir_ciface_custom_where_float32_1d",
    "_mlir_ciface_custom_where_float32_2d",
    "_mlir_ciface_custom_where_out_int64_1d",
    "custom_add_sub_int32",
    "custom_add_sub_int64",
    "custom_add_sub_float32",
    "custom_add_sub_float16",
    "custom_fp8e4m3_to_float16",
    "custom_u8_max_float32",
];

#[cfg(test)]
mod tests {
    use super::*;

    fn is_bitcode(bytes: &[u8]) -> bool {
        bytes.starts_with(b"BC\xC0\xDE") || bytes.starts_with(&[0xDE, 0xC0, 0x17, 0x0B])
    }

    fn has(bytes: &[u8], needle: &str) -> bool {
        bytes.windows(needle.len()).any(|w| w == needle.as_bytes())
    }

    #[test]
    fn embedded_bitcode_has_the_magic() {
        assert!(is_bitcode(ADD_BC));
        assert!(is_bitcode(ADD_NVPTX_BC));
    }

    /// Function names sit uncompressed in the bitcode's string table.
    #[test]
    fn embedded_bitcode_defines_every_symbol() {
        for (which, bc) in [("add.bc", ADD_BC), ("add.nvptx.bc", ADD_NVPTX_BC)] {
            for sym in ADD_SYMBOLS {
                assert!(has(bc, sym), "{sym} missing from {which}");
            }
        }
        assert!(has(ADD_NVPTX_BC, "nvptx64-nvidia-cuda"));
    }
}
