// MindSpore's multi-output GPU example: x + y, x * y, x / y on a CUDA stream.
#include <cstring>
constexpr int THREADS = 1024;

__global__ void CustomAddMulDivKernel(float *input1, float *input2, float *output1, float *output2, float *output3,
                                      size_t size) {
  auto idx = blockIdx.x * THREADS + threadIdx.x;
  if (idx < size) {
    output1[idx] = input1[idx] + input2[idx];
    output2[idx] = input1[idx] * input2[idx];
    output3[idx] = input1[idx] / input2[idx];
  }
}

extern "C" int CustomAddMulDiv(int nparam, void **params, int *ndims, int64_t **shapes, const char **dtypes,
                               void *stream, void *extra) {
  cudaStream_t custream = static_cast<cudaStream_t>(stream);
  constexpr int OUTPUT_INDEX = 2;
  if (nparam != 5) return 1;
  for (int i = 0; i < nparam; i++) {
    if (strcmp(dtypes[i], "float32") != 0) return 2;
  }
  size_t size = 1;
  for (int i = 0; i < ndims[OUTPUT_INDEX]; i++) size *= shapes[OUTPUT_INDEX][i];
  int n = size / THREADS;
  CustomAddMulDivKernel<<<n + 1, THREADS, 0, custream>>>(
      static_cast<float *>(params[0]), static_cast<float *>(params[1]), static_cast<float *>(params[2]),
      static_cast<float *>(params[3]), static_cast<float *>(params[4]), size);
  return 0;
}
