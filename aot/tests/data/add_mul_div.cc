// Three outputs (CPU edition of MindSpore's add_mul_div.cu): x + y, x * y, x / y.
#include <cstring>
#include <vector>
#include "custom_aot_extra.h"

extern "C" std::vector<std::vector<int64_t>> CustomAddMulDivInferShape(int *ndims, int64_t **shapes,
                                                                        AotExtra *extra) {
  std::vector<int64_t> s(shapes[0], shapes[0] + ndims[0]);
  return {s, s, s};
}

extern "C" int CustomAddMulDiv(int nparam, void **params, int *ndims, int64_t **shapes, const char **dtypes,
                               void *stream, void *extra) {
  constexpr int OUTPUT_INDEX = 2;
  constexpr int TOTAL_PARAM_NUM = 5;
  if (nparam != TOTAL_PARAM_NUM) return 1;
  for (int i = 0; i < nparam; i++) {
    if (std::strcmp(dtypes[i], "float32") != 0) return 2;
  }
  const float *x = static_cast<const float *>(params[0]);
  const float *y = static_cast<const float *>(params[1]);
  float *o1 = static_cast<float *>(params[2]);
  float *o2 = static_cast<float *>(params[3]);
  float *o3 = static_cast<float *>(params[4]);
  size_t size = 1;
  for (int i = 0; i < ndims[OUTPUT_INDEX]; i++) size *= shapes[OUTPUT_INDEX][i];
  for (size_t i = 0; i < size; i++) {
    o1[i] = x[i] + y[i];
    o2[i] = x[i] * y[i];
    o3[i] = x[i] / y[i];
  }
  return 0;
}
