// Issue 23, "Faults", end to end on a real Vulkan device (lavapipe in CI): device faults injected through
// the device layer's test hook (vk::Device::inject_fault, reached through the registry's
// set_device_backend_hook_for_testing or the binary's MINFER_TEST_VULKAN_FAULT) while the engine loads,
// while it steps, and while the server serves. What must hold:
//   - out of device memory at load names the tensor and the bytes and suggests a smaller --gpu-layers;
//   - a failed submit, a lost device or out of memory during a step is an error naming the split (and the
//     node, where one node is at fault), never logits; the step's KV cells are released, so a retry gives
//     the fault-free logits;
//   - after a lost device every later step fails fast with a named error (no hang, no garbage);
//   - the server answers only the faulted step's requests with 500 / an error event and keeps serving;
//     after a lost device it answers every request at once with 503 naming it.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <cstdio>
#include <regex>
#include <string>
#include <vector>

#include "backend/registry.h"
#include "backend_vulkan/vulkan_engine_options.h"
#include "backend_vulkan/vulkan_harness.h"
#include "engine/engine.h"
#include "engine/tiny_model.h"
#include "models/model.h"
#include "server/test_server.h"

namespace minfer::backend::test {
namespace {

// Captures the Vulkan backend each engine load creates (and optionally arms a fault on it at once);
// removes the registry hook when it goes out of scope.
class DeviceCapture {
 public:
  explicit DeviceCapture(vk::Fault fault = vk::Fault::kNone, uint32_t nth = 1) {
    set_device_backend_hook_for_testing([this, fault, nth](Backend& b) {
      auto* vkb = dynamic_cast<VulkanBackend*>(&b);
      if (vkb == nullptr) return;
      backend = vkb;
      if (fault != vk::Fault::kNone) vkb->device().inject_fault(fault, nth);
    });
  }
  ~DeviceCapture() { set_device_backend_hook_for_testing({}); }
  DeviceCapture(const DeviceCapture&) = delete;
  DeviceCapture& operator=(const DeviceCapture&) = delete;
  VulkanBackend* backend = nullptr;  // the last one created; owned by the engine
};

engine::EngineOptions offload_all(int device) {
  engine::EngineOptions o = vulkan_engine_options(device);
  o.offload.explicit_request = true;
  return o;
}

const std::string& tiny_path() {
  static const std::string path = minfer::test::write_tiny_model("tiny-qwen2", DType::F32, 7);
  return path;
}

// The bytes Vulkan allocates for weight `name` of the tiny model (1-D tensors are held as f32).
uint64_t device_bytes_of(const std::string& name) {
  auto file = gguf::File::open(tiny_path());
  if (!file.ok()) return 0;
  auto model = models::load_model(*file);
  if (!model.ok()) return 0;
  for (const WeightSource& w : (*model)->weights()) {
    if (w.name != name) continue;
    const int64_t rows = w.ne[1] * w.ne[2] * w.ne[3];
    return rows == 1 && w.type != DType::F32 ? static_cast<uint64_t>(w.ne[0]) * 4 : w.n_bytes;
  }
  return 0;
}

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST(VulkanFaults, OutOfDeviceMemoryAtLoadNamesTheTensorAndTheBytesAndSuggestsFewerLayers) {
  MINFER_VK_DEVICE_OR_SKIP(device);
  // nth 1: the first weight's device-local buffer; nth 2: the staging buffer its upload then allocates.
  for (uint32_t nth : {1u, 2u}) {
    SCOPED_TRACE(nth);
    Status st;
    {
      DeviceCapture capture(vk::Fault::kOutOfDeviceMemory, nth);
      auto e = engine::Engine::load(tiny_path(), offload_all(device));
      ASSERT_FALSE(e.ok());
      ASSERT_NE(capture.backend, nullptr);
      st = e.status();
    }
    const std::string m = st.message();
    EXPECT_EQ(st.code(), StatusCode::kOutOfRange) << m;
    EXPECT_TRUE(has(m, "VK_ERROR_OUT_OF_DEVICE_MEMORY")) << m;
    EXPECT_TRUE(has(m, "try a smaller --gpu-layers")) << m;
    EXPECT_TRUE(has(m, "offloading 2 of 2 blocks")) << m;
    std::smatch match;
    ASSERT_TRUE(std::regex_search(m, match, std::regex(nth == 1 ? "tensor '([^']+)': cannot allocate ([0-9]+) bytes"
                                                                 : "uploading tensor '([^']+)' \\(([0-9]+) bytes\\)")))
        << m;
    const uint64_t bytes = device_bytes_of(match[1].str());
    EXPECT_GT(bytes, 0u) << "not a weight of the model: " << match[1].str();
    EXPECT_EQ(std::stoull(match[2].str()), bytes) << m;
    if (nth == 2) {
      EXPECT_TRUE(has(m, "staging buffer")) << m;
    }
  }
  // Nothing stays armed: the next load of the same model offloads it whole.
  auto e = engine::Engine::load(tiny_path(), offload_all(device));
  ASSERT_TRUE(e.ok()) << e.status().message();
  EXPECT_EQ((*e)->n_gpu_layers(), 2);
}

// The allocations after the weights at load: each layer's K and V cells (layer 0 K, 0 V, 1 K, 1 V), then the
// decode plan's activation arena, the last one. Out of memory at each names what was being allocated and its
// bytes and suggests a smaller --gpu-layers, as for a weight.
TEST(VulkanFaults, OutOfDeviceMemoryForTheKvCacheOrTheActivationsAtLoadNamesThemAndSuggestsFewerLayers) {
  MINFER_VK_DEVICE_OR_SKIP(device);
  uint64_t total = 0, kv_region = 0;
  {
    DeviceCapture capture;
    auto e = engine::Engine::load(tiny_path(), offload_all(device));
    ASSERT_TRUE(e.ok()) << e.status().message();
    ASSERT_NE(capture.backend, nullptr);
    total = capture.backend->device().allocations();
    kv_region = (*e)->kv().bytes() / 4;  // 2 layers x (K, V), all on the device
  }
  ASSERT_GE(total, 5u);
  const std::vector<std::string> expected = {"KV cache of layer 0, K: " + std::to_string(kv_region) + " bytes",
                                             "KV cache of layer 0, V: " + std::to_string(kv_region) + " bytes",
                                             "KV cache of layer 1, K: " + std::to_string(kv_region) + " bytes",
                                             "KV cache of layer 1, V: " + std::to_string(kv_region) + " bytes",
                                             "activations of the 1-token plan on Vulkan: "};
  for (size_t i = 0; i < expected.size(); ++i) {
    const auto nth = static_cast<uint32_t>(total - expected.size() + 1 + i);
    SCOPED_TRACE(nth);
    DeviceCapture capture(vk::Fault::kOutOfDeviceMemory, nth);
    auto e = engine::Engine::load(tiny_path(), offload_all(device));
    ASSERT_FALSE(e.ok());
    const std::string m = e.status().message();
    EXPECT_EQ(e.status().code(), StatusCode::kOutOfRange) << m;
    EXPECT_TRUE(has(m, "offloading 2 of 2 blocks: " + expected[i])) << m;
    EXPECT_TRUE(std::regex_search(m, std::regex("cannot allocate [0-9]+ bytes on .*VK_ERROR_OUT_OF_DEVICE_MEMORY")))
        << m;
    EXPECT_TRUE(has(m, "; try a smaller --gpu-layers")) << m;
    if (i + 1 == expected.size()) {  // the arena's bytes, stated once in the context and once by the device
      std::smatch match;
      ASSERT_TRUE(std::regex_search(m, match, std::regex("on Vulkan: ([0-9]+) bytes: .*cannot allocate ([0-9]+) bytes")))
          << m;
      EXPECT_EQ(match[1].str(), match[2].str()) << m;
      EXPECT_GT(std::stoull(match[1].str()), 0u) << m;
    }
  }
}

#ifdef MINFER_BINARY
// The same through the binary: MINFER_TEST_VULKAN_FAULT arms the fault from outside (a documented test
// hook), `minfer run` prints the message and exits non-zero.
TEST(VulkanFaults, RunCommandReportsOutOfDeviceMemoryAtLoadAndExitsNonZero) {
  MINFER_VK_DEVICE_OR_SKIP(device);
  const std::string cmd = "MINFER_TEST_VULKAN_FAULT=oom " MINFER_BINARY " run " + tiny_path() +
                          " hello -n 2 --backend vulkan --gpu " + std::to_string(device) +
                          " --gpu-layers all 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof(buf), p)) out.append(buf, n);
  const int status = pclose(p);
  EXPECT_NE(status, 0) << out;
  EXPECT_TRUE(has(out, "test hook MINFER_TEST_VULKAN_FAULT=oom armed")) << out;
  EXPECT_TRUE(std::regex_search(out, std::regex("tensor '[^']+': cannot allocate [0-9]+ bytes"))) << out;
  EXPECT_TRUE(has(out, "try a smaller --gpu-layers")) << out;
  // A value the hook does not know is refused by name, not ignored.
  FILE* q = popen(("MINFER_TEST_VULKAN_FAULT=sometimes " MINFER_BINARY " run " + tiny_path() +
                   " hello -n 1 --backend vulkan --gpu " + std::to_string(device) + " 2>&1")
                      .c_str(),
                  "r");
  ASSERT_NE(q, nullptr);
  out.clear();
  while (size_t n = fread(buf, 1, sizeof(buf), q)) out.append(buf, n);
  EXPECT_NE(pclose(q), 0) << out;
  EXPECT_TRUE(has(out, "MINFER_TEST_VULKAN_FAULT: vulkan fault 'sometimes'")) << out;
}
#endif

// A 7-token prompt of sequence 0, its last position's logits wanted.
engine::Batch prompt_batch() {
  engine::Batch b;
  const std::vector<int32_t> prompt = minfer::test::prompt_of(7, 3);
  for (size_t i = 0; i < prompt.size(); ++i) b.add(prompt[i], static_cast<int32_t>(i), 0, i + 1 == prompt.size());
  return b;
}

int32_t argmax(const std::vector<float>& v) {
  return static_cast<int32_t>(std::max_element(v.begin(), v.end()) - v.begin());
}

// A step fault that leaves the device usable (a failed submit, out of memory), injected before step
// `fault_step` (0: the prompt, 1: the first decode): that step's decode is an error naming where it struck,
// the retry of the same batch gives exactly the fault-free logits (the failed step's cells were released;
// the same recorded work on the same device is deterministic), and generation goes on.
void expect_recoverable_step_fault(vk::Fault fault, int fault_step, const std::vector<std::string>& parts) {
  MINFER_VK_DEVICE_OR_SKIP(device);
  std::vector<std::vector<float>> clean;  // fault-free logits: the prompt, then 2 decode steps
  {
    auto e = engine::Engine::load(tiny_path(), offload_all(device));
    ASSERT_TRUE(e.ok()) << e.status().message();
    engine::Batch b = prompt_batch();
    for (int step = 0; step < 3; ++step) {
      auto logits = (*e)->decode(b);
      ASSERT_TRUE(logits.ok()) << logits.status().message();
      clean.push_back(*logits);
      b.clear();
      b.add(argmax(*logits), 7 + step, 0, true);
    }
  }
  DeviceCapture capture;
  auto e = engine::Engine::load(tiny_path(), offload_all(device));
  ASSERT_TRUE(e.ok()) << e.status().message();
  ASSERT_NE(capture.backend, nullptr);
  engine::Batch b = prompt_batch();
  for (int step = 0; step < 3; ++step) {
    SCOPED_TRACE(step);
    if (step == fault_step) {
      const int32_t used = (*e)->kv().used_cells();
      capture.backend->device().inject_fault(fault);
      auto failed = (*e)->decode(b);
      ASSERT_FALSE(failed.ok()) << "a faulted step returned logits";
      for (const std::string& part : parts)
        EXPECT_TRUE(has(failed.status().message(), part)) << failed.status().message();
      EXPECT_EQ((*e)->kv().used_cells(), used) << "the failed step's cells are released";
    }
    auto logits = (*e)->decode(b);
    ASSERT_TRUE(logits.ok()) << logits.status().message();
    EXPECT_EQ(*logits, clean[static_cast<size_t>(step)]);
    b.clear();
    b.add(argmax(*logits), 7 + step, 0, true);
  }
}

TEST(VulkanFaults, AFailedSubmitMidGenerationNamesTheSplitAndTheRetryGivesTheFaultFreeLogits) {
  expect_recoverable_step_fault(vk::Fault::kSubmitFailed, 1, {"Vulkan: split ", " (nodes ", "vkQueueSubmit"});
}

TEST(VulkanFaults, OutOfDeviceMemoryDuringAStepFailsOnlyThatStep) {
  // Weights are allocated at load; a step allocates only where a buffer must grow: the first step of a plan
  // its activations, the first read-back the staging buffer every later one reuses. A decode step of a
  // plan already run allocates nothing, so the fault strikes the prompt step.
  expect_recoverable_step_fault(vk::Fault::kOutOfDeviceMemory, 0,
                                {"VK_ERROR_OUT_OF_DEVICE_MEMORY", "activations of the 7-token plan"});
}

TEST(VulkanFaults, ALostDeviceFailsThatStepAndEveryLaterOneFastWithANamedError) {
  MINFER_VK_DEVICE_OR_SKIP(device);
  DeviceCapture capture;
  auto e = engine::Engine::load(tiny_path(), offload_all(device));
  ASSERT_TRUE(e.ok()) << e.status().message();
  ASSERT_NE(capture.backend, nullptr);
  auto first = (*e)->decode(prompt_batch());
  ASSERT_TRUE(first.ok()) << first.status().message();
  engine::Batch b;
  b.add(argmax(*first), 7, 0, true);
  capture.backend->device().inject_fault(vk::Fault::kDeviceLost);
  auto lost = (*e)->decode(b);
  ASSERT_FALSE(lost.ok()) << "a step on a lost device returned logits";
  const std::string m = lost.status().message();
  EXPECT_TRUE(std::regex_search(m, std::regex("Vulkan: split [0-9]+ of [0-9]+ \\(nodes [0-9]+ '[^']*' \\.\\. [0-9]+ '[^']*'\\): ")))
      << m;
  EXPECT_TRUE(has(m, "VK_ERROR_DEVICE_LOST")) << m;
  EXPECT_TRUE(has(m, "is lost")) << m;
  // Later steps are refused at their first node, naming it and the split, without touching the device.
  for (int i = 0; i < 3; ++i) {
    auto again = (*e)->decode(b);
    ASSERT_FALSE(again.ok());
    const std::string a = again.status().message();
    EXPECT_TRUE(std::regex_search(a, std::regex("Vulkan: split [0-9]+ of [0-9]+ \\(nodes .*\\): node [0-9]+ \\("))) << a;
    EXPECT_TRUE(has(a, "is lost (VK_ERROR_DEVICE_LOST")) << a;
    EXPECT_TRUE(has(a, "restart minfer")) << a;
  }
  EXPECT_EQ((*e)->kv().used_cells(), 7) << "failed steps hold no cells";
}

// The server: the fault is armed by the batcher's per-step test hook, on the worker thread, before the
// forward of step `at` (step 0 is the prompt, later ones decode), so it strikes mid-generation.
server::test::TestServerOptions server_options(int device, std::function<Status(int64_t)> injector) {
  server::test::TestServerOptions o;
  o.n_ctx = 128;
  o.offload.backends = {"vulkan"};
  o.offload.device = device;
  o.offload.gpu_layers = engine::kGpuLayersAll;
  o.fault_injector = std::move(injector);
  return o;
}

constexpr const char* kRequest = R"({"prompt":"hello","max_tokens":4,"temperature":0})";
constexpr const char* kStreamRequest = R"({"prompt":"hello","max_tokens":4,"temperature":0,"stream":true})";

TEST(VulkanFaults, ServerAnswersAFaultedStepWith500AndServesTheNextRequest) {
  MINFER_VK_DEVICE_OR_SKIP(device);
  for (vk::Fault fault : {vk::Fault::kSubmitFailed, vk::Fault::kOutOfDeviceMemory}) {
    SCOPED_TRACE(static_cast<int>(fault));
    DeviceCapture capture;
    // Steps count from 0: the second decode step of the first request; out of memory, its prompt step
    // (steps allocate only where a buffer must grow, and later ones reuse what it allocated). -1: disarmed.
    std::atomic<int64_t> arm_at{fault == vk::Fault::kOutOfDeviceMemory ? 0 : 2};
    server::test::TestServer server(server_options(device, [&](int64_t step) {
      int64_t want = step;
      if (arm_at.compare_exchange_strong(want, -1)) capture.backend->device().inject_fault(fault);
      return Status();
    }));
    ASSERT_TRUE(server.ok());
    ASSERT_NE(capture.backend, nullptr);
    using server::test::post;
    auto r = post(server, "/v1/completions", kRequest);
    EXPECT_EQ(r.status, 500) << r.raw;
    EXPECT_EQ(r.body["error"]["type"], "server_error") << r.raw;
    EXPECT_TRUE(has(r.raw, fault == vk::Fault::kSubmitFailed ? "vkQueueSubmit" : "VK_ERROR_OUT_OF_DEVICE_MEMORY"))
        << r.raw;
    auto ok = post(server, "/v1/completions", kRequest);
    EXPECT_EQ(ok.status, 200) << ok.raw;
    auto again = post(server, "/v1/completions", kRequest);
    EXPECT_EQ(again.status, 200) << again.raw;
    EXPECT_EQ(ok.body["choices"][0]["text"], again.body["choices"][0]["text"]);
  }
}

TEST(VulkanFaults, ServerAfterALostDeviceAnswersEveryRequestWithTheNamedErrorAndNeverHangs) {
  MINFER_VK_DEVICE_OR_SKIP(device);
  DeviceCapture capture;
  std::atomic<bool> arm{false};  // steps are numbered across requests: arm whichever step runs next
  server::test::TestServer server(server_options(device, [&](int64_t) {
    if (arm.exchange(false)) capture.backend->device().inject_fault(vk::Fault::kDeviceLost);
    return Status();
  }));
  ASSERT_TRUE(server.ok());
  ASSERT_NE(capture.backend, nullptr);
  using server::test::post;
  auto ok = post(server, "/v1/completions", kRequest);
  ASSERT_EQ(ok.status, 200) << ok.raw;
  arm.store(true);  // the next request's first forward
  // A lost device is kUnavailable: 503 (the service cannot answer until minfer is restarted), where a
  // failed step on a working device is 500.
  auto lost = post(server, "/v1/completions", kRequest);
  EXPECT_EQ(lost.status, 503) << lost.raw;
  EXPECT_EQ(lost.body["error"]["type"], "unavailable_error") << lost.raw;
  EXPECT_TRUE(has(lost.raw, "VK_ERROR_DEVICE_LOST")) << lost.raw;
  // Every later request: the same named error, as a 503 or as the stream's error event, promptly.
  const auto t0 = std::chrono::steady_clock::now();
  auto r = post(server, "/v1/completions", kRequest);
  EXPECT_EQ(r.status, 503) << r.raw;
  EXPECT_TRUE(has(r.raw, "is lost")) << r.raw;
  auto st = post(server, "/v1/completions", kStreamRequest);
  const auto frames = server::test::sse_payloads(st.raw);
  ASSERT_GE(frames.size(), 2u) << st.raw;
  EXPECT_TRUE(has(frames[frames.size() - 2], "is lost")) << st.raw;
  EXPECT_EQ(frames.back(), "[DONE]");
  // Fails fast: no submit, no fence wait (the device's fence timeout is 60 s).
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(30));
}

}  // namespace
}  // namespace minfer::backend::test
