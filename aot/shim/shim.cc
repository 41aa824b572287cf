// Tritium's C++ side of the AOT operator runtime.
//
// * `TritiumExtra` is the concrete AotExtra handed to user kernels; its attribute getters call
//   back into Rust through plain C function pointers (no link-time symbol dependency on Rust).
// * The `tritium_aot_call_*` trampolines call user functions (Func, FuncInit, FuncInferShape,
//   FuncInferType) and turn every C++ exception into a status code plus the exception's message,
//   so no exception ever unwinds into Rust.
//
// Built by backend/build.rs with -std=c++17 -D_GLIBCXX_USE_CXX11_ABI=0, exactly like the user
// sources Tritium compiles, so std::string and std::vector agree on both sides.
#include <cstdint>
#include <cstring>
#include <exception>
#include <new>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "custom_aot_extra.h"

// Opaque, as in MindSpore's samples: only its underlying type matters for the ABI.
enum TypeId : int {};

extern "C" {

// One attribute value as Rust hands it over; pointers are valid during the delivery call only.
struct TritiumAttrView {
  int32_t kind;  // 0 bool, 1 int, 2 float, 3 str, 4 int vec, 5 float vec, 6 int 2-D, 7 float 2-D
  int32_t b;
  int64_t i;
  float f;
  const char *str;
  size_t str_len;
  const void *data;  // int64_t or float elements, rows concatenated for the 2-D kinds
  size_t len;        // element count of `data`
  const size_t *row_lens;
  size_t rows;
};

typedef void (*tritium_attr_deliver_fn)(void *sink, const TritiumAttrView *view);
typedef int32_t (*tritium_attr_lookup_fn)(const void *ctx, const char *name, size_t name_len, int32_t kind,
                                          void *sink, tritium_attr_deliver_fn deliver, char *err, size_t err_cap);
typedef int32_t (*tritium_attr_has_fn)(const void *ctx, const char *name, size_t name_len);
typedef void (*tritium_shape_push_fn)(void *sink, const int64_t *dims, size_t ndim);
typedef void (*tritium_type_push_fn)(void *sink, int32_t type_id);

}  // extern "C"

namespace {

enum AttrKind : int32_t {
  kBool = 0,
  kInt = 1,
  kFloat = 2,
  kStr = 3,
  kIntVec = 4,
  kFloatVec = 5,
  kInt2D = 6,
  kFloat2D = 7,
};

template <class T>
std::vector<T> Flat(const TritiumAttrView &v, size_t offset, size_t n) {
  const T *p = static_cast<const T *>(v.data);
  return std::vector<T>(p + offset, p + offset + n);
}

template <class T>
std::vector<std::vector<T>> Rows(const TritiumAttrView &v) {
  std::vector<std::vector<T>> out;
  size_t offset = 0;
  for (size_t r = 0; r < v.rows; ++r) {
    out.push_back(Flat<T>(v, offset, v.row_lens[r]));
    offset += v.row_lens[r];
  }
  return out;
}

void Convert(const TritiumAttrView &v, bool *out) { *out = v.b != 0; }
void Convert(const TritiumAttrView &v, int64_t *out) { *out = v.i; }
void Convert(const TritiumAttrView &v, float *out) { *out = v.f; }
void Convert(const TritiumAttrView &v, std::string *out) { out->assign(v.str, v.str_len); }
void Convert(const TritiumAttrView &v, std::vector<int64_t> *out) { *out = Flat<int64_t>(v, 0, v.len); }
void Convert(const TritiumAttrView &v, std::vector<float> *out) { *out = Flat<float>(v, 0, v.len); }
void Convert(const TritiumAttrView &v, std::vector<std::vector<int64_t>> *out) { *out = Rows<int64_t>(v); }
void Convert(const TritiumAttrView &v, std::vector<std::vector<float>> *out) { *out = Rows<float>(v); }

template <class R>
struct Sink {
  R value{};
  bool delivered = false;
  bool failed = false;

  // Called from Rust: must never throw.
  static void Deliver(void *raw, const TritiumAttrView *view) noexcept {
    auto *self = static_cast<Sink<R> *>(raw);
    try {
      Convert(*view, &self->value);
      self->delivered = true;
    } catch (...) {
      self->failed = true;
    }
  }
};

class TritiumExtra final : public AotExtra {
 public:
  TritiumExtra(const void *ctx, tritium_attr_lookup_fn lookup, tritium_attr_has_fn has)
      : ctx_(ctx), lookup_(lookup), has_(has) {}
  ~TritiumExtra() override = default;

  bool HasAttr(std::string name) override { return has_(ctx_, name.data(), name.size()) != 0; }

 private:
  template <class R>
  R Get(const std::string &name, int32_t kind) {
    Sink<R> sink;
    char err[1024] = {0};
    int32_t rc = lookup_(ctx_, name.data(), name.size(), kind, &sink, &Sink<R>::Deliver, err, sizeof(err) - 1);
    if (rc != 0) {
      throw std::runtime_error(err);
    }
    if (sink.failed || !sink.delivered) {
      throw std::runtime_error("attribute '" + name + "': could not copy its value");
    }
    return std::move(sink.value);
  }

  bool GetAttrBool(std::string name) override { return Get<bool>(name, kBool); }
  int64_t GetAttrInt(std::string name) override { return Get<int64_t>(name, kInt); }
  float GetAttrFloat(std::string name) override { return Get<float>(name, kFloat); }
  std::string GetAttrStr(std::string name) override { return Get<std::string>(name, kStr); }
  std::vector<int64_t> GetAttrIntVec(std::string name) override { return Get<std::vector<int64_t>>(name, kIntVec); }
  std::vector<float> GetAttrFloatVec(std::string name) override { return Get<std::vector<float>>(name, kFloatVec); }
  std::vector<std::vector<int64_t>> GetAttrInt2DVec(std::string name) override {
    return Get<std::vector<std::vector<int64_t>>>(name, kInt2D);
  }
  std::vector<std::vector<float>> GetAttrFloat2DVec(std::string name) override {
    return Get<std::vector<std::vector<float>>>(name, kFloat2D);
  }

  const void *ctx_;
  tritium_attr_lookup_fn lookup_;
  tritium_attr_has_fn has_;
};

void FillErr(char *err, size_t cap, const char *msg) {
  if (err == nullptr || cap == 0) return;
  size_t n = std::strlen(msg);
  if (n >= cap) n = cap - 1;
  std::memcpy(err, msg, n);
  err[n] = '\0';
}

constexpr int32_t kOk = 0;
constexpr int32_t kException = 1;
constexpr int32_t kUnknownException = 2;

// Runs `body`, mapping C++ exceptions to status codes and messages.
template <class F>
int32_t Guard(char *err, size_t cap, F &&body) noexcept {
  try {
    body();
    return kOk;
  } catch (const std::exception &e) {
    FillErr(err, cap, e.what());
    return kException;
  } catch (...) {
    FillErr(err, cap, "unknown C++ exception (not derived from std::exception)");
    return kUnknownException;
  }
}

typedef int (*MainFn)(int, void **, int *, int64_t **, const char **, void *, void *);
typedef int (*InitFn)(int *, int64_t **, const char **, AotExtra *);
typedef std::vector<int64_t> (*InferShapeFn)(int *, int64_t **, AotExtra *);
typedef std::vector<std::vector<int64_t>> (*InferShapesFn)(int *, int64_t **, AotExtra *);
typedef TypeId (*InferTypeFn)(std::vector<TypeId>, AotExtra *);
typedef std::vector<TypeId> (*InferTypesFn)(std::vector<TypeId>, AotExtra *);

}  // namespace

extern "C" {

void *tritium_aot_extra_new(const void *ctx, tritium_attr_lookup_fn lookup, tritium_attr_has_fn has) noexcept {
  return static_cast<AotExtra *>(new (std::nothrow) TritiumExtra(ctx, lookup, has));
}

int32_t tritium_aot_extra_free(void *extra, char *err, size_t cap) noexcept {
  auto *e = static_cast<AotExtra *>(extra);
  if (e == nullptr) return kOk;
  int32_t rc = Guard(err, cap, [&] { e->DestructKernelData(); });
  delete e;
  return rc;
}

size_t tritium_aot_extra_workspace(void *extra, const size_t **data) noexcept {
  auto *e = static_cast<AotExtra *>(extra);
  const std::vector<size_t> &ws = e->WorkSpace();
  *data = ws.data();
  return ws.size();
}

int32_t tritium_aot_call_main(void *fn, int nparam, void **params, int *ndims, int64_t **shapes,
                              const char **dtypes, void *stream, void *extra, int32_t *ret, char *err,
                              size_t cap) noexcept {
  return Guard(err, cap, [&] {
    *ret = reinterpret_cast<MainFn>(fn)(nparam, params, ndims, shapes, dtypes, stream, extra);
  });
}

int32_t tritium_aot_call_init(void *fn, int *ndims, int64_t **shapes, const char **dtypes, void *extra,
                              int32_t *ret, char *err, size_t cap) noexcept {
  return Guard(err, cap, [&] {
    *ret = reinterpret_cast<InitFn>(fn)(ndims, shapes, dtypes, static_cast<AotExtra *>(extra));
  });
}

int32_t tritium_aot_call_infer_shape(void *fn, int32_t tuple, int *ndims, int64_t **shapes, void *extra,
                                     void *sink, tritium_shape_push_fn push, char *err, size_t cap) noexcept {
  return Guard(err, cap, [&] {
    auto *e = static_cast<AotExtra *>(extra);
    if (tuple != 0) {
      std::vector<std::vector<int64_t>> out = reinterpret_cast<InferShapesFn>(fn)(ndims, shapes, e);
      for (const auto &s : out) push(sink, s.data(), s.size());
    } else {
      std::vector<int64_t> out = reinterpret_cast<InferShapeFn>(fn)(ndims, shapes, e);
      push(sink, out.data(), out.size());
    }
  });
}

int32_t tritium_aot_call_infer_type(void *fn, int32_t tuple, const int32_t *ids, size_t n, void *extra, void *sink,
                                    tritium_type_push_fn push, char *err, size_t cap) noexcept {
  return Guard(err, cap, [&] {
    auto *e = static_cast<AotExtra *>(extra);
    std::vector<TypeId> in;
    in.reserve(n);
    for (size_t k = 0; k < n; ++k) in.push_back(static_cast<TypeId>(ids[k]));
    if (tuple != 0) {
      std::vector<TypeId> out = reinterpret_cast<InferTypesFn>(fn)(in, e);
      for (TypeId t : out) push(sink, static_cast<int32_t>(t));
    } else {
      TypeId out = reinterpret_cast<InferTypeFn>(fn)(in, e);
      push(sink, static_cast<int32_t>(out));
    }
  });
}

}  // extern "C"
