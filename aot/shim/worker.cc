// Tritium's AOT isolation worker: runs one operator's FuncInit and Func in a process of its own,
// so that a segfault, an abort or an exit in user code ends this process, not the caller's.
//
// Built at run time by aot/src/isolate.rs with the compiler and flags of the user's
// sources, from this file and the shim (included below: one copy of the trampolines that turn
// C++ exceptions into messages). The protocol (requests on stdin, replies on stdout, tensors in
// a shared file mapping) is described in isolate.rs; every integer is little-endian.
#include <dlfcn.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "shim.cc"

namespace worker {

enum Op : uint32_t { kMap = 1, kInit = 2, kCall = 3, kFree = 4 };

// Replies go to the original stdout, moved here so that user code printing to stdout (now
// stderr) cannot corrupt them.
int kReplyFd = -1;

bool ReadAll(int fd, void *p, size_t n) {
  auto *b = static_cast<uint8_t *>(p);
  while (n > 0) {
    ssize_t k = read(fd, b, n);
    if (k <= 0) return false;
    b += k;
    n -= static_cast<size_t>(k);
  }
  return true;
}

bool WriteAll(int fd, const void *p, size_t n) {
  auto *b = static_cast<const uint8_t *>(p);
  while (n > 0) {
    ssize_t k = write(fd, b, n);
    if (k <= 0) return false;
    b += k;
    n -= static_cast<size_t>(k);
  }
  return true;
}

// Spins (yielding) for up to 200 µs until `fd` is readable: back-to-back calls then skip the
// scheduler wake-up a blocking read costs (20-30 µs on an idle VM). The read that follows
// blocks as usual when nothing came.
void SpinUntilReadable(int fd) {
  auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(200);
  pollfd p{fd, POLLIN, 0};
  while (std::chrono::steady_clock::now() < until) {
    if (poll(&p, 1, 0) != 0) return;
    sched_yield();
  }
}

// Reads the fields of one request; a short request sets `ok` to false.
struct Reader {
  const uint8_t *p;
  const uint8_t *end;
  bool ok = true;

  bool Take(void *out, size_t n) {
    if (!ok || static_cast<size_t>(end - p) < n) {
      ok = false;
      return false;
    }
    std::memcpy(out, p, n);
    p += n;
    return true;
  }
  template <class T>
  T Get() {
    T v{};
    Take(&v, sizeof(T));
    return v;
  }
  uint64_t U64() { return Get<uint64_t>(); }
  int64_t I64() { return Get<int64_t>(); }
  int32_t I32() { return Get<int32_t>(); }
  float F32() { return Get<float>(); }
  std::string Str() {
    uint64_t n = U64();
    if (!ok || static_cast<uint64_t>(end - p) < n) {
      ok = false;
      return std::string();
    }
    std::string s(reinterpret_cast<const char *>(p), n);
    p += n;
    return s;
  }
};

// One (attribute, requested kind) answer, computed by the parent with its own conversion rules.
struct Answer {
  bool ok = false;
  std::string error;
  TritiumAttrView view{};
  std::string str;
  std::vector<uint8_t> data;
  std::vector<size_t> rows;
};

struct Attrs {
  std::map<std::pair<std::string, int32_t>, Answer> answers;
  std::set<std::string> names;
  std::string missing;  // the message after "attribute `name`: " for an attribute not set
};

int32_t Lookup(const void *ctx, const char *name, size_t len, int32_t kind, void *sink, tritium_attr_deliver_fn deliver,
               char *err, size_t cap) {
  const auto *attrs = static_cast<const Attrs *>(ctx);
  std::string key(name, len);
  auto it = attrs->answers.find({key, kind});
  if (it == attrs->answers.end()) {
    std::string msg = "attribute `" + key + "`: " + attrs->missing;
    FillErr(err, cap, msg.c_str());
    return 1;
  }
  const Answer &a = it->second;
  if (!a.ok) {
    FillErr(err, cap, a.error.c_str());
    return 1;
  }
  deliver(sink, &a.view);
  return 0;
}

int32_t Has(const void *ctx, const char *name, size_t len) {
  return static_cast<const Attrs *>(ctx)->names.count(std::string(name, len)) != 0 ? 1 : 0;
}

std::unique_ptr<Attrs> ReadAttrs(Reader &r) {
  auto attrs = std::make_unique<Attrs>();
  attrs->missing = r.Str();
  uint64_t n = r.U64();
  for (uint64_t k = 0; k < n && r.ok; ++k) {
    std::string name = r.Str();
    int32_t kind = r.I32();
    Answer a;
    a.ok = r.I32() != 0;
    if (!a.ok) {
      a.error = r.Str();
    } else {
      a.view.kind = r.I32();
      a.view.b = r.I32();
      a.view.i = r.I64();
      a.view.f = r.F32();
      a.str = r.Str();
      uint64_t bytes = r.U64();
      a.data.resize(bytes);
      if (bytes > 0) r.Take(a.data.data(), bytes);
      a.view.len = static_cast<size_t>(r.U64());
      uint64_t rows = r.U64();
      for (uint64_t j = 0; j < rows && r.ok; ++j) a.rows.push_back(static_cast<size_t>(r.U64()));
    }
    attrs->names.insert(name);
    auto &slot = attrs->answers[{name, kind}];
    slot = std::move(a);
    // Pointers into the stored copy, which no longer moves.
    slot.view.str = slot.str.data();
    slot.view.str_len = slot.str.size();
    slot.view.data = slot.data.data();
    slot.view.row_lens = slot.rows.data();
    slot.view.rows = slot.rows.size();
  }
  return attrs;
}

// `ndims`, `shapes` and `dtypes` of MindSpore's calling convention.
struct Shapes {
  std::vector<int> ndims;
  std::vector<std::vector<int64_t>> dims;
  std::vector<int64_t *> shapes;
  std::vector<std::string> names;
  std::vector<const char *> dtypes;
};

void ReadShapes(Reader &r, Shapes &s) {
  uint64_t n = r.U64();
  for (uint64_t k = 0; k < n && r.ok; ++k) {
    uint64_t nd = r.U64();
    std::vector<int64_t> d;
    for (uint64_t j = 0; j < nd && r.ok; ++j) d.push_back(r.I64());
    s.ndims.push_back(static_cast<int>(nd));
    s.dims.push_back(d);
    s.names.push_back(r.Str());
  }
  for (size_t k = 0; k < s.dims.size(); ++k) {
    // Never an empty allocation (a rank-0 tensor still gets a valid pointer), as in-process.
    s.dims[k].push_back(0);
    s.shapes.push_back(s.dims[k].data());
    s.dtypes.push_back(s.names[k].c_str());
  }
}

struct Instance {
  void *main = nullptr;
  void *extra = nullptr;
  std::unique_ptr<Attrs> attrs;
};

struct State {
  uint8_t *base = nullptr;
  size_t len = 0;
  std::map<std::string, void *> libraries;
  std::map<uint64_t, Instance> instances;
};

// The reply: status (0 done, 1 failed with `message`), the user function's return value, the
// message, and the workspace sizes.
bool Reply(uint32_t status, int32_t ret, const std::string &message, const std::vector<size_t> &ws) {
  std::vector<uint8_t> out;
  auto put = [&](const void *p, size_t n) {
    const auto *b = static_cast<const uint8_t *>(p);
    out.insert(out.end(), b, b + n);
  };
  uint64_t len = 0;
  put(&len, 8);
  put(&status, 4);
  put(&ret, 4);
  uint64_t mlen = message.size();
  put(&mlen, 8);
  put(message.data(), message.size());
  uint64_t nws = ws.size();
  put(&nws, 8);
  for (size_t w : ws) {
    uint64_t v = w;
    put(&v, 8);
  }
  len = out.size() - 8;
  std::memcpy(out.data(), &len, 8);
  return WriteAll(kReplyFd, out.data(), out.size());
}

bool Fail(const std::string &message) { return Reply(1, 0, message, {}); }

bool Map(State &s, Reader &r) {
  std::string path = r.Str();
  if (!r.ok) return Fail("short map request");
  if (s.base != nullptr) munmap(s.base, s.len);
  s.base = nullptr;
  s.len = 0;
  int fd = open(path.c_str(), O_RDWR);
  if (fd < 0) return Fail("cannot open the shared tensors at " + path);
  struct stat st;
  if (fstat(fd, &st) != 0 || st.st_size <= 0) {
    close(fd);
    return Fail("cannot size the shared tensors at " + path);
  }
  void *p = mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (p == MAP_FAILED) return Fail("cannot map the shared tensors at " + path);
  s.base = static_cast<uint8_t *>(p);
  s.len = static_cast<size_t>(st.st_size);
  return Reply(0, 0, "", {});
}

bool Init(State &s, Reader &r) {
  uint64_t id = r.U64();
  std::string library = r.Str();
  std::string main_name = r.Str();
  std::string init_name = r.Str();
  std::unique_ptr<Attrs> attrs = ReadAttrs(r);
  Shapes shapes;
  ReadShapes(r, shapes);
  if (!r.ok) return Fail("short init request");
  void *&lib = s.libraries[library];
  if (lib == nullptr) lib = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) return Fail(std::string("cannot load ") + library + ": " + dlerror());
  Instance inst;
  inst.main = dlsym(lib, main_name.c_str());
  if (inst.main == nullptr) return Fail("`" + main_name + "` is not exported by " + library);
  inst.attrs = std::move(attrs);
  inst.extra = tritium_aot_extra_new(inst.attrs.get(), Lookup, Has);
  if (inst.extra == nullptr) return Fail("out of memory creating AotExtra");
  int32_t ret = 0;
  if (!init_name.empty()) {
    void *init = dlsym(lib, init_name.c_str());
    if (init == nullptr) return Fail("`" + init_name + "` is not exported by " + library);
    char err[4096] = {0};
    int32_t rc = tritium_aot_call_init(init, shapes.ndims.data(), shapes.shapes.data(), shapes.dtypes.data(),
                                       inst.extra, &ret, err, sizeof(err) - 1);
    if (rc != 0) {
      tritium_aot_extra_free(inst.extra, nullptr, 0);
      return Reply(2, 0, err, {});
    }
  }
  const size_t *ws = nullptr;
  size_t nws = tritium_aot_extra_workspace(inst.extra, &ws);
  std::vector<size_t> sizes(ws, ws + nws);
  s.instances[id] = std::move(inst);
  return Reply(0, ret, "", sizes);
}

bool Call(State &s, Reader &r) {
  uint64_t id = r.U64();
  uint64_t nparam = r.U64();
  std::vector<void *> params;
  for (uint64_t k = 0; k < nparam && r.ok; ++k) {
    uint64_t offset = r.U64();
    if (offset > s.len) return Fail("a tensor lies outside the shared mapping");
    params.push_back(s.base + offset);
  }
  Shapes shapes;
  ReadShapes(r, shapes);
  if (!r.ok) return Fail("short call request");
  auto it = s.instances.find(id);
  if (it == s.instances.end()) return Fail("no such instance");
  char err[4096] = {0};
  int32_t ret = 0;
  int32_t rc = tritium_aot_call_main(it->second.main, static_cast<int>(params.size()), params.data(),
                                     shapes.ndims.data(), shapes.shapes.data(), shapes.dtypes.data(), nullptr,
                                     it->second.extra, &ret, err, sizeof(err) - 1);
  if (rc != 0) return Reply(2, 0, err, {});
  return Reply(0, ret, "", {});
}

bool Free(State &s, Reader &r) {
  uint64_t id = r.U64();
  auto it = s.instances.find(id);
  if (it == s.instances.end()) return Reply(0, 0, "", {});
  char err[4096] = {0};
  int32_t rc = tritium_aot_extra_free(it->second.extra, err, sizeof(err) - 1);
  s.instances.erase(it);
  if (rc != 0) return Reply(2, 0, err, {});
  return Reply(0, 0, "", {});
}

}  // namespace worker

int main() {
  worker::kReplyFd = dup(1);
  if (worker::kReplyFd < 0 || dup2(2, 1) < 0) return 1;
  worker::State state;
  for (;;) {
    uint32_t op = 0;
    uint64_t len = 0;
    worker::SpinUntilReadable(0);
    if (!worker::ReadAll(0, &op, 4) || !worker::ReadAll(0, &len, 8)) return 0;
    std::vector<uint8_t> body(len);
    if (len > 0 && !worker::ReadAll(0, body.data(), len)) return 0;
    worker::Reader r{body.data(), body.data() + body.size()};
    bool ok = false;
    switch (op) {
      case worker::kMap:
        ok = worker::Map(state, r);
        break;
      case worker::kInit:
        ok = worker::Init(state, r);
        break;
      case worker::kCall:
        ok = worker::Call(state, r);
        break;
      case worker::kFree:
        ok = worker::Free(state, r);
        break;
      default:
        ok = worker::Fail("unknown request");
    }
    if (!ok) return 0;
  }
}
