// The fused add + reduce-sum of MindSpore's AOT tutorial (seed 001), with the tutorial's
// index bugs fixed: the add runs over the whole input (the tutorial sizes it by the output),
// and the reduction writes exactly the output's elements for both axes and both keep_dim values.
#include <vector>
#include "custom_aot_extra.h"

class add_reduce_kernel_attr : public AotKernelData {
 public:
  int64_t axis;
  bool keep_dim;
};

extern "C" int CustomKernelInit(int *ndims, int64_t **shapes, const char **dtypes, AotExtra *extra) {
  size_t workspace_size = 1;
  for (int i = 0; i < ndims[0]; i++) {
    workspace_size *= shapes[0][i];
  }
  std::vector<size_t> workspace = {workspace_size * sizeof(float)};
  extra->SetWorkSpace(workspace);

  add_reduce_kernel_attr *kernel_data_ptr = new add_reduce_kernel_attr;
  kernel_data_ptr->axis = extra->Attr<int64_t>("axis");
  kernel_data_ptr->keep_dim = extra->Attr<bool>("keep_dim");
  extra->SetKernelData(kernel_data_ptr);
  return 0;
}

extern "C" std::vector<int64_t> CustomKernelInferShape(int *ndims, int64_t **shapes, AotExtra *extra) {
  const int64_t kDynRankSize = -2;
  if (shapes[0][0] == kDynRankSize) {
    return std::vector<int64_t>{shapes[0][0]};
  }
  int64_t axis = extra->Attr<int64_t>("axis");
  bool keep_dim = extra->Attr<bool>("keep_dim");
  if (keep_dim) {
    if (axis == 0) {
      return std::vector<int64_t>{1, shapes[0][1]};
    } else {
      return std::vector<int64_t>{shapes[0][0], 1};
    }
  } else {
    return std::vector<int64_t>{shapes[0][1 - axis]};
  }
}

extern "C" int CustomKernel(int nparam, void **params, int *ndims, int64_t **shapes, const char **dtypes, void *stream,
                            void *extra_void) {
  if (nparam != 4) return 1;
  float *input_1 = static_cast<float *>(params[0]);
  float *input_2 = static_cast<float *>(params[1]);
  float *output = static_cast<float *>(params[2]);
  float *tmp = static_cast<float *>(params[3]);

  int64_t in_size = 1;
  for (int i = 0; i < ndims[0]; i++) {
    in_size *= shapes[0][i];
  }
  for (int64_t i = 0; i < in_size; i++) {
    tmp[i] = input_1[i] + input_2[i];
  }

  AotExtra *extra = static_cast<AotExtra *>(extra_void);
  auto kernel_ptr = static_cast<add_reduce_kernel_attr *>(extra->KernelData());
  int64_t axis = kernel_ptr->axis;
  int64_t rows = shapes[0][0];
  int64_t cols = shapes[0][1];
  int64_t size = axis == 0 ? cols : rows;  // elements of the output, whatever keep_dim is
  int64_t ext = shapes[0][axis];
  for (int64_t i = 0; i < size; i++) {
    float acc = 0;
    for (int64_t j = 0; j < ext; j++) {
      acc += axis == 0 ? tmp[j * cols + i] : tmp[i * cols + j];
    }
    output[i] = acc;
  }
  return 0;
}
