// custom_op.h: the C++ side of Tritium custom ops.
//
// Include this from C++ sources compiled to LLVM bitcode for `custom(...)` calls
// (with `tritium-build` in a build.rs, the include directory is added for you).
// It is header-only, C++17, and freestanding: it includes nothing beyond
// <stdint.h>, <stddef.h> and <stdbool.h>, so the same source compiles for the host
// and for `nvptx64-nvidia-cuda`.
//
// Calling conventions (docs/custom_ops.md, "Calling conventions"):
//   Simd  one call per program:
//           extern "C" void _mlir_ciface_<symbol>(inputs..., outputs..., extra buffers...)
//         a tile of rank R and element T is a `memref_t<T, R>*` (contiguous row-major,
//         offset 0, allocated == aligned); a scalar is passed by value; a pointer
//         (`ptr<T>`) is a `T*`. Outputs hold the `out` tile's values on entry and the
//         results on return; extra buffers are zero-filled `memref_t<T, 1>*`.
//   Simt  one call per element of the output shape:
//           extern "C" T <symbol>(A0 a0, A1 a1, ...)             // one output
//           extern "C" void <symbol>(ins..., T0* out0, T1* out1) // several outputs
//   Mix   the backend calls the Simt entry `<symbol>` when the bitcode defines it,
//         else the Simd entry `_mlir_ciface_<symbol>`.
//
// Cooperative Simd: a Simd entry that calls tritium_thread_index(),
// tritium_thread_count() or tritium_barrier() (below) is called by every thread of
// the CUDA CTA with the same descriptors (tiles in shared memory) and splits the work
// itself; one that calls none of them is called by one thread. On the CPU both are
// called once per program (index 0, count 1, the barrier a no-op).
//
// Element types: bool, int8_t..int64_t, uint8_t..uint64_t, half (_Float16),
// bfloat16_t (__bf16), float, double.

#ifndef TRITIUM_CUSTOM_OP_H
#define TRITIUM_CUSTOM_OP_H

#ifndef __cplusplus
#error "custom_op.h is a C++17 header: compile with -x c++ -std=c++17"
#endif

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TRITIUM_CUSTOM_OP_H_VERSION 2

// ---------------------------------------------------------------------------
// Element types
// ---------------------------------------------------------------------------

// Define TRITIUM_NO_HALF_TYPEDEFS before including this header when another header
// (CUDA's cuda_fp16.h, …) already defines `half`; use _Float16 and __bf16 directly then.
#ifndef TRITIUM_NO_HALF_TYPEDEFS
// IEEE binary16 (Tritium's f16, triton-ascend's `half`). Arithmetic on the host is
// done in float and rounded, exactly as Tritium's own f16 code.
typedef _Float16 half;
// bfloat16 (Tritium's bf16, triton-ascend's `bfloat16_t`).
typedef __bf16 bfloat16_t;
#endif

// ---------------------------------------------------------------------------
// memref_t: MLIR's ranked memref descriptor, the seed's layout
//
//   template <class T, size_t R> struct memref_t {
//     T *allocated; T *aligned; int64_t offset; int64_t sizes[R]; int64_t strides[R];
//   };
//
// Element (i0, ..., iR-1) lives at aligned[offset + i0*strides[0] + ... ].
//
// The header declares the primary template and defines it through partial
// specializations for ranks 1..8. That way a source that carries its own
// definition of the primary template (as triton-ascend's add.cpp does) still
// compiles against this header unchanged: its definition becomes the primary
// template, used only for ranks above 8, and every rank up to 8 resolves to the
// identical layout below.
// ---------------------------------------------------------------------------

template <class T, size_t R> struct memref_t;

#define TRITIUM_MEMREF_RANK(R)                                                 \
  template <class T> struct memref_t<T, R> {                                   \
    T *allocated;                                                              \
    T *aligned;                                                                \
    int64_t offset;                                                            \
    int64_t sizes[R];                                                          \
    int64_t strides[R];                                                        \
  };
TRITIUM_MEMREF_RANK(1)
TRITIUM_MEMREF_RANK(2)
TRITIUM_MEMREF_RANK(3)
TRITIUM_MEMREF_RANK(4)
TRITIUM_MEMREF_RANK(5)
TRITIUM_MEMREF_RANK(6)
TRITIUM_MEMREF_RANK(7)
TRITIUM_MEMREF_RANK(8)
#undef TRITIUM_MEMREF_RANK

// Rank of a memref type: tritium_rank<memref_t<float, 2>>::value == 2.
template <class M> struct tritium_rank;
template <class T, size_t R> struct tritium_rank<memref_t<T, R>> {
  static constexpr size_t value = R;
};

// ---------------------------------------------------------------------------
// Helpers (all inline, no libc)
// ---------------------------------------------------------------------------

#define TRITIUM_INLINE inline __attribute__((always_inline))

// Number of elements: the product of sizes.
template <class T, size_t R>
TRITIUM_INLINE int64_t memref_numel(const memref_t<T, R> *m) {
  int64_t n = 1;
  for (size_t d = 0; d < R; ++d)
    n *= m->sizes[d];
  return n;
}

// Pointer to the first element: aligned + offset.
template <class T, size_t R> TRITIUM_INLINE T *memref_data(const memref_t<T, R> *m) {
  return m->aligned + m->offset;
}

// True when the strides are the row-major strides of sizes (Tritium always
// passes such memrefs; a size-1 dimension's stride is not checked).
template <class T, size_t R>
TRITIUM_INLINE bool memref_is_contiguous(const memref_t<T, R> *m) {
  int64_t expect = 1;
  for (size_t k = R; k-- > 0;) {
    if (m->sizes[k] != 1 && m->strides[k] != expect)
      return false;
    expect *= m->sizes[k];
  }
  return true;
}

// Linear element offset of the multi-index idx[R] (without m->offset).
template <class T, size_t R>
TRITIUM_INLINE int64_t memref_linear(const memref_t<T, R> *m, const int64_t (&idx)[R]) {
  int64_t at = 0;
  for (size_t d = 0; d < R; ++d)
    at += idx[d] * m->strides[d];
  return at;
}

// Reference to the element at (i0, ..., iR-1): memref_at(m, i), memref_at(m, i, j).
template <class T, size_t R, class... I>
TRITIUM_INLINE T &memref_at(const memref_t<T, R> *m, I... idx) {
  static_assert(sizeof...(I) == R, "memref_at: give one index per dimension");
  const int64_t at[R] = {static_cast<int64_t>(idx)...};
  return m->aligned[m->offset + memref_linear(m, at)];
}

// ---------------------------------------------------------------------------
// Entry-point macros (optional; plain `extern "C"` definitions work the same)
//
//   TRITIUM_SIMD(custom_add_int32)(memref_t<int32_t, 1> *a, ...) { ... }
//     defines extern "C" void _mlir_ciface_custom_add_int32(...)
//   TRITIUM_SIMT(int32_t, custom_add_simt_int32)(int32_t a, int32_t b) { ... }
//     defines extern "C" int32_t custom_add_simt_int32(...)
// ---------------------------------------------------------------------------

// ---------------------------------------------------------------------------
// Cooperative Simd helpers (docs/custom_ops.md, "Cooperative Simd")
//
//   for (int64_t i = tritium_thread_index(); i < n; i += tritium_thread_count())
//     out[i] = a[i] + b[i];
//   tritium_barrier();   // every caller's writes above are visible below
//
// Calling any of them from a Simd entry (directly or through functions it calls)
// makes the op cooperative: on CUDA every thread of the CTA calls the entry, the
// tiles are in shared memory, and tritium_barrier() is the CTA barrier (call it from
// every thread, in uniform control flow). On the host they are 0, 1 and a no-op, so
// the same source runs one call per program on the CPU. They are weak definitions
// so that Tritium's link step can substitute its own (the CUDA emulator does: each
// emulated GPU thread gets its index, the CTA's size and the emulator's barrier);
// they are inlined after linking.
// ---------------------------------------------------------------------------

#if defined(__NVPTX__)
extern "C" __attribute__((weak)) int64_t tritium_thread_index(void) {
  return (int64_t)__nvvm_read_ptx_sreg_tid_x();
}
extern "C" __attribute__((weak)) int64_t tritium_thread_count(void) {
  return (int64_t)__nvvm_read_ptx_sreg_ntid_x();
}
extern "C" __attribute__((weak)) void tritium_barrier(void) { __syncthreads(); }
#else
// The index of the calling thread among the op's callers: 0 <= index < count.
extern "C" __attribute__((weak)) int64_t tritium_thread_index(void) { return 0; }
// How many threads call the op together (1 on the CPU).
extern "C" __attribute__((weak)) int64_t tritium_thread_count(void) { return 1; }
// Waits until every caller arrives; memory written before is visible after.
extern "C" __attribute__((weak)) void tritium_barrier(void) {}
#endif

#define TRITIUM_SIMD_SYMBOL(symbol) _mlir_ciface_##symbol
#define TRITIUM_SIMD(symbol) extern "C" void TRITIUM_SIMD_SYMBOL(symbol)
#define TRITIUM_SIMT(ret, symbol) extern "C" ret symbol

#endif // TRITIUM_CUSTOM_OP_H
