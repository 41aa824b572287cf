// C++ shape and type inference (FuncInferShape / FuncInferType) with MindSpore's TypeId values;
// the output is the elementwise product of x (float32) and y (float16) as float16.
#include <cstdint>
#include <cstring>
#include <vector>
#include "custom_aot_extra.h"
#include "custom_aot_typeid.h"

static float HalfToFloat(uint16_t h) {
  uint32_t sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1f, mant = h & 0x3ff, bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {
      exp = 127 - 15 + 1;
      while ((mant & 0x400) == 0) { mant <<= 1; exp--; }
      bits = sign | (exp << 23) | ((mant & 0x3ff) << 13);
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

static uint16_t FloatToHalf(float f) {  // round to nearest even; enough for test values
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000u;
  int32_t exp = static_cast<int32_t>((x >> 23) & 0xff) - 127 + 15;
  uint32_t mant = x & 0x7fffff;
  if (exp <= 0) return static_cast<uint16_t>(sign);
  if (exp >= 31) return static_cast<uint16_t>(sign | 0x7c00u);
  uint32_t h = sign | (static_cast<uint32_t>(exp) << 10) | (mant >> 13);
  uint32_t rest = mant & 0x1fff;
  if (rest > 0x1000 || (rest == 0x1000 && (h & 1))) h++;
  return static_cast<uint16_t>(h);
}

extern "C" std::vector<int64_t> MulMixedInferShape(int *ndims, int64_t **shapes, AotExtra *extra) {
  return std::vector<int64_t>(shapes[0], shapes[0] + ndims[0]);
}

extern "C" TypeId MulMixedInferType(std::vector<TypeId> type_ids, AotExtra *extra) {
  if (type_ids.size() != 2 || type_ids[0] != kNumberTypeFloat32 || type_ids[1] != kNumberTypeFloat16) {
    return kTypeUnknown;
  }
  return kNumberTypeFloat16;
}

extern "C" int MulMixed(int nparam, void **params, int *ndims, int64_t **shapes, const char **dtypes, void *stream,
                        void *extra) {
  if (nparam != 3) return 1;
  if (std::strcmp(dtypes[0], "float32") || std::strcmp(dtypes[1], "float16") || std::strcmp(dtypes[2], "float16")) {
    return 2;
  }
  const float *x = static_cast<const float *>(params[0]);
  const uint16_t *y = static_cast<const uint16_t *>(params[1]);
  uint16_t *out = static_cast<uint16_t *>(params[2]);
  int64_t n = 1;
  for (int i = 0; i < ndims[2]; i++) n *= shapes[2][i];
  for (int64_t i = 0; i < n; i++) out[i] = FloatToHalf(x[i] * HalfToFloat(y[i]));
  return 0;
}
