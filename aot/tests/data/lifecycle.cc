// Counts Init calls and kernel-data destructions, to test MindSpore's life cycle:
// Init once per kernel instance, kernel data destroyed with the operator.
#include <atomic>
#include <cstdint>
#include "custom_aot_extra.h"

static std::atomic<int> g_inits{0};
static std::atomic<int> g_dtors{0};

class counted_data : public AotKernelData {
 public:
  int64_t calls = 0;
  ~counted_data() override { g_dtors++; }
};

extern "C" int LifeCycleInits() { return g_inits.load(); }
extern "C" int LifeCycleDtors() { return g_dtors.load(); }

extern "C" int LifeCycleInit(int *ndims, int64_t **shapes, const char **dtypes, AotExtra *extra) {
  g_inits++;
  extra->SetKernelData(new counted_data);
  return 0;
}

// out[0] = number of calls this instance has seen (kernel data persists across calls).
extern "C" int LifeCycle(int nparam, void **params, int *ndims, int64_t **shapes, const char **dtypes, void *stream,
                         void *extra) {
  auto *data = static_cast<counted_data *>(static_cast<AotExtra *>(extra)->KernelData());
  data->calls++;
  static_cast<int64_t *>(params[1])[0] = data->calls;
  return 0;
}
