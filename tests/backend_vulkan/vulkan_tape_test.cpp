// Recorded-once command buffers (issue 23: "each command buffer for a cached plan is recorded once and
// replayed", src/backend/vulkan/tape.h) on a real Vulkan device (lavapipe in CI):
//   - a cached plan's decode step replays one recording: the first sight of a split's dispatches runs
//     once, the second records a tape, every later step replays it, until a window list outgrows its
//     ring slot (a power of two bytes), which is one new recording per doubling;
//   - replays give the bits of recording every step anew (the same commands over the same bytes);
//   - a buffer freed and allocated again is never bound through an old tape (buffers are matched by
//     serial, and a fresh buffer's serial is new even where the driver hands back the same handle);
//   - a failed submit of a replayed tape fails only that step, and the retry replays it with the
//     fault-free logits.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "backend_vulkan/vulkan_engine_options.h"
#include "backend_vulkan/vulkan_harness.h"
#include "common/fixtures.h"
#include "engine/engine.h"
#include "engine/tiny_model.h"

namespace minfer::backend::test {
namespace {

int32_t argmax(const std::vector<float>& v) {
  return static_cast<int32_t>(std::max_element(v.begin(), v.end()) - v.begin());
}

struct TapeRun {
  std::vector<std::vector<float>> logits;  // the prompt's, then each decode step's
  vk::Tapes::Stats after_prompt;
  vk::Tapes::Stats after_decode;
};

constexpr int kNoFault = -2;

// A 7-token prompt (step -1), then `steps` greedy decode steps with every block offloaded. fault_step
// arms a failed submit for that step, checks its named error and retries the same batch once.
TapeRun generate(int device, bool tapes, int steps, int fault_step = kNoFault) {
  TapeRun out;
  engine::EngineOptions o = vulkan_engine_options(device);
  o.n_ctx = 128;
  auto e = engine::Engine::load(minfer::test::write_tiny_model("tiny-qwen2", DType::F32, 7), o);
  EXPECT_TRUE(e.ok()) << e.status().message();
  if (!e.ok()) return out;
  VulkanBackend* vk = vulkan_of(**e);
  EXPECT_NE(vk, nullptr);
  if (vk == nullptr) return out;
  vk->set_tapes_enabled(tapes);
  engine::Batch b;
  const std::vector<int32_t> prompt = minfer::test::prompt_of(7, 3);
  for (size_t i = 0; i < prompt.size(); ++i)
    b.add(prompt[i], static_cast<int32_t>(i), 0, i + 1 == prompt.size());
  auto pos = static_cast<int32_t>(prompt.size());
  for (int step = -1; step < steps; ++step) {
    if (step == fault_step) {
      vk->device().inject_fault(vk::Fault::kSubmitFailed);
      auto failed = (*e)->decode(b);
      EXPECT_FALSE(failed.ok()) << "a failed submit returned logits";
      if (!failed.ok()) {
        EXPECT_NE(failed.status().message().find("vkQueueSubmit"), std::string::npos);
      }
    }
    auto logits = (*e)->decode(b);
    EXPECT_TRUE(logits.ok()) << logits.status().message();
    if (!logits.ok()) return out;
    out.logits.push_back(*logits);
    if (step == -1) out.after_prompt = vk->tape_stats();
    b.clear();
    b.add(argmax(*logits), pos++, 0, true);
  }
  out.after_decode = vk->tape_stats();
  return out;
}

// 70 decode steps: the window list of a step is its n_kv cells, 8 at the first step and 77 at the last.
// Ring slots are at least 256 bytes (64 cells), so the list outgrows its slot once, at n_kv 65.
TEST(VulkanTapes, DecodeStepsReplayOneRecordingPerWindowSlotAndGiveTheBitsOfRecordingEachStep) {
  MINFER_VK_DEVICE_OR_SKIP(device);
  constexpr int kSteps = 70;
  const TapeRun taped = generate(device, true, kSteps);
  const TapeRun plain = generate(device, false, kSteps);
  ASSERT_EQ(taped.logits.size(), static_cast<size_t>(kSteps + 1));
  ASSERT_EQ(plain.logits.size(), taped.logits.size());
  for (size_t s = 0; s < taped.logits.size(); ++s)
    ASSERT_EQ(taped.logits[s], plain.logits[s]) << "step " << s;

  // The prompt's plan runs once: recorded once, no tape. Every step is one split on the device (the host
  // inputs are the other, on the CPU).
  EXPECT_EQ(taped.after_prompt.replayed, 0u);
  EXPECT_EQ(taped.after_prompt.recorded, 0u);
  const uint64_t once = taped.after_decode.one_time - taped.after_prompt.one_time;
  const uint64_t recorded = taped.after_decode.recorded;
  const uint64_t replayed = taped.after_decode.replayed;
  std::printf("%d decode steps: %llu recorded once, %llu tapes recorded, %llu replays\n", kSteps,
              static_cast<unsigned long long>(once), static_cast<unsigned long long>(recorded),
              static_cast<unsigned long long>(replayed));
  EXPECT_EQ(once + recorded + replayed, static_cast<uint64_t>(kSteps));
  EXPECT_EQ(once, 2u);      // n_kv 8 (the plan's first step) and 65 (the window slot doubled)
  EXPECT_EQ(recorded, 2u);  // the steps after each
  EXPECT_EQ(replayed, static_cast<uint64_t>(kSteps - 4));
  EXPECT_EQ(plain.after_decode.replayed + plain.after_decode.recorded, 0u);
}

TEST(VulkanTapes, AFailedSubmitOfAReplayedTapeFailsOnlyThatStepAndTheRetryReplaysIt) {
  MINFER_VK_DEVICE_OR_SKIP(device);
  const TapeRun clean = generate(device, true, 8);
  const TapeRun faulted = generate(device, true, 8, /*fault_step=*/5);  // steps 2.. replay
  ASSERT_EQ(faulted.logits.size(), clean.logits.size());
  for (size_t s = 0; s < clean.logits.size(); ++s)
    ASSERT_EQ(faulted.logits[s], clean.logits[s]) << "step " << s;
  // The failed submit was of the tape (its replay is counted before the submit): one replay more.
  EXPECT_EQ(faulted.after_decode.replayed, clean.after_decode.replayed + 1);
  EXPECT_EQ(faulted.after_decode.recorded, clean.after_decode.recorded);
}

// One matmul through 4 KiB windows (20 dispatches) over one arena, three times, then over a new arena:
// the second run records a tape, the third replays it, and the new arena (a new buffer, whatever handle
// the driver reuses) is recorded again, never bound through the old tape. Every run gives the same bits.
TEST(VulkanTapes, ANewBufferNeverReplaysAnOldTape) {
  MINFER_VK_OR_SKIP(vk);
  const int64_t k = 64, n = 300, m = 2;
  std::vector<float> w(static_cast<size_t>(k * n)), x(static_cast<size_t>(k * m));
  for (size_t i = 0; i < w.size(); ++i)
    w[i] = static_cast<float>(static_cast<int>(i * 7919 % 201) - 100) / 128.0f;
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = static_cast<float>(static_cast<int>(i * 104729 % 61) - 30) / 16.0f;
  graph::Graph g;
  auto add = [&](graph::OpKind op, graph::Shape ne, const char* name, std::vector<graph::NodeId> src) {
    graph::Node node;
    node.op = op;
    node.type = DType::F32;
    node.ne = ne;
    node.name = name;
    node.src = std::move(src);
    g.nodes.push_back(node);
  };
  add(graph::OpKind::kWeight, {k, n, 1, 1}, "w", {});
  add(graph::OpKind::kReshape, {k, m, 1, 1}, "x", {});  // any node with f32 data: the matmul reads its buffer
  add(graph::OpKind::kMatMul, {n, m, 1, 1}, "y", {0, 1});
  ASSERT_TRUE(vk->register_weight({"w", DType::F32, {k, n, 1, 1}, w.data(), w.size() * 4}).ok());
  vk->set_max_binding_bytes(4096);
  const size_t align = vk->buffer_alignment();
  const size_t x_bytes = (x.size() * 4 + align - 1) / align * align;
  auto run_on = [&](Buffer& arena) {
    auto* base = static_cast<uint8_t*>(arena.base());
    std::vector<void*> data = {const_cast<void*>(vk->weight_handle("w")), base, base + x_bytes};
    EXPECT_TRUE(vk->upload(base, x.data(), x.size() * 4).ok());
    Status st = vk->execute(g, 2, data, ExecContext{});
    EXPECT_TRUE(st.ok()) << st.message();
    st = vk->synchronize();
    EXPECT_TRUE(st.ok()) << st.message();
    std::vector<float> y(static_cast<size_t>(n * m));
    EXPECT_TRUE(vk->download(y.data(), base + x_bytes, y.size() * 4).ok());
    return y;
  };
  std::vector<float> first;
  {
    auto arena = vk->alloc_buffer(x_bytes + static_cast<size_t>(n * m) * 4);
    ASSERT_TRUE(arena.ok());
    first = run_on(**arena);
    EXPECT_EQ(run_on(**arena), first);
    EXPECT_EQ(run_on(**arena), first);
    EXPECT_EQ(vk->tape_stats().one_time, 1u);
    EXPECT_EQ(vk->tape_stats().recorded, 1u);
    EXPECT_EQ(vk->tape_stats().replayed, 1u);
  }
  auto arena = vk->alloc_buffer(x_bytes + static_cast<size_t>(n * m) * 4);
  ASSERT_TRUE(arena.ok());
  EXPECT_EQ(run_on(**arena), first);
  EXPECT_EQ(vk->tape_stats().one_time, 2u);
  EXPECT_EQ(vk->tape_stats().replayed, 1u);
  // A double-precision oracle, so the bits compared above are the right ones (f32 weights and
  // activations: only the rounding of the f32 sums differs, a few ulps of sums of 64 products <= 2).
  for (int64_t t = 0; t < m; ++t) {
    for (int64_t r = 0; r < n; ++r) {
      double ref = 0;
      for (int64_t i = 0; i < k; ++i)
        ref += static_cast<double>(w[static_cast<size_t>(r * k + i)]) * x[static_cast<size_t>(t * k + i)];
      ASSERT_NEAR(first[static_cast<size_t>(t * n + r)], ref, 1e-4) << "token " << t << " row " << r;
    }
  }
}

}  // namespace
}  // namespace minfer::backend::test
