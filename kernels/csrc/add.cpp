// Custom-op implementations used by Tritium's custom-op tests and examples.
//
// Compiled by kernels/build.rs (tritium-build) into $OUT_DIR/add.bc (host) and
// $OUT_DIR/add.nvptx.bc (nvptx64-nvidia-cuda, sm_80); embedded by
// kernels/src/custom_bitcode.rs. Calling conventions: docs/custom_ops.md.
//
// Entries (dtype names are Tritium's str names: int32, float32, float16):
//   Simd  _mlir_ciface_custom_add_<dtype>(src0, src1, dst)        dst = src0 + src1
//   Simt  custom_add_simt_<dtype>(a, b) -> a + b
//   Simt  custom_divmod_int32(a, b, *q, *r)                        two outputs
//   Simd  _mlir_ciface_custom_divmod_int32(a, b, q, r)
//   Simd  _mlir_ciface_custom_scale_<dtype>_<R>d(in, out)         out = in * 2, R = 1, 2
//   Simd  _mlir_ciface_custom_where_float32_<R>d(in, out)          out = the address of each in element
//   Simd  _mlir_ciface_custom_where_out_int64_1d(in, out)          out = the address of each out element
//   Simd  _mlir_ciface_custom_cumsum_float32(in, out, acc)         prefix sum; acc: extra f64 buffer
//   Simt  custom_widen_mul_int32(a, b) -> a * b                    int8 inputs widened by overrides
//   Simd  _mlir_ciface_custom_add_reversed_<dtype>(src0, src1, dst) dst[i] = src0[n-1-i] + src1[n-1-i]
//         cooperative: the CTA's threads split it, with a barrier between two phases
//   Simt  custom_funnel_shift_uint32(lo, hi, n)                   PTX's shf.l.wrap.b32: the
//         high word of (hi:lo) << (n & 31), the fallback of tests/inline_asm.rs
//   Simt  custom_add_sub_<dtype>(a, b, *sum, *diff)               two outputs: a + b, a - b
//         (int32, int64, float32, float16); inline asm fallback with several results
//   Simt  custom_fp8e4m3_to_float16(x) -> half                    an E4M3FN byte as f16
//   Simt  custom_u8_max_float32(a, b, *ai, *m)                    ai = a, m = max(a, b):
//         Triton's inline_asm_elementwise example (an int32 and a float32 result)
#include "custom_op.h"

// Integer arithmetic wraps (as Tritium's own integer ops): computed on the unsigned type.
template <class T> static inline T add_values(T a, T b) { return a + b; }
template <> inline int32_t add_values<int32_t>(int32_t a, int32_t b) {
  return (int32_t)((uint32_t)a + (uint32_t)b);
}
template <class T> static inline T twice(T a) { return a * (T)2; }
template <> inline int32_t twice<int32_t>(int32_t a) {
  return (int32_t)((uint32_t)a * 2u);
}

// ---------------------------------------------------------------------------
// add: the seed's custom op (triton-ascend's add.cpp without the Ascend vadd
// intrinsic). Rank-1 tiles; the length is dst's.
// ---------------------------------------------------------------------------

template <class T>
static inline void add_simd(memref_t<T, 1> *src0, memref_t<T, 1> *src1, memref_t<T, 1> *dst) {
  const T *a = src0->aligned + src0->offset;
  const T *b = src1->aligned + src1->offset;
  T *out = dst->aligned + dst->offset;
  const int64_t n = dst->sizes[0];
  for (int64_t i = 0; i < n; ++i)
    out[i] = add_values(a[i], b[i]);
}

#define DEFINE_ADD(NAME, T)                                                    \
  extern "C" void _mlir_ciface_custom_add_##NAME(                              \
      memref_t<T, 1> *src0, memref_t<T, 1> *src1, memref_t<T, 1> *dst) {       \
    add_simd<T>(src0, src1, dst);                                              \
  }                                                                            \
  extern "C" T custom_add_simt_##NAME(T a, T b) { return add_values(a, b); }

DEFINE_ADD(int32, int32_t)
DEFINE_ADD(float32, float)
DEFINE_ADD(float16, half)

// ---------------------------------------------------------------------------
// divmod: two outputs. Truncating division with the remainder taking the sign of a
// (C's / and %), and no undefined behaviour, as Tritium's integer div/rem:
//   b == 0            -> q = 0, r = 0
//   a == INT32_MIN, b == -1 -> q = INT32_MIN (wraps), r = 0
// ---------------------------------------------------------------------------

static inline void divmod(int32_t a, int32_t b, int32_t *q, int32_t *r) {
  if (b == 0) {
    *q = 0;
    *r = 0;
  } else if (b == -1) {
    *q = (int32_t)(0u - (uint32_t)a);
    *r = 0;
  } else {
    *q = a / b;
    *r = a % b;
  }
}

// Simt: one call per element; q and r point to that element's initial out values.
extern "C" void custom_divmod_int32(int32_t a, int32_t b, int32_t *q, int32_t *r) {
  divmod(a, b, q, r);
}

// Simd: whole rank-1 tiles; the length is q's.
extern "C" void _mlir_ciface_custom_divmod_int32(memref_t<int32_t, 1> *a, memref_t<int32_t, 1> *b,
                                                 memref_t<int32_t, 1> *q, memref_t<int32_t, 1> *r) {
  const int32_t *pa = memref_data(a);
  const int32_t *pb = memref_data(b);
  int32_t *pq = memref_data(q);
  int32_t *pr = memref_data(r);
  const int64_t n = q->sizes[0];
  for (int64_t i = 0; i < n; ++i)
    divmod(pa[i], pb[i], &pq[i], &pr[i]);
}

// ---------------------------------------------------------------------------
// scale: a rank-dependent symbol (custom_scale_<dtype>_<R>d), out = in * 2 over every
// element, walking the sizes (and strides) of rank R.
// ---------------------------------------------------------------------------

template <class T> static inline void scale(memref_t<T, 1> *in, memref_t<T, 1> *out) {
  for (int64_t i = 0; i < out->sizes[0]; ++i)
    memref_at(out, i) = twice(memref_at(in, i));
}

template <class T> static inline void scale(memref_t<T, 2> *in, memref_t<T, 2> *out) {
  for (int64_t i = 0; i < out->sizes[0]; ++i)
    for (int64_t j = 0; j < out->sizes[1]; ++j)
      memref_at(out, i, j) = twice(memref_at(in, i, j));
}

#define DEFINE_SCALE(NAME, T, R)                                               \
  extern "C" void _mlir_ciface_custom_scale_##NAME##_##R##d(memref_t<T, R> *in, \
                                                            memref_t<T, R> *out) { \
    scale(in, out);                                                            \
  }

// ---------------------------------------------------------------------------
// where: the address the C++ reads each input element from (tests see whether a tile
// was passed in place or as a copy), R = 1, 2.
// ---------------------------------------------------------------------------

static inline int64_t address_of(const float *p) { return (int64_t)(intptr_t)p; }

extern "C" void _mlir_ciface_custom_where_float32_1d(memref_t<float, 1> *in,
                                                     memref_t<int64_t, 1> *out) {
  for (int64_t i = 0; i < out->sizes[0]; ++i)
    memref_at(out, i) = address_of(&memref_at(in, i));
}

extern "C" void _mlir_ciface_custom_where_float32_2d(memref_t<float, 2> *in,
                                                     memref_t<int64_t, 2> *out) {
  for (int64_t i = 0; i < out->sizes[0]; ++i)
    for (int64_t j = 0; j < out->sizes[1]; ++j)
      memref_at(out, i, j) = address_of(&memref_at(in, i, j));
}

// where_out: the address the C++ writes each out element to (the input gives the length).
extern "C" void _mlir_ciface_custom_where_out_int64_1d(memref_t<int64_t, 1> * /*in*/,
                                                       memref_t<int64_t, 1> *out) {
  for (int64_t i = 0; i < out->sizes[0]; ++i)
    memref_at(out, i) = (int64_t)(intptr_t)&memref_at(out, i);
}

DEFINE_SCALE(float32, float, 1)
DEFINE_SCALE(float32, float, 2)
DEFINE_SCALE(int32, int32_t, 1)
DEFINE_SCALE(int32, int32_t, 2)

// ---------------------------------------------------------------------------
// cumsum: out[i] = in[0] + ... + in[i], accumulated in double in an extra temp buffer
// (CustomImpl::extra_buffer(F64, n)) and rounded once per element. A temp buffer shorter
// than the tile cannot hold the sums: the outputs are then NaN, which tests would see.
// ---------------------------------------------------------------------------

extern "C" void _mlir_ciface_custom_cumsum_float32(memref_t<float, 1> *in, memref_t<float, 1> *out,
                                                   memref_t<double, 1> *acc) {
  const int64_t n = out->sizes[0];
  if (acc->sizes[0] < n) {
    for (int64_t i = 0; i < n; ++i)
      memref_at(out, i) = __builtin_nanf("");
    return;
  }
  double running = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    running += (double)memref_at(in, i);
    memref_at(acc, i) = running;
  }
  for (int64_t i = 0; i < n; ++i)
    memref_at(out, i) = (float)memref_at(acc, i);
}

// ---------------------------------------------------------------------------
// widen_mul: a Simt op over int32. Its registration converts int8 inputs to int32 with
// per-argument dtype overrides (CustomImpl::arg_dtype), so the product cannot overflow.
// ---------------------------------------------------------------------------

// Wraps like Tritium's `mul` (a signed overflow would be undefined behaviour: inlined into
// a kernel, clang's `mul nsw` let LLVM fold `(a * b) % 20` differently from the
// interpreter's call; fuzzer seed 601196).
extern "C" int32_t custom_widen_mul_int32(int32_t a, int32_t b) {
  return (int32_t)((uint32_t)a * (uint32_t)b);
}

// ---------------------------------------------------------------------------
// add_reversed: a cooperative Simd op (custom_op.h's thread helpers). On CUDA every
// thread of the CTA calls it with the same tiles in shared memory:
//   phase 1: each thread adds its strided share of elements into dst;
//   barrier: every thread's phase-1 writes are visible;
//   phase 2: each thread swaps its share of pairs (i, n-1-i), reading elements that
//            other threads wrote in phase 1.
// On the CPU it is one call (index 0, count 1), which does all of both phases.
// ---------------------------------------------------------------------------

template <class T>
static inline void add_reversed(memref_t<T, 1> *src0, memref_t<T, 1> *src1, memref_t<T, 1> *dst) {
  const T *a = memref_data(src0);
  const T *b = memref_data(src1);
  T *out = memref_data(dst);
  const int64_t n = dst->sizes[0];
  const int64_t me = tritium_thread_index(), count = tritium_thread_count();
  for (int64_t i = me; i < n; i += count)
    out[i] = add_values(a[i], b[i]);
  tritium_barrier();
  for (int64_t i = me; i < n / 2; i += count) {
    T x = out[i];
    out[i] = out[n - 1 - i];
    out[n - 1 - i] = x;
  }
  tritium_barrier();
}

#define DEFINE_ADD_REVERSED(NAME, T)                                           \
  extern "C" void _mlir_ciface_custom_add_reversed_##NAME(                     \
      memref_t<T, 1> *src0, memref_t<T, 1> *src1, memref_t<T, 1> *dst) {       \
    add_reversed<T>(src0, src1, dst);                                          \
  }

DEFINE_ADD_REVERSED(int32, int32_t)
DEFINE_ADD_REVERSED(float32, float)

// ---------------------------------------------------------------------------
// funnel_shift: the host fallback of an inline_asm_elementwise call of
// `shf.l.wrap.b32 $0, $1, $2, $3;` (tests/inline_asm.rs): the high 32 bits of the
// 64-bit value hi:lo shifted left by n mod 32.
// ---------------------------------------------------------------------------

extern "C" uint32_t custom_funnel_shift_uint32(uint32_t lo, uint32_t hi, uint32_t n) {
  const uint64_t v = ((uint64_t)hi << 32) | (uint64_t)lo;
  return (uint32_t)((v << (n & 31u)) >> 32);
}

// ---------------------------------------------------------------------------
// Host fallbacks of tests/inline_asm.rs's calls with several results and wide packs.
// ---------------------------------------------------------------------------

// add_sub: two outputs, a + b and a - b; integers wrap.
template <class T> static inline T sub_values(T a, T b) { return a - b; }
template <> inline int32_t sub_values<int32_t>(int32_t a, int32_t b) {
  return (int32_t)((uint32_t)a - (uint32_t)b);
}
template <> inline int64_t add_values<int64_t>(int64_t a, int64_t b) {
  return (int64_t)((uint64_t)a + (uint64_t)b);
}
template <> inline int64_t sub_values<int64_t>(int64_t a, int64_t b) {
  return (int64_t)((uint64_t)a - (uint64_t)b);
}

#define DEFINE_ADD_SUB(NAME, T)                                                \
  extern "C" void custom_add_sub_##NAME(T a, T b, T *sum, T *diff) {           \
    *sum = add_values(a, b);                                                   \
    *diff = sub_values(a, b);                                                  \
  }

DEFINE_ADD_SUB(int32, int32_t)
DEFINE_ADD_SUB(int64, int64_t)
DEFINE_ADD_SUB(float32, float)
DEFINE_ADD_SUB(float16, half)

// fp8e4m3_to_float16: an E4M3FN byte (sign, 4 exponent bits biased by 7, 3 mantissa
// bits; no infinities, 0x7f and 0xff NaN) as f16, exactly: PTX's cvt.rn.f16x2.e4m3x2.
extern "C" half custom_fp8e4m3_to_float16(uint8_t x) {
  const uint32_t e = (x >> 3) & 15u, m = x & 7u;
  float v;
  if (e == 15u && m == 7u) {
    v = __builtin_nanf("");
  } else {
    // (e ? 8 + m : m) * 2^((e ? e : 1) - 10), the scale built from its exponent bits.
    const float scale = __builtin_bit_cast(float, (uint32_t)(127u + (e ? e : 1u) - 10u) << 23);
    v = (float)(e ? 8u + m : m) * scale;
  }
  return (half)((x & 0x80u) ? -v : v);
}

// u8_max_float32: Triton's inline_asm_elementwise example, ai = (int32)a and
// m = max((float)a, b) (PTX's max.f32: a NaN b gives the other operand).
extern "C" void custom_u8_max_float32(uint8_t a, float b, int32_t *ai, float *m) {
  const float af = (float)a;
  *ai = (int32_t)a;
  *m = (b > af) ? b : af;
}
