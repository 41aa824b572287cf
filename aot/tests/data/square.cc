// square(x) = x * x and its backward as another AOT kernel: dx = 2 * x * dout,
// called with (x, out, dout) as MindSpore's bprop.
#include <cstdint>

static int64_t Numel(int ndim, const int64_t *shape) {
  int64_t n = 1;
  for (int i = 0; i < ndim; i++) n *= shape[i];
  return n;
}

extern "C" int CustomSquare(int nparam, void **params, int *ndims, int64_t **shapes, const char **dtypes,
                            void *stream, void *extra) {
  if (nparam != 2) return 1;
  const float *x = static_cast<const float *>(params[0]);
  float *out = static_cast<float *>(params[1]);
  for (int64_t i = 0, n = Numel(ndims[0], shapes[0]); i < n; i++) out[i] = x[i] * x[i];
  return 0;
}

extern "C" int CustomSquareGrad(int nparam, void **params, int *ndims, int64_t **shapes, const char **dtypes,
                                void *stream, void *extra) {
  if (nparam != 4) return 1;  // x, out, dout -> dx
  const float *x = static_cast<const float *>(params[0]);
  const float *dout = static_cast<const float *>(params[2]);
  float *dx = static_cast<float *>(params[3]);
  for (int64_t i = 0, n = Numel(ndims[0], shapes[0]); i < n; i++) dx[i] = 2 * x[i] * dout[i];
  return 0;
}
