/*
 * custom_aot_extra.h -- Tritium's ABI-compatible edition of MindSpore's AOT header.
 *
 * Kernels written for MindSpore's `ops.Custom(..., func_type="aot")` include this header and
 * read operator attributes, request workspaces and keep per-instance data through `AotExtra`.
 * Tritium ships this file with its runtime and puts its directory on the include path of every
 * source it compiles, so `#include "custom_aot_extra.h"` works without a copy next to the source;
 * a copy of MindSpore's own header next to the source works as well (the layout is identical).
 *
 * The class layout is ABI: user code calls the inline methods below, which touch the data
 * members and the virtual table directly. Keep, in this order:
 *   vtable: ~AotExtra, HasAttr, GetAttrBool, GetAttrInt, GetAttrFloat, GetAttrStr,
 *           GetAttrIntVec, GetAttrFloatVec, GetAttrInt2DVec, GetAttrFloat2DVec
 *   data:   std::vector<size_t> workspace_, AotKernelData *kernel_data_
 * Every `std::string` is passed by value, and code is built with -D_GLIBCXX_USE_CXX11_ABI=0.
 *
 * A missing attribute or an attribute of another type makes the getters throw
 * std::runtime_error; Tritium catches it around every call and reports it as an error.
 */
#ifndef TRITIUM_CUSTOM_AOT_EXTRA_H_
#define TRITIUM_CUSTOM_AOT_EXTRA_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

/* Base class of the per-instance data a kernel stores with AotExtra::SetKernelData. */
class AotKernelData {
 public:
  AotKernelData() = default;
  virtual ~AotKernelData() = default;
};

/* The `extra` argument of Func, FuncInit, FuncInferShape and FuncInferType. */
class AotExtra {
 public:
  AotExtra() = default;
  virtual ~AotExtra() = default;
  /* True when the operator has an attribute of this name. */
  virtual bool HasAttr(std::string name) = 0;

  /* The attribute `name` as T: bool, int64_t, float, std::string, std::vector<int64_t>,
   * std::vector<float>, std::vector<std::vector<int64_t>> or std::vector<std::vector<float>>. */
  template <typename T>
  inline T Attr(std::string name) {
    return T();
  }

  /* Byte sizes of the workspaces the runtime allocates and passes after the outputs. */
  void SetWorkSpace(const std::vector<size_t> &workspace) { workspace_ = workspace; }
  const std::vector<size_t> &WorkSpace() const { return workspace_; }

  /* Per-instance data; the runtime deletes it when the operator instance is destroyed. */
  void SetKernelData(AotKernelData *kernel_data) { kernel_data_ = kernel_data; }
  AotKernelData *KernelData() const { return kernel_data_; }

  void DestructKernelData() {
    delete kernel_data_;
    kernel_data_ = nullptr;
  }

 private:
  virtual bool GetAttrBool(std::string name) = 0;
  virtual int64_t GetAttrInt(std::string name) = 0;
  virtual float GetAttrFloat(std::string name) = 0;
  virtual std::string GetAttrStr(std::string name) = 0;

  virtual std::vector<int64_t> GetAttrIntVec(std::string name) = 0;
  virtual std::vector<float> GetAttrFloatVec(std::string name) = 0;
  virtual std::vector<std::vector<int64_t>> GetAttrInt2DVec(std::string name) = 0;
  virtual std::vector<std::vector<float>> GetAttrFloat2DVec(std::string name) = 0;

  std::vector<size_t> workspace_;
  AotKernelData *kernel_data_{nullptr};
};

template <>
inline bool AotExtra::Attr(std::string name) {
  return GetAttrBool(name);
}

template <>
inline int64_t AotExtra::Attr(std::string name) {
  return GetAttrInt(name);
}

template <>
inline float AotExtra::Attr(std::string name) {
  return GetAttrFloat(name);
}

template <>
inline std::string AotExtra::Attr(std::string name) {
  return GetAttrStr(name);
}

template <>
inline std::vector<int64_t> AotExtra::Attr(std::string name) {
  return GetAttrIntVec(name);
}

template <>
inline std::vector<float> AotExtra::Attr(std::string name) {
  return GetAttrFloatVec(name);
}

template <>
inline std::vector<std::vector<int64_t>> AotExtra::Attr(std::string name) {
  return GetAttrInt2DVec(name);
}

template <>
inline std::vector<std::vector<float>> AotExtra::Attr(std::string name) {
  return GetAttrFloat2DVec(name);
}

#endif  // TRITIUM_CUSTOM_AOT_EXTRA_H_
