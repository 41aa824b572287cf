// Add with attributes and a workspace: out = x + 2 * (scale * y) + paddings[0] + paddings[1].
// With scale 0.7 and paddings [2, 2] that is x + 1.4 y + 4.
#include <cstring>
#include <vector>
#include "custom_aot_extra.h"

class add_kernel_attr : public AotKernelData {
 public:
  float scale;
  std::vector<int64_t> paddings;
};

extern "C" int CustomAddInit(int *ndims, int64_t **shapes, const char **dtypes, AotExtra *extra) {
  size_t n = 1;
  for (int i = 0; i < ndims[0]; i++) n *= shapes[0][i];
  extra->SetWorkSpace({n * sizeof(float)});
  auto *data = new add_kernel_attr;
  data->scale = extra->Attr<float>("scale");
  data->paddings = extra->Attr<std::vector<int64_t>>("paddings");
  extra->SetKernelData(data);
  return 0;
}

extern "C" int CustomAdd(int nparam, void **params, int *ndims, int64_t **shapes, const char **dtypes, void *stream,
                         void *extra_void) {
  if (nparam != 4) return 1;  // 2 inputs, 1 output, 1 workspace
  for (int i = 0; i < 3; i++) {
    if (std::strcmp(dtypes[i], "float32") != 0) return 2;
  }
  auto *extra = static_cast<AotExtra *>(extra_void);
  if (extra->WorkSpace().size() != 1) return 3;
  auto *data = static_cast<add_kernel_attr *>(extra->KernelData());
  const float *x = static_cast<const float *>(params[0]);
  const float *y = static_cast<const float *>(params[1]);
  float *out = static_cast<float *>(params[2]);
  float *tmp = static_cast<float *>(params[3]);
  size_t n = 1;
  for (int i = 0; i < ndims[2]; i++) n *= shapes[2][i];
  for (size_t i = 0; i < n; i++) tmp[i] = data->scale * y[i];
  for (size_t i = 0; i < n; i++) out[i] = x[i] + 2 * tmp[i] + data->paddings[0] + data->paddings[1];
  return 0;
}
