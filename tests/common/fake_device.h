// A device backend for tests without a GPU: its buffers are host memory the host must not touch. base()
// is a reserved, inaccessible address range (PROT_NONE) standing for offsets into a private shadow, so
// any host read or write of device memory that bypasses upload()/download() faults instead of passing.
// It runs f32 Add and Mul (same arithmetic as the CPU, so results compare bit for bit), reads host
// pointers among its sources directly (as a device backend copies them in), and holds f32 weights.
#pragma once

#include <sys/mman.h>

#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"

namespace minfer::test {

class FakeDevice final : public backend::Backend {
 public:
  explicit FakeDevice(std::string name = "FAKE") : name_(std::move(name)) {}

  std::string_view name() const override { return name_; }
  int priority() const override { return 200; }
  bool host_memory() const override { return false; }
  std::string device_name() const override { return "fake device"; }
  uint64_t memory_free() const override { return free_bytes; }
  bool supports_op(const graph::Graph& g, const graph::Node& n) const override {
    if (n.op != graph::OpKind::kAdd && n.op != graph::OpKind::kMul) return false;
    for (graph::NodeId s : n.src) {
      const graph::Node& src = g.node(s);
      if (src.op == graph::OpKind::kWeight && weights_.count(src.name) == 0) return false;
    }
    return true;
  }
  bool supports_fused(graph::OpKind) const override { return false; }
  Status register_weight(const backend::WeightSource& w) override {
    if (w.type != DType::F32) return unsupported("FAKE: weight '{}' is not f32", w.name);
    const auto* f = static_cast<const float*>(w.data);
    weights_[w.name] = std::vector<float>(f, f + w.n_bytes / 4);
    return {};
  }
  const void* weight_handle(const std::string& name) const override {
    auto it = weights_.find(name);
    return it == weights_.end() ? nullptr : it->second.data();
  }

  struct Buf final : backend::Buffer {
    Buf(FakeDevice* d, size_t n) : dev(d), shadow(n) {
      reserved = mmap(nullptr, std::max<size_t>(n, 1), PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
      dev->bufs_[reinterpret_cast<uintptr_t>(reserved)] = this;
    }
    ~Buf() override {
      dev->bufs_.erase(reinterpret_cast<uintptr_t>(reserved));
      munmap(reserved, std::max<size_t>(shadow.size(), 1));
    }
    void* base() override { return reserved; }
    size_t size() const override { return shadow.size(); }
    bool host_visible() const override { return false; }
    FakeDevice* dev;
    void* reserved;
    std::vector<uint8_t> shadow;
  };
  Result<std::unique_ptr<backend::Buffer>> alloc_buffer(size_t bytes) override {
    return std::unique_ptr<backend::Buffer>(std::make_unique<Buf>(this, bytes));
  }

  // Device memory behind a device pointer, or nullptr for host memory.
  uint8_t* shadow_of(const void* p) {
    const auto a = reinterpret_cast<uintptr_t>(p);
    auto it = bufs_.upper_bound(a);
    if (it == bufs_.begin()) return nullptr;
    --it;
    if (a >= it->first + std::max<size_t>(it->second->shadow.size(), 1)) return nullptr;
    return it->second->shadow.data() + (a - it->first);
  }
  const float* read(const void* p) {
    uint8_t* s = shadow_of(p);
    return reinterpret_cast<const float*>(s != nullptr ? s : p);
  }

  Status execute(const graph::Graph& g, graph::NodeId id, std::span<void* const> data,
                 const backend::ExecContext&) override {
    const graph::Node& n = g.node(id);
    if (n.op == graph::OpKind::kWeight || n.op == graph::OpKind::kReshape) return {};  // no work
    ++executed;
    auto* y = reinterpret_cast<float*>(shadow_of(data[static_cast<size_t>(id)]));
    if (y == nullptr) return error(StatusCode::kInternal, "FAKE: node {} output is not device memory", id);
    const float* a = read(data[static_cast<size_t>(n.src[0])]);
    const float* b = read(data[static_cast<size_t>(n.src[1])]);
    const int64_t d = n.ne[0], total = n.n_elements(), nb = g.node(n.src[1]).n_elements();
    for (int64_t i = 0; i < total; ++i) {
      const float bv = b[nb == total ? i : i % d];
      y[i] = n.op == graph::OpKind::kAdd ? a[i] + bv : a[i] * bv;
    }
    return {};
  }
  Status upload(void* dst, const void* src, size_t bytes) override {
    uint8_t* s = shadow_of(dst);
    if (s == nullptr) return invalid_argument("FAKE: upload to a non-device pointer");
    std::memcpy(s, src, bytes);
    ++uploads;
    return {};
  }
  Status download(void* dst, const void* src, size_t bytes) override {
    uint8_t* s = shadow_of(src);
    if (s == nullptr) return invalid_argument("FAKE: download from a non-device pointer");
    std::memcpy(dst, s, bytes);
    ++downloads;
    return {};
  }

  uint64_t free_bytes = 0;
  int executed = 0, uploads = 0, downloads = 0;

 private:
  std::string name_;
  std::map<std::string, std::vector<float>> weights_;
  std::map<uintptr_t, Buf*> bufs_;
};

}  // namespace minfer::test
