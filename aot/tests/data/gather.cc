// Gather rows of a float32 matrix by int64 indices: out[i, :] = data[indices[i], :].
// Shape and type inference in C++; a bad index is reported by return code 5.
#include <cstring>
#include <vector>
#include "custom_aot_extra.h"
enum TypeId : int {};

extern "C" std::vector<int64_t> GatherInferShape(int *ndims, int64_t **shapes, AotExtra *extra) {
  if (shapes[0][0] == -2 || shapes[1][0] == -2) return {-2};
  return {shapes[1][0], shapes[0][1]};
}

extern "C" TypeId GatherInferType(std::vector<TypeId> type_ids, AotExtra *extra) { return type_ids[0]; }

extern "C" int Gather(int nparam, void **params, int *ndims, int64_t **shapes, const char **dtypes, void *stream,
                      void *extra) {
  if (nparam != 3 || std::strcmp(dtypes[1], "int64") != 0) return 1;
  const float *data = static_cast<const float *>(params[0]);
  const int64_t *idx = static_cast<const int64_t *>(params[1]);
  float *out = static_cast<float *>(params[2]);
  int64_t rows = shapes[0][0], cols = shapes[0][1], m = shapes[1][0];
  for (int64_t i = 0; i < m; i++) {
    if (idx[i] < 0 || idx[i] >= rows) return 5;
    std::memcpy(out + i * cols, data + idx[i] * cols, cols * sizeof(float));
  }
  return 0;
}
