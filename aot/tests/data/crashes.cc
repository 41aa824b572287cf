// Kernels that take their process down, for isolated operators (`AotOpBuilder::isolated`):
// each is out = x + 1 for float32 unless told to crash.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include "custom_aot_extra.h"

static int64_t Numel(int ndim, const int64_t *shape) {
  int64_t n = 1;
  for (int i = 0; i < ndim; i++) n *= shape[i];
  return n;
}

static int AddOne(void **params, int *ndims, int64_t **shapes) {
  const float *x = static_cast<const float *>(params[0]);
  float *out = static_cast<float *>(params[1]);
  for (int64_t i = 0; i < Numel(ndims[0], shapes[0]); i++) out[i] = x[i] + 1;
  return 0;
}

// Dereferences a null pointer when x[0] < 0.
extern "C" int SegfaultIfNegative(int, void **params, int *ndims, int64_t **shapes, const char **, void *, void *) {
  if (static_cast<const float *>(params[0])[0] < 0) {
    volatile int *p = nullptr;
    *p = 1;
  }
  return AddOne(params, ndims, shapes);
}

extern "C" int AbortIfNegative(int, void **params, int *ndims, int64_t **shapes, const char **, void *, void *) {
  if (static_cast<const float *>(params[0])[0] < 0) std::abort();
  return AddOne(params, ndims, shapes);
}

extern "C" int ExitIfNegative(int, void **params, int *ndims, int64_t **shapes, const char **, void *, void *) {
  if (static_cast<const float *>(params[0])[0] < 0) std::exit(3);
  return AddOne(params, ndims, shapes);
}

extern "C" int SpinIfNegative(int, void **params, int *ndims, int64_t **shapes, const char **, void *, void *) {
  if (static_cast<const float *>(params[0])[0] < 0) {
    for (volatile uint64_t i = 0;; i = i + 1) {
    }
  }
  return AddOne(params, ndims, shapes);
}

// Prints to stdout, which an isolated worker must keep off its replies.
extern "C" int Chatty(int, void **params, int *ndims, int64_t **shapes, const char **, void *, void *) {
  std::printf("chatty kernel says hello\n");
  std::fflush(stdout);
  return AddOne(params, ndims, shapes);
}
