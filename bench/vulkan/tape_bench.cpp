// The host's cost of a step on the Vulkan backend, with and without recorded-once command buffers
// (src/backend/vulkan/tape.h): a chain of small f32 adds, one dispatch each, described by execute() and
// submitted by synchronize(), as a decode step's split is. The device work is tiny on purpose, so what
// is left is the host's: describing, then recording descriptor sets and commands (tapes off) or
// comparing the list and submitting the recording (tapes on). The CPU column is the calling thread's
// time (the host's cost); Time is wall time, which on lavapipe is its own threads running the shaders.
//
//   bench_vulkan --benchmark_filter=Step   (MINFER_VULKAN_DEVICE=N picks the device; lavapipe when named)
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <vector>

#include "backend/vulkan/device.h"
#include "backend/vulkan/vulkan_backend.h"

namespace minfer::backend {
namespace {

int device_index() {
  if (const char* s = std::getenv("MINFER_VULKAN_DEVICE")) return std::atoi(s);
  auto devices = vk::enumerate_devices();
  if (!devices.ok()) return -1;
  for (const vk::DeviceInfo& d : *devices) {
    if (d.unusable_reason().empty()) return d.index;
  }
  return -1;
}

// state.range(0): dispatches per step; state.range(1): tapes on (1) or off (0).
void BM_Step(benchmark::State& state) {
  const int index = device_index();
  auto vk = index < 0 ? Result<std::unique_ptr<VulkanBackend>>(not_found("no device"))
                      : VulkanBackend::create(index);
  if (!vk.ok()) {
    state.SkipWithError(vk.status().message().c_str());
    return;
  }
  VulkanBackend& b = **vk;
  b.set_tapes_enabled(state.range(1) != 0);
  const auto n = static_cast<size_t>(state.range(0));
  constexpr int64_t kWidth = 64;
  // Node 0: the operand; node i >= 1: add(node i-1, node 0), each in its own arena range.
  graph::Graph g;
  graph::Node a;
  a.op = graph::OpKind::kReshape;
  a.type = DType::F32;
  a.ne = {kWidth, 1, 1, 1};
  a.name = "a";
  g.nodes.push_back(a);
  for (size_t i = 1; i <= n; ++i) {
    graph::Node add = a;
    add.op = graph::OpKind::kAdd;
    add.src = {static_cast<graph::NodeId>(i - 1), 0};
    add.name = "add";
    g.nodes.push_back(add);
  }
  const size_t stride = std::max<size_t>(kWidth * 4, b.buffer_alignment());
  auto arena = b.alloc_buffer(stride * (n + 1));
  if (!arena.ok()) {
    state.SkipWithError(arena.status().message().c_str());
    return;
  }
  std::vector<void*> data(n + 1);
  for (size_t i = 0; i <= n; ++i) data[i] = static_cast<uint8_t*>((*arena)->base()) + i * stride;
  const std::vector<float> ones(kWidth, 1.0f);
  if (!b.upload(data[0], ones.data(), ones.size() * 4).ok()) {
    state.SkipWithError("upload failed");
    return;
  }
  for (auto _ : state) {
    for (size_t i = 1; i <= n; ++i) {
      if (Status st = b.execute(g, static_cast<graph::NodeId>(i), data, ExecContext{}); !st.ok()) {
        state.SkipWithError(st.message().c_str());
        return;
      }
    }
    if (Status st = b.synchronize(); !st.ok()) {
      state.SkipWithError(st.message().c_str());
      return;
    }
  }
  state.counters["replayed"] = static_cast<double>(b.tape_stats().replayed);
}
BENCHMARK(BM_Step)
    ->ArgsProduct({{64, 512}, {0, 1}})
    ->ArgNames({"dispatches", "tapes"})
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace minfer::backend
