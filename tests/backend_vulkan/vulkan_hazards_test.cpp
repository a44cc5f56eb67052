// Barriers only where a dispatch depends on an earlier one (src/backend/vulkan/hazards.h): which bindings
// each shader writes, read from its SPIR-V; the hazard rule on hand-made dispatches; and a decode step of
// an offloaded model, where dispatches over the same input (Q, K, V; gate, up) share one barrier. That
// no needed barrier is missing is what the validation tier checks on every Vulkan test
// (MINFER_VULKAN_VALIDATE=1, synchronization validation).
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "backend/vulkan/hazards.h"
#include "backend/vulkan/shaders.h"
#include "backend_vulkan/vulkan_engine_options.h"
#include "backend_vulkan/vulkan_harness.h"
#include "common/fixtures.h"
#include "engine/engine.h"
#include "engine/tiny_model.h"

namespace minfer::backend::test {
namespace {

// From the shaders' declarations: every storage block but the output is `readonly` (in-place ops write
// binding 2, which may alias binding 0; kv_store writes the cells it is given).
TEST(VulkanHazards, WrittenBindingsComeFromTheSpirv) {
  const std::vector<std::pair<std::string, uint32_t>> expected = {
      {"attention", 1u << 5},   {"elementwise", 1u << 2}, {"get_rows", 1u << 2}, {"kv_store", 1u << 2},
      {"matmat", 1u << 2},      {"matmat_q8", 1u << 2},   {"matvec", 1u << 2},   {"matvec_q8", 1u << 2},
      {"quantize_q8", 1u << 1}, {"rms_norm", 1u << 2},    {"rope", 1u << 2}};
  size_t seen = 0;
  for (const vk::EmbeddedShader& s : vk::embedded_shaders()) {
    for (const auto& [name, mask] : expected) {
      if (s.name != name) continue;
      EXPECT_EQ(vk::written_bindings(s.spirv), mask) << name;
      ++seen;
    }
  }
  EXPECT_EQ(seen, expected.size()) << "a shader of the list is not embedded";
  EXPECT_EQ(vk::written_bindings({}), ~0u) << "what cannot be read counts as written";
}

vk::Dispatch dispatch_of(const vk::Pipeline& p, std::vector<vk::Window> bindings) {
  vk::Dispatch d;
  d.pipeline = &p;
  d.n_bindings = static_cast<uint32_t>(bindings.size());
  for (size_t i = 0; i < bindings.size(); ++i) d.bindings[i] = bindings[i];
  return d;
}

vk::Window window(uint64_t serial, uint64_t offset, uint64_t range) {
  vk::Window w;
  w.serial = serial;
  w.offset = offset;
  w.range = range;
  return w;
}

TEST(VulkanHazards, ABarrierExactlyWhereADispatchDependsOnAnEarlierOne) {
  vk::Pipeline p;  // reads bindings 0 and 1, writes 2 (as matvec)
  p.n_bindings = 3;
  p.written_bindings = 1u << 2;
  vk::Hazards h;
  const vk::Window x = window(1, 0, 256), wq = window(2, 0, 1024), wk = window(2, 1024, 1024);
  const vk::Window q = window(3, 0, 256), k = window(3, 256, 256), y = window(4, 0, 256);
  EXPECT_TRUE(h.needs_barrier(dispatch_of(p, {wq, x, q}))) << "the first dispatch always waits";
  EXPECT_FALSE(h.needs_barrier(dispatch_of(p, {wk, x, k}))) << "same input, another output range";
  EXPECT_TRUE(h.needs_barrier(dispatch_of(p, {wq, q, y}))) << "reads q, written since the barrier";
  EXPECT_FALSE(h.needs_barrier(dispatch_of(p, {wq, window(3, 256, 256), window(4, 256, 256)})))
      << "k was written before the last barrier";
  EXPECT_TRUE(h.needs_barrier(dispatch_of(p, {wq, window(5, 0, 64), window(4, 200, 100)})))
      << "writes bytes of y that a dispatch since the barrier wrote (write after write)";
  EXPECT_TRUE(h.needs_barrier(dispatch_of(p, {wq, x, window(4, 250, 8)})))
      << "still overlapping the last write";
  EXPECT_TRUE(h.needs_barrier(dispatch_of(p, {wq, x, window(1, 255, 4)})))
      << "writes x, which the last dispatch read (write after read)";
  EXPECT_FALSE(h.needs_barrier(dispatch_of(p, {wq, window(1, 512, 4), window(6, 0, 4)})))
      << "disjoint from everything since the barrier";
}

// A decode step of a tiny Qwen2 (2 blocks) with every block offloaded and tapes off, so the step is
// recorded: fewer barriers than dispatches. Its logits are the offload tests' business (against the CPU).
TEST(VulkanHazards, ADecodeStepWaitsOnlyForItsDependencies) {
  MINFER_VK_DEVICE_OR_SKIP(device);
  engine::EngineOptions o = vulkan_engine_options(device);
  o.n_ctx = 64;
  auto e = engine::Engine::load(minfer::test::write_tiny_model("tiny-qwen2", DType::F32, 7), o);
  ASSERT_TRUE(e.ok()) << e.status().message();
  VulkanBackend* vk = vulkan_of(**e);
  ASSERT_NE(vk, nullptr);
  vk->set_tapes_enabled(false);
  engine::Batch b;
  b.add(1, 0, 0, true);
  ASSERT_TRUE((*e)->decode(b).ok());
  const vk::Tapes::Stats before = vk->tape_stats();
  b.clear();
  b.add(2, 1, 0, true);
  ASSERT_TRUE((*e)->decode(b).ok());
  const uint64_t dispatches = vk->tape_stats().recorded_dispatches - before.recorded_dispatches;
  const uint64_t barriers = vk->tape_stats().recorded_barriers - before.recorded_barriers;
  std::printf("decode step: %llu dispatches, %llu barriers\n", static_cast<unsigned long long>(dispatches),
              static_cast<unsigned long long>(barriers));
  ASSERT_GT(dispatches, 0u);
  // Per block at least: K's and V's matmuls join Q's interval (one normed input), and up's joins gate's.
  // Measured on lavapipe: 43 dispatches, 29 barriers (the biases, ropes and KV stores pair up too).
  EXPECT_LE(barriers + 3 * 2, dispatches);
}

}  // namespace
}  // namespace minfer::backend::test
