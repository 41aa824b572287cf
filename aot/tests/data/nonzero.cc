// A where/nonzero operator with a data-dependent output shape (GE style): the output is
// allocated at its upper bound [n, 1]; the kernel writes the indices of the non-zero inputs and
// the real shape [2, count, 1] into the uint64 shape buffer that follows the output.
#include <cstdint>

extern "C" int NonZero(int nparam, void **params, int *ndims, int64_t **shapes, const char **dtypes, void *stream,
                       void *extra) {
  if (nparam != 3) return 1;  // input, output, shape buffer
  const float *x = static_cast<const float *>(params[0]);
  int64_t *out = static_cast<int64_t *>(params[1]);
  uint64_t *shape = static_cast<uint64_t *>(params[2]);
  int64_t n = shapes[0][0], count = 0;
  for (int64_t i = 0; i < n; i++) {
    if (x[i] != 0) out[count++] = i;
  }
  shape[0] = 2;
  shape[1] = static_cast<uint64_t>(count);
  shape[2] = 1;
  return 0;
}
