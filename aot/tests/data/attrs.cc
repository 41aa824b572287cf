// Reads one attribute of every kind AotExtra::Attr<T> supports and writes what it saw into a
// float64 output, so the test can check each value crossed the ABI intact.
#include <string>
#include <vector>
#include "custom_aot_extra.h"

extern "C" int ReadAttrs(int nparam, void **params, int *ndims, int64_t **shapes, const char **dtypes, void *stream,
                         void *extra_void) {
  auto *extra = static_cast<AotExtra *>(extra_void);
  double *out = static_cast<double *>(params[1]);
  if (!extra->HasAttr("b") || extra->HasAttr("nope")) return 1;
  out[0] = extra->Attr<bool>("b") ? 1 : 0;
  out[1] = static_cast<double>(extra->Attr<int64_t>("i"));
  out[2] = extra->Attr<float>("f");
  std::string s = extra->Attr<std::string>("s");
  out[3] = static_cast<double>(s.size());
  out[4] = s.empty() ? 0 : s[0];
  std::vector<int64_t> iv = extra->Attr<std::vector<int64_t>>("iv");
  out[5] = static_cast<double>(iv.size());
  out[6] = iv.empty() ? 0 : static_cast<double>(iv.back());
  std::vector<float> fv = extra->Attr<std::vector<float>>("fv");
  out[7] = static_cast<double>(fv.size());
  out[8] = fv.empty() ? 0 : fv.back();
  std::vector<std::vector<int64_t>> i2 = extra->Attr<std::vector<std::vector<int64_t>>>("i2");
  out[9] = static_cast<double>(i2.size());
  out[10] = i2.size() > 1 ? static_cast<double>(i2[1].size()) : 0;
  out[11] = i2.size() > 1 && !i2[1].empty() ? static_cast<double>(i2[1].back()) : 0;
  std::vector<std::vector<float>> f2 = extra->Attr<std::vector<std::vector<float>>>("f2");
  out[12] = static_cast<double>(f2.size());
  out[13] = !f2.empty() && !f2[0].empty() ? f2[0].back() : 0;
  out[14] = extra->Attr<float>("i");  // an int read as float, as MindSpore's GetValue allows
  return 0;
}
