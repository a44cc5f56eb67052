#include "backend_vulkan/vulkan_harness.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "core/fp16.h"
#include "core/rng.h"
#include "quant/quant.h"

namespace minfer::backend::test {
namespace {

// Bytes in a MAP_SHARED mapping of a memfd: released pages fault back in with their contents.
struct SharedCopy {
  void* data = nullptr;
  size_t bytes = 0;
  SharedCopy(const void* src, size_t n) : bytes(std::max<size_t>(n, 1)) {
    const int fd = memfd_create("minfer-test-weight", 0);
    if (fd >= 0 && ftruncate(fd, static_cast<off_t>(bytes)) == 0) {
      void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
      if (p != MAP_FAILED) data = p;
    }
    if (fd >= 0) close(fd);
    if (data != nullptr) std::memcpy(data, src, n);
  }
  SharedCopy(SharedCopy&& o) noexcept : data(o.data), bytes(o.bytes) { o.data = nullptr; }
  SharedCopy(const SharedCopy&) = delete;
  ~SharedCopy() {
    if (data != nullptr) munmap(data, bytes);
  }
};

}  // namespace

std::vector<float> random_floats(size_t n, uint64_t seed, float scale) {
  Rng rng(seed);
  std::vector<float> v(n);
  for (float& x : v) x = static_cast<float>(rng.normal()) * scale;
  return v;
}

std::vector<uint8_t> make_weight(DType type, int64_t k, int64_t n, uint64_t seed, float scale) {
  const std::vector<float> f = random_floats(static_cast<size_t>(k * n), seed, scale);
  const size_t rb = *row_bytes(type, k);
  std::vector<uint8_t> out(rb * static_cast<size_t>(n));
  if (type == DType::F32) {
    std::memcpy(out.data(), f.data(), out.size());
  } else if (type == DType::F16) {
    auto* h = reinterpret_cast<uint16_t*>(out.data());
    for (size_t i = 0; i < f.size(); ++i) h[i] = fp32_to_fp16(f[i]);
  } else if (type == DType::BF16) {
    auto* h = reinterpret_cast<uint16_t*>(out.data());
    for (size_t i = 0; i < f.size(); ++i) h[i] = fp32_to_bf16(f[i]);
  } else {
    quant::quantize_rows(type, f.data(), out.data(), n, k);
  }
  return out;
}

graph::Node op_node(graph::OpKind op, std::vector<graph::NodeId> src, graph::Shape ne) {
  graph::Node n;
  n.op = op;
  n.src = std::move(src);
  n.ne = ne;
  n.type = DType::F32;
  n.name = std::string(graph::op_name(op));
  return n;
}

std::string weight_shape_name(const ::testing::TestParamInfo<WeightShape>& p) {
  return fmt::format("{}_k{}_n{}", dtype_name(p.param.type), p.param.k, p.param.n);
}

bool vulkan_required() {
  const char* v = std::getenv("MINFER_VULKAN_REQUIRED");
  return v != nullptr && std::strcmp(v, "1") == 0;
}

int pick_device(std::string* why) {
  auto devices = vk::enumerate_devices();
  if (!devices.ok()) {
    *why = devices.status().message();
    return -1;
  }
  if (const char* env = std::getenv("MINFER_VULKAN_DEVICE")) return std::atoi(env);
  for (const vk::DeviceInfo& d : *devices) {
    if (d.unusable_reason().empty()) return d.index;
  }
  *why = "no Vulkan device can run minfer's shaders";
  return -1;
}

std::unique_ptr<VulkanBackend> open_backend() {
  std::string why;
  const int index = pick_device(&why);
  if (index < 0) {
    std::fprintf(stderr, "vulkan tests: %s\n", why.c_str());
    return nullptr;
  }
  auto vk = VulkanBackend::create(index);
  if (!vk.ok()) {
    std::fprintf(stderr, "vulkan tests: %s\n", vk.status().message().c_str());
    return nullptr;
  }
  return std::move(*vk);
}

graph::NodeId OpCase::add_weight(const std::string& name, DType type, graph::Shape ne, const void* data,
                                 size_t bytes) {
  graph::Node n;
  n.op = graph::OpKind::kWeight;
  n.type = type;
  n.ne = ne;
  n.name = name;
  weights.push_back({name, type, ne, data, bytes});
  return add_op(n);
}

graph::NodeId OpCase::add_activation(std::vector<float> values, graph::Shape ne) {
  graph::Node n;
  n.op = graph::OpKind::kReshape;  // any node with f32 data; the backends only read its buffer
  n.type = DType::F32;
  n.ne = ne;
  n.name = "activation";
  const graph::NodeId id = add_op(n);
  f32[static_cast<size_t>(id)] = std::move(values);
  return id;
}

graph::NodeId OpCase::add_ids(std::vector<int32_t> ids, graph::InputKind kind) {
  graph::Node n;
  n.op = graph::OpKind::kInput;
  n.params.input = kind;
  n.type = DType::I32;
  n.ne = {static_cast<int64_t>(ids.size()), 1, 1, 1};
  n.name = "ids";
  const graph::NodeId id = add_op(n);
  i32[static_cast<size_t>(id)] = std::move(ids);
  return id;
}

graph::NodeId OpCase::add_op(graph::Node node) {
  graph.nodes.push_back(std::move(node));
  f32.emplace_back();
  i32.emplace_back();
  target = static_cast<graph::NodeId>(graph.size() - 1);
  return target;
}

std::vector<float> run_cpu(const OpCase& c) {
  CpuBackend cpu;
  ThreadPool pool(2);
  // The CPU may repack a weight and then release the original's pages, expecting a file mapping that
  // faults them back in (its get_rows still reads them). Heap memory would come back as zeros, so it gets
  // copies in shared memory-file mappings, as the engine gives it the GGUF mapping.
  std::vector<SharedCopy> copies;
  for (const WeightSource& w : c.weights) {
    copies.emplace_back(w.data, w.n_bytes);
    WeightSource own = w;
    own.data = copies.back().data;
    EXPECT_TRUE(cpu.register_weight(own).ok()) << w.name;
  }
  std::vector<std::vector<float>> f32 = c.f32;
  std::vector<std::vector<int32_t>> i32 = c.i32;
  std::vector<void*> data(c.graph.size(), nullptr);
  for (size_t i = 0; i < c.graph.size(); ++i) {
    const graph::Node& n = c.graph.nodes[i];
    if (n.op == graph::OpKind::kWeight) data[i] = const_cast<void*>(cpu.weight_handle(n.name));
    if (!f32[i].empty()) data[i] = f32[i].data();
    if (!i32[i].empty()) data[i] = i32[i].data();
  }
  const graph::Node& t = c.graph.node(c.target);
  std::vector<float> out(static_cast<size_t>(t.n_elements()));
  data[static_cast<size_t>(c.target)] = c.in_place ? data[static_cast<size_t>(t.src[0])] : out.data();
  ExecContext ctx;
  ctx.pool = &pool;
  Status st = cpu.execute(c.graph, c.target, data, ctx);
  EXPECT_TRUE(st.ok()) << st.message();
  if (c.in_place) out = f32[static_cast<size_t>(t.src[0])];
  return out;
}

std::vector<float> run_vulkan(VulkanBackend& vk, const OpCase& c) {
  for (const WeightSource& w : c.weights) {
    Status st = vk.register_weight(w);
    EXPECT_TRUE(st.ok()) << st.message();
  }
  const graph::Node& t = c.graph.node(c.target);
  EXPECT_TRUE(vk.supports_op(c.graph, t)) << graph::op_name(t.op);
  // One arena: every activation, then the output (unless it aliases source 0).
  const size_t align = vk.buffer_alignment();
  std::vector<size_t> offset(c.graph.size(), 0);
  size_t total = 0;
  for (size_t i = 0; i < c.graph.size(); ++i) {
    if (c.f32[i].empty()) continue;
    offset[i] = total;
    total += (c.f32[i].size() * 4 + align - 1) / align * align;
  }
  const size_t out_bytes = static_cast<size_t>(t.n_elements()) * 4;
  const size_t out_off = total;
  if (!c.in_place) total += out_bytes;
  auto arena = vk.alloc_buffer(total);
  EXPECT_TRUE(arena.ok()) << arena.status().message();
  if (!arena.ok()) return {};
  auto* base = static_cast<uint8_t*>((*arena)->base());
  std::vector<std::vector<int32_t>> i32 = c.i32;
  std::vector<void*> data(c.graph.size(), nullptr);
  for (size_t i = 0; i < c.graph.size(); ++i) {
    const graph::Node& n = c.graph.nodes[i];
    if (n.op == graph::OpKind::kWeight) data[i] = const_cast<void*>(vk.weight_handle(n.name));
    if (!c.f32[i].empty()) {
      data[i] = base + offset[i];
      Status st = vk.upload(data[i], c.f32[i].data(), c.f32[i].size() * 4);
      EXPECT_TRUE(st.ok()) << st.message();
    }
    if (!i32[i].empty()) data[i] = i32[i].data();
  }
  void* out_ptr = c.in_place ? data[static_cast<size_t>(t.src[0])] : base + out_off;
  data[static_cast<size_t>(c.target)] = out_ptr;
  std::vector<float> out(static_cast<size_t>(t.n_elements()));
  Status st = vk.execute(c.graph, c.target, data, ExecContext{});
  EXPECT_TRUE(st.ok()) << st.message();
  st = vk.synchronize();
  EXPECT_TRUE(st.ok()) << st.message();
  st = vk.download(out.data(), out_ptr, out_bytes);
  EXPECT_TRUE(st.ok()) << st.message();
  return out;
}

}  // namespace minfer::backend::test
