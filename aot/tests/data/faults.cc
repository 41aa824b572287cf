// Kernels that fail in every way the runtime must report without crashing.
#include <cstdint>
#include <stdexcept>
#include <vector>
#include "custom_aot_extra.h"

static int64_t Numel(int ndim, const int64_t *shape) {
  int64_t n = 1;
  for (int i = 0; i < ndim; i++) n *= shape[i];
  return n;
}

extern "C" int ReturnsSeven(int, void **, int *, int64_t **, const char **, void *, void *) { return 7; }

extern "C" int Throws(int, void **, int *, int64_t **, const char **, void *, void *) {
  throw std::runtime_error("boom from the kernel");
}

extern "C" int ThrowsInt(int, void **, int *, int64_t **, const char **, void *, void *) { throw 42; }

extern "C" int InitFails(int, void **, int *, int64_t **, const char **, void *, void *) { return 0; }
extern "C" int InitFailsInit(int *, int64_t **, const char **, AotExtra *) { return 3; }

extern "C" int InitThrows(int, void **, int *, int64_t **, const char **, void *, void *) { return 0; }
extern "C" int InitThrowsInit(int *, int64_t **, const char **, AotExtra *) {
  throw std::logic_error("init cannot cope");
}

extern "C" int MissingAttr(int, void **, int *, int64_t **, const char **, void *, void *extra) {
  static_cast<AotExtra *>(extra)->Attr<float>("gamma");
  return 0;
}

extern "C" int WrongAttrType(int, void **, int *, int64_t **, const char **, void *, void *extra) {
  static_cast<AotExtra *>(extra)->Attr<std::string>("scale");
  return 0;
}

extern "C" std::vector<int64_t> InferThrowsInferShape(int *, int64_t **, AotExtra *) {
  throw std::runtime_error("cannot infer");
}
extern "C" int InferThrows(int, void **, int *, int64_t **, const char **, void *, void *) { return 0; }

// Fills its output, then flips the 16 bytes past its end: flipping (rather than writing a
// constant, which a guard byte may happen to equal) makes the first overwritten byte 0.
extern "C" int OutputOverrun(int nparam, void **params, int *ndims, int64_t **shapes, const char **, void *, void *) {
  float *out = static_cast<float *>(params[1]);
  int64_t n = Numel(ndims[1], shapes[1]);
  for (int64_t i = 0; i < n; i++) out[i] = 1.0f;
  unsigned char *past = reinterpret_cast<unsigned char *>(out + n);
  for (int i = 0; i < 16; i++) past[i] = static_cast<unsigned char>(~past[i]);
  return 0;
}

// Asks for a 16-byte workspace, fills it and flips the 4 bytes after it (see OutputOverrun).
extern "C" int WorkspaceOverrunInit(int *, int64_t **, const char **, AotExtra *extra) {
  extra->SetWorkSpace({16});
  return 0;
}
extern "C" int WorkspaceOverrun(int nparam, void **params, int *, int64_t **, const char **, void *, void *) {
  if (nparam != 3) return 1;
  unsigned char *ws = static_cast<unsigned char *>(params[2]);
  for (int i = 0; i < 16; i++) ws[i] = 7;
  for (int i = 16; i < 20; i++) ws[i] = static_cast<unsigned char>(~ws[i]);
  return 0;
}

// Asks for a 16-byte workspace and copies the workspace's guard bytes over the output's
// (12 bytes for three floats): with one guard pattern for every buffer this went unseen.
extern "C" int GuardCopyInit(int *, int64_t **, const char **, AotExtra *extra) {
  extra->SetWorkSpace({16});
  return 0;
}
extern "C" int GuardCopy(int nparam, void **params, int *, int64_t **, const char **, void *, void *) {
  if (nparam != 3) return 1;
  unsigned char *out = static_cast<unsigned char *>(params[1]);
  unsigned char *ws = static_cast<unsigned char *>(params[2]);
  for (int i = 0; i < 64; i++) out[12 + i] = ws[16 + i];
  return 0;
}

// Reports a data-dependent shape larger than its upper bound.
extern "C" int ShapeTooBig(int nparam, void **params, int *, int64_t **, const char **, void *, void *) {
  uint64_t *shape = static_cast<uint64_t *>(params[2]);
  shape[0] = 1;
  shape[1] = 1000;
  return 0;
}
