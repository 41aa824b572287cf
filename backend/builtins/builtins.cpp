// Tritium's builtin custom-op library: the `__builtin_*` ops (seed 003's names reserved
// for builtins), shipped inside the backend as LLVM bitcode (backend/build.rs compiles
// this file with tritium-build; backend/src/builtins.rs embeds it).
//
// Every entry uses the Simd convention (one call per program with whole tiles; the CPU
// lowering calls it in every mode): tiles are `memref_t<T, R>*`, contiguous row-major
// (offset honoured, strides not read); a kernel pointer is a `T*`; outputs hold the
// `out` tile's values on entry, which every lane that is not written keeps (the
// "other" value).
//
// Symbols (T: element str name, I: index str name; see docs/custom_ops.md):
//   _mlir_ciface___builtin_gather_load_<T>_<I>      T in ELEM, I in {int32, int64}
//   _mlir_ciface___builtin_index_select_<T>_<I>     T in ELEM
//   _mlir_ciface___builtin_indirect_atomic_<T>_<I>  T in ELEM minus the 16- and 8-bit floats
//   _mlir_ciface___builtin_histogram_<I>
// ELEM = int8 int16 int32 int64 uint8 uint16 uint32 uint64 float16 bfloat16 float32 float64
//        float8_e4m3fn float8_e5m2 float8_e4b15.
//
// Free of libc: no memcpy/memset, no libm, so the linked module needs no runtime.
// float16/bfloat16 are moved as their 16-bit patterns (uint16_t), the fp8s as bytes;
// nothing computes on them.
#include "custom_op.h"

namespace {

inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

// ---------------------------------------------------------------------------
// __builtin_gather_load: out[e] = src[index[e]] for 0 <= index[e] < bound.
// ---------------------------------------------------------------------------
template <class T, class I>
inline void gather_load(const T *src, memref_t<I, 1> *index, int64_t bound, memref_t<T, 1> *out) {
  const I *idx = memref_data(index);
  T *dst = memref_data(out);
  const int64_t n = min64(out->sizes[0], index->sizes[0]);
  for (int64_t e = 0; e < n; ++e) {
    const int64_t k = (int64_t)idx[e];
    if (k >= 0 && k < bound)
      dst[e] = src[k];
  }
}

// ---------------------------------------------------------------------------
// __builtin_index_select: out is [N, D]; row i = src[index[i] * row_stride + 0 .. D]
// for 0 <= index[i] < num_rows.
// ---------------------------------------------------------------------------
template <class T, class I>
inline void index_select(const T *src, memref_t<I, 1> *index, int64_t row_stride, int64_t num_rows,
                         memref_t<T, 2> *out) {
  const I *idx = memref_data(index);
  T *dst = memref_data(out);
  const int64_t rows = min64(out->sizes[0], index->sizes[0]);
  const int64_t d = out->sizes[1];
  for (int64_t i = 0; i < rows; ++i) {
    const int64_t k = (int64_t)idx[i];
    if (k < 0 || k >= num_rows)
      continue;
    const T *from = src + k * row_stride;
    T *to = dst + i * d;
    for (int64_t j = 0; j < d; ++j)
      to[j] = from[j];
  }
}

// ---------------------------------------------------------------------------
// __builtin_indirect_atomic: for 0 <= index[e] < bound, atomically (relaxed)
// dst[index[e]] = op(dst[index[e]], value[e]) and out[e] = the old value.
// kind: 0 add, 1 max, 2 min, 3 xchg; any other kind does nothing.
// ---------------------------------------------------------------------------
enum Kind : int32_t { KIND_ADD = 0, KIND_MAX = 1, KIND_MIN = 2, KIND_XCHG = 3 };

// Integers: native read-modify-write atomics (add wraps; max/min follow the sign).
template <class T> struct Atomic {
  static T apply(int32_t kind, T *p, T v) {
    switch (kind) {
    case KIND_ADD:
      return __atomic_fetch_add(p, v, __ATOMIC_RELAXED);
    case KIND_MAX:
      return __atomic_fetch_max(p, v, __ATOMIC_RELAXED);
    case KIND_MIN:
      return __atomic_fetch_min(p, v, __ATOMIC_RELAXED);
    default:
      return __atomic_exchange_n(p, v, __ATOMIC_RELAXED);
    }
  }
};

inline float fmax_of(float a, float b) { return __builtin_fmaxf(a, b); }
inline double fmax_of(double a, double b) { return __builtin_fmax(a, b); }
inline float fmin_of(float a, float b) { return __builtin_fminf(a, b); }
inline double fmin_of(double a, double b) { return __builtin_fmin(a, b); }

// Floats: a compare-and-swap loop on the bit pattern. max/min are IEEE 754-2019
// maximumNumber/minimumNumber, as Tritium's own max/min: NaN is ignored (maxnum/minnum)
// and -0 < +0 (equal operands combine their bits: only zeros differ); add rounds once.
template <class F, class U> struct AtomicFloat {
  static F max_number(F a, F b) {
    if (a == b)
      return __builtin_bit_cast(F, U(__builtin_bit_cast(U, a) & __builtin_bit_cast(U, b)));
    return fmax_of(a, b);
  }
  static F min_number(F a, F b) {
    if (a == b)
      return __builtin_bit_cast(F, U(__builtin_bit_cast(U, a) | __builtin_bit_cast(U, b)));
    return fmin_of(a, b);
  }
  static F combine(int32_t kind, F old, F v) {
    switch (kind) {
    case KIND_ADD:
      return old + v;
    case KIND_MAX:
      return max_number(old, v);
    case KIND_MIN:
      return min_number(old, v);
    default:
      return v;
    }
  }
  static F apply(int32_t kind, F *p, F v) {
    U *bits = reinterpret_cast<U *>(p);
    if (kind == KIND_XCHG)
      return __builtin_bit_cast(F, __atomic_exchange_n(bits, __builtin_bit_cast(U, v), __ATOMIC_RELAXED));
    U expected = __atomic_load_n(bits, __ATOMIC_RELAXED);
    for (;;) {
      const F old = __builtin_bit_cast(F, expected);
      const U desired = __builtin_bit_cast(U, combine(kind, old, v));
      if (desired == expected)
        return old;  // nothing to store: the atomic load is the operation
      if (__atomic_compare_exchange_n(bits, &expected, desired, /*weak=*/true, __ATOMIC_RELAXED,
                                      __ATOMIC_RELAXED))
        return old;
    }
  }
};
template <> struct Atomic<float> : AtomicFloat<float, uint32_t> {};
template <> struct Atomic<double> : AtomicFloat<double, uint64_t> {};

template <class T, class I>
inline void indirect_atomic(T *dst, memref_t<I, 1> *index, memref_t<T, 1> *value, int64_t bound,
                            int32_t kind, memref_t<T, 1> *out) {
  if (kind < KIND_ADD || kind > KIND_XCHG)
    return;
  const I *idx = memref_data(index);
  const T *val = memref_data(value);
  T *old = memref_data(out);
  const int64_t n = min64(out->sizes[0], min64(index->sizes[0], value->sizes[0]));
  for (int64_t e = 0; e < n; ++e) {
    const int64_t k = (int64_t)idx[e];
    if (k >= 0 && k < bound)
      old[e] = Atomic<T>::apply(kind, dst + k, val[e]);
  }
}

// ---------------------------------------------------------------------------
// __builtin_histogram: out has B = sizes[0] bins; out[values[e]] += 1 for
// 0 <= values[e] < B (wrapping int32 counts, starting from out's initial values).
// ---------------------------------------------------------------------------
template <class I> inline void histogram(memref_t<I, 1> *values, memref_t<int32_t, 1> *out) {
  const I *v = memref_data(values);
  int32_t *bins = memref_data(out);
  const int64_t n = values->sizes[0];
  const int64_t b = out->sizes[0];
  for (int64_t e = 0; e < n; ++e) {
    const int64_t k = (int64_t)v[e];
    if (k >= 0 && k < b)
      bins[k] = (int32_t)((uint32_t)bins[k] + 1u);
  }
}

} // namespace

// ---------------------------------------------------------------------------
// Explicit extern "C" instantiations
// ---------------------------------------------------------------------------

// X(str name, storage type) for every element type; float16/bfloat16/fp8 as bit patterns.
#define ATOMIC_ELEMS(X)                                                        \
  X(int8, int8_t)                                                              \
  X(int16, int16_t)                                                            \
  X(int32, int32_t)                                                            \
  X(int64, int64_t)                                                            \
  X(uint8, uint8_t)                                                            \
  X(uint16, uint16_t)                                                          \
  X(uint32, uint32_t)                                                          \
  X(uint64, uint64_t)                                                          \
  X(float32, float)                                                            \
  X(float64, double)
#define ALL_ELEMS(X)                                                           \
  ATOMIC_ELEMS(X)                                                              \
  X(float16, uint16_t)                                                         \
  X(bfloat16, uint16_t)                                                        \
  X(float8_e4m3fn, uint8_t)                                                    \
  X(float8_e5m2, uint8_t)                                                      \
  X(float8_e4b15, uint8_t)

#define GATHER_LOAD(TN, T, IN, I)                                              \
  extern "C" void _mlir_ciface___builtin_gather_load_##TN##_##IN(              \
      const T *src, memref_t<I, 1> *index, int64_t bound, memref_t<T, 1> *out) { \
    gather_load<T, I>(src, index, bound, out);                                 \
  }
#define INDEX_SELECT(TN, T, IN, I)                                             \
  extern "C" void _mlir_ciface___builtin_index_select_##TN##_##IN(             \
      const T *src, memref_t<I, 1> *index, int64_t row_stride, int64_t num_rows, \
      memref_t<T, 2> *out) {                                                   \
    index_select<T, I>(src, index, row_stride, num_rows, out);                 \
  }
#define INDIRECT_ATOMIC(TN, T, IN, I)                                          \
  extern "C" void _mlir_ciface___builtin_indirect_atomic_##TN##_##IN(          \
      T *dst, memref_t<I, 1> *index, memref_t<T, 1> *value, int64_t bound,     \
      int32_t kind, memref_t<T, 1> *out) {                                     \
    indirect_atomic<T, I>(dst, index, value, bound, kind, out);                \
  }

#define GATHER_LOAD_I32(TN, T) GATHER_LOAD(TN, T, int32, int32_t)
#define GATHER_LOAD_I64(TN, T) GATHER_LOAD(TN, T, int64, int64_t)
#define INDEX_SELECT_I32(TN, T) INDEX_SELECT(TN, T, int32, int32_t)
#define INDEX_SELECT_I64(TN, T) INDEX_SELECT(TN, T, int64, int64_t)
#define INDIRECT_ATOMIC_I32(TN, T) INDIRECT_ATOMIC(TN, T, int32, int32_t)
#define INDIRECT_ATOMIC_I64(TN, T) INDIRECT_ATOMIC(TN, T, int64, int64_t)

ALL_ELEMS(GATHER_LOAD_I32)
ALL_ELEMS(GATHER_LOAD_I64)
ALL_ELEMS(INDEX_SELECT_I32)
ALL_ELEMS(INDEX_SELECT_I64)
ATOMIC_ELEMS(INDIRECT_ATOMIC_I32)
ATOMIC_ELEMS(INDIRECT_ATOMIC_I64)

extern "C" void _mlir_ciface___builtin_histogram_int32(memref_t<int32_t, 1> *values,
                                                       memref_t<int32_t, 1> *out) {
  histogram<int32_t>(values, out);
}
extern "C" void _mlir_ciface___builtin_histogram_int64(memref_t<int64_t, 1> *values,
                                                       memref_t<int32_t, 1> *out) {
  histogram<int64_t>(values, out);
}
