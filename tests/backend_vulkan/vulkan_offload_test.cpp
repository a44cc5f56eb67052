// Layer offload on a real Vulkan device (lavapipe in CI): the engine with --gpu-layers 0, 1, half and
// all gives the CPU's greedy tokens, and logits within a stated tolerance of the CPU's; the placement
// line names what runs where. Models: a generated tiny Qwen2 (always) and the shared fixtures' Qwen2 /
// Qwen3 (skipped when absent). Kept small: lavapipe compiles each pipeline once per process and runs
// on the CPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "backend_vulkan/vulkan_engine_options.h"
#include "backend_vulkan/vulkan_harness.h"
#include "common/fixtures.h"
#include "engine/engine.h"
#include "engine/tiny_model.h"
#include "quant/quant.h"

namespace minfer::backend::test {
namespace {

struct OffloadRun {
  std::vector<int32_t> tokens;               // greedy: the prompt's next token, then each decoded one
  std::vector<std::vector<float>> logits;    // per step
  std::string placement;
  int32_t n_gpu_layers = 0;
};

int32_t argmax(const std::vector<float>& v) {
  return static_cast<int32_t>(std::max_element(v.begin(), v.end()) - v.begin());
}

// Prefill of a 7-token prompt, then 3 greedy decode steps, on the backends asked for.
// `cache`: the KV cache type (the engine's default: f16).
OffloadRun run(const std::string& path, std::vector<std::string> backends, int device, int32_t gpu_layers,
               DType cache = DType::F16) {
  OffloadRun out;
  engine::EngineOptions options = vulkan_engine_options(device, gpu_layers, std::move(backends));
  options.cache_type = cache;
  auto e = engine::Engine::load(path, options);
  EXPECT_TRUE(e.ok()) << e.status().message();
  if (!e.ok()) return out;
  out.placement = (*e)->placement();
  out.n_gpu_layers = (*e)->n_gpu_layers();
  // Every weight node sits on the backend running its block (Vulkan: index 0 when present).
  auto plan = (*e)->plan_for(graph::GraphParams{1, 1, false});
  EXPECT_TRUE(plan.ok());
  if (plan.ok()) {
    const int32_t n_layer = (*e)->hparams().n_layer;
    const bool has_device = (*e)->backend_names().size() > 1;
    for (const graph::Node& n : (*plan)->graph.nodes) {
      if (n.op != graph::OpKind::kWeight || n.backend < 0) continue;
      const int32_t l = engine::weight_layer(n.name);
      const bool want_device = has_device && engine::offloaded(l, out.n_gpu_layers, n_layer);
      EXPECT_EQ(n.backend == 0 && has_device, want_device) << n.name << " with " << out.n_gpu_layers << " blocks";
    }
  }
  engine::Batch b;
  const std::vector<int32_t> prompt = minfer::test::prompt_of(7, 3);
  for (size_t i = 0; i < prompt.size(); ++i) b.add(prompt[i], static_cast<int32_t>(i), 0, i + 1 == prompt.size());
  auto pos = static_cast<int32_t>(prompt.size());
  for (int step = 0; step < 4; ++step) {
    auto logits = (*e)->decode(b);
    EXPECT_TRUE(logits.ok()) << logits.status().message();
    if (!logits.ok()) return out;
    out.logits.push_back(*logits);
    out.tokens.push_back(argmax(*logits));
    b.clear();
    b.add(out.tokens.back(), pos++, 0, true);
  }
  return out;
}

// MINFER_VULKAN_INT_DOT for the life of the object (the device backend reads it at creation).
struct ScopedIntDot {
  explicit ScopedIntDot(bool int8) { setenv("MINFER_VULKAN_INT_DOT", int8 ? "1" : "0", 1); }
  ~ScopedIntDot() { unsetenv("MINFER_VULKAN_INT_DOT"); }
  ScopedIntDot(const ScopedIntDot&) = delete;
  ScopedIntDot& operator=(const ScopedIntDot&) = delete;
};

// Each configuration against the CPU: same greedy tokens, logits within `tol` (absolute, on logits of
// magnitude ~1-10). The device's matmul keeps activations in f32 where the CPU first rounds them to the
// weight's vec_dot type (Q8_0 blocks for quantized weights, F16 for F16 weights), and sums in another
// order; those roundings are the whole difference (every other offloaded op is bit-exact or within a few
// ulps, see BACKENDS.md).
// `int8`: the device runs the int8 matmul (else the f32 one, whatever the device's default); `cache`: the
// KV cache type of both sides.
void expect_offload_matches_cpu(const std::string& path, float tol, bool int8 = false,
                                DType cache = DType::F16) {
  MINFER_VK_DEVICE_OR_SKIP(device);
  const OffloadRun cpu = run(path, {"cpu"}, -1, engine::kGpuLayersDefault, cache);
  ASSERT_EQ(cpu.tokens.size(), 4u);
  EXPECT_NE(cpu.placement.find("CPU: blocks 0-"), std::string::npos) << cpu.placement;
  engine::EngineOptions plain;
  plain.n_ctx = 64;
  plain.quiet = true;
  auto e = engine::Engine::load(path, plain);
  ASSERT_TRUE(e.ok());
  const int32_t n_layer = (*e)->hparams().n_layer;
  for (int32_t n : {0, 1, std::max(1, n_layer / 2), static_cast<int32_t>(engine::kGpuLayersAll)}) {
    const OffloadRun dev = [&] {
      ScopedIntDot env(int8);
      return run(path, {"vulkan"}, device, n, cache);
    }();
    SCOPED_TRACE(dev.placement);
    EXPECT_EQ(dev.n_gpu_layers, n == engine::kGpuLayersAll ? n_layer : n);
    EXPECT_EQ(dev.tokens, cpu.tokens);
    ASSERT_EQ(dev.logits.size(), cpu.logits.size());
    float worst = 0;
    for (size_t s = 0; s < dev.logits.size(); ++s) {
      ASSERT_EQ(dev.logits[s].size(), cpu.logits[s].size());
      for (size_t i = 0; i < dev.logits[s].size(); ++i)
        worst = std::max(worst, std::fabs(dev.logits[s][i] - cpu.logits[s][i]));
    }
    std::printf("gpu layers %d: greedy %s, max |logit - CPU| %.4g\n", n, dev.tokens == cpu.tokens ? "equal" : "DIFFERENT",
                static_cast<double>(worst));
    if (n == 0) {
      EXPECT_EQ(worst, 0.0f);  // nothing offloaded: the CPU's own arithmetic
    } else {
      EXPECT_LE(worst, tol) << "gpu layers " << n;
    }
    EXPECT_NE(dev.placement.find("placement: Vulkan ("), std::string::npos);
    EXPECT_NE(dev.placement.find(int8 ? "; int8 matmul)" : "; f32 matmul)"), std::string::npos);
    EXPECT_NE(dev.placement.find("device weights"), std::string::npos);
    EXPECT_NE(dev.placement.find("KV "), std::string::npos);
    if (n == engine::kGpuLayersAll) {
      EXPECT_NE(dev.placement.find("+ embedding, output norm and head; CPU: none"), std::string::npos);
    }
  }
}

TEST(VulkanOffload, TinyQwen2MatchesTheCpuAtEveryLayerCount) {
  // F32 weights: the CPU's vec_dot for F32 keeps f32 activations, so only the summation order differs
  // (measured 3e-5 on logits of a few units; the bound leaves 30x for another device's reduction order).
  expect_offload_matches_cpu(minfer::test::write_tiny_model("tiny-qwen2", DType::F32, 7), 1e-3f);
}

TEST(VulkanOffload, FixtureQwen2Q8MatchesTheCpuAtEveryLayerCount) {
  MINFER_REQUIRE_FIXTURES();
  // Q8_0 weights: the CPU rounds each activation block to Q8_0 (relative step 1/127 of the block's
  // largest value) before the dot product; the device does not. The fixtures' README measures exactly
  // this gap for llama.cpp (q8_0 vs the F32 file, last position: 0.66 on logits of +-20); these
  // random-weight models amplify one rounding flip, so that documented floor is the bound.
  expect_offload_matches_cpu(minfer::test::fixture_path("models/qwen2-mini-q8_0.gguf"), 0.66f);
}

// The int8 matmul on fixtures of every quantized activation format (Q8_0, Q8_1, Q8_K). It quantizes
// activations exactly as the CPU does (VulkanInt8Matmul), so most logits differ from the CPU's only by
// the order of f32 additions and the other ops' last-bit differences (measured 0 to 7.7e-6 on logits of
// +-20 on five of these seven, where the f32 path differs by 0.42 on the same Q8_0 model). But a last-bit
// difference that lands on an 8-bit rounding boundary of the next matmul's activations flips that rounding on
// one side only, and these random weights amplify one flip: measured 0.014 (qwen2-mini-q8_0) and 0.22
// (qwen2-mini-q5_k_m). A flip is a part of the rounding the f32 path differs by in full, so the bound is the
// same documented floor, 0.66 (the fixtures' q8_0 vs F32 gap). An f32 cache on both sides: with f16 cells a
// last-bit difference in K or V also flips its f16 rounding (2^-11 relative), which adds flips in the
// attention output (measured: qwen3-mini-q4_0 then differs by 0.21 and takes another greedy token at a
// near-tie).
class VulkanOffloadInt8 : public ::testing::TestWithParam<const char*> {};

TEST_P(VulkanOffloadInt8, FixtureMatchesTheCpuAtEveryLayerCount) {
  MINFER_REQUIRE_FIXTURES();
  expect_offload_matches_cpu(minfer::test::fixture_path(fmt::format("models/{}.gguf", GetParam())), 0.66f,
                             true, DType::F32);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, VulkanOffloadInt8,
                         ::testing::Values("qwen2-mini-q8_0", "qwen3-mini-q8_0", "qwen2-mini-q4_k_m",
                                           "qwen3-mini-q4_0", "qwen3-mini-q5_1", "qwen2-mini-q5_k_m",
                                           "qwen3-mini-q6_k"),
                         [](const ::testing::TestParamInfo<const char*>& p) {
                           std::string name = p.param;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

TEST(VulkanOffload, FixtureQwen3F16MatchesTheCpuAtEveryLayerCount) {
  MINFER_REQUIRE_FIXTURES();
  // F16 weights: the CPU rounds activations to F16 (11-bit mantissa) first; the device keeps f32. The
  // fixtures' README measures that gap for llama.cpp (f16 vs the F32 file, last position): 0.03.
  expect_offload_matches_cpu(minfer::test::fixture_path("models/qwen3-mini-f16.gguf"), 0.03f);
}

// Two sequences in one batch, then a context shift (seq_rm + seq_add, K re-rotated) on one of them, with
// every block offloaded: the same greedy tokens as the CPU doing the same, and each sequence's logits
// within the F32 bound above (windows and cells reach the offloaded blocks' attention as data). An f32
// cache: with f16 cells, a last-bit difference in a K or V value can flip its f16 rounding (2^-11
// relative), which one step later shows as ~1e-3 on a logit (measured 1.2e-3).
TEST(VulkanOffload, SequencesAndAContextShiftMatchTheCpu) {
  MINFER_VK_DEVICE_OR_SKIP(device);
  const std::string path = minfer::test::write_tiny_model("tiny-qwen2", DType::F32, 7);
  auto steps = [&](std::vector<std::string> backends, int dev, int32_t layers) {
    engine::EngineOptions o = vulkan_engine_options(dev, layers, std::move(backends));
    o.cache_type = DType::F32;
    auto e = engine::Engine::load(path, o);
    EXPECT_TRUE(e.ok()) << e.status().message();
    std::vector<std::vector<float>> out;
    if (!e.ok()) return out;
    engine::Batch b;
    const std::vector<int32_t> p0 = minfer::test::prompt_of(6, 1), p1 = minfer::test::prompt_of(4, 2);
    for (size_t i = 0; i < p0.size(); ++i) b.add(p0[i], static_cast<int32_t>(i), 0, i + 1 == p0.size());
    for (size_t i = 0; i < p1.size(); ++i) b.add(p1[i], static_cast<int32_t>(i), 1, i + 1 == p1.size());
    auto r = (*e)->decode(b);
    EXPECT_TRUE(r.ok()) << r.status().message();
    if (!r.ok()) return out;
    out.push_back(*r);
    // Drop positions 1..2 of sequence 0 and move 3..5 down by 2, as --cnv's context shift does.
    (*e)->kv().seq_rm(0, 1, 3);
    const Status shifted = (*e)->seq_add(0, 3, -1, -2);
    EXPECT_TRUE(shifted.ok()) << shifted.message();
    b.clear();
    const int32_t half = static_cast<int32_t>(r->size() / 2);
    b.add(argmax(std::vector<float>(r->begin(), r->begin() + half)), 4, 0, true);
    b.add(argmax(std::vector<float>(r->begin() + half, r->end())), 4, 1, true);
    r = (*e)->decode(b);
    EXPECT_TRUE(r.ok()) << r.status().message();
    if (r.ok()) out.push_back(*r);
    return out;
  };
  const auto cpu = steps({"cpu"}, -1, engine::kGpuLayersDefault);
  const auto dev = steps({"vulkan"}, device, engine::kGpuLayersAll);
  ASSERT_EQ(cpu.size(), 2u);
  ASSERT_EQ(dev.size(), 2u);
  for (size_t s = 0; s < 2; ++s) {
    ASSERT_EQ(cpu[s].size(), dev[s].size());
    const size_t half = cpu[s].size() / 2;
    for (size_t q = 0; q < 2; ++q) {
      const std::vector<float> c(cpu[s].begin() + static_cast<std::ptrdiff_t>(q * half),
                                 cpu[s].begin() + static_cast<std::ptrdiff_t>((q + 1) * half));
      const std::vector<float> d(dev[s].begin() + static_cast<std::ptrdiff_t>(q * half),
                                 dev[s].begin() + static_cast<std::ptrdiff_t>((q + 1) * half));
      EXPECT_EQ(argmax(c), argmax(d)) << "step " << s << " sequence " << q;
      for (size_t i = 0; i < half; ++i) ASSERT_NEAR(c[i], d[i], 1e-3f) << "step " << s << " sequence " << q;
    }
  }
}

// The default on a CPU-type device: nothing is offloaded unless the device is named.
// The context shift (Engine::seq_add) with every layer's cells in device memory runs as the model's K-shift
// graph on the device, and leaves the keys the CPU's shift leaves. Qwen2 (NEOX pairs): kv_rows, rope and
// kv_store all run on the device, in one split. Llama (normal pairs, which rope.comp lacks): the rope runs on
// the CPU between the device's kv_rows and kv_store, the scheduler copying the rows across. Tolerances: the
// keys come from each backend's own forward pass (f32 weights: equal to a few f32 ulps) and the rotation's
// sin/cos are the shader's polynomials against the C library's (a few ulps more), so 1e-5 absolute on keys
// of magnitude <= 8 in an f32 cache (measured: at most 0.2 of it); an f16 cache stores those results
// rounded, and a last-bit difference may round to the neighbouring f16 (2^-10 relative; measured: equal).
TEST(VulkanOffload, AContextShiftRunsOnTheDeviceAndEqualsTheCpus) {
  MINFER_VK_DEVICE_OR_SKIP(device);
  for (const char* preset : {"tiny-qwen2", "tiny-llama"}) {
    const std::string path = minfer::test::write_tiny_model(preset, DType::F32, 7);
    for (DType cache : {DType::F32, DType::F16}) {
      SCOPED_TRACE(fmt::format("{} {} cache", preset, dtype_name(cache)));
      auto load = [&](std::vector<std::string> backends, int dev, int32_t layers) {
        engine::EngineOptions o = vulkan_engine_options(dev, layers, std::move(backends));
        o.cache_type = cache;
        auto e = engine::Engine::load(path, o);
        EXPECT_TRUE(e.ok()) << e.status().message();
        return e.ok() ? std::move(*e) : nullptr;
      };
      auto cpu = load({"cpu"}, -1, engine::kGpuLayersDefault);
      auto gpu = load({"vulkan"}, device, engine::kGpuLayersAll);
      ASSERT_TRUE(cpu && gpu);
      ASSERT_EQ(gpu->kv().bytes_on(*gpu->backends()[0]), gpu->kv().bytes());  // every layer's cells on the device
      const std::vector<int32_t> prompt = minfer::test::prompt_of(9, 3);
      for (engine::Engine* e : {cpu.get(), gpu.get()}) {
        engine::Batch b;
        for (size_t i = 0; i < prompt.size(); ++i) b.add(prompt[i], static_cast<int32_t>(i), 0, i + 1 == prompt.size());
        ASSERT_TRUE(e->decode(b).ok());
        e->kv().seq_rm(0, 2, 5);  // drop positions 2..4 and move 5..8 down to 2..5
        const Status st = e->seq_add(0, 5, -1, -3);
        ASSERT_TRUE(st.ok()) << st.message();
      }
      // The shift's plan (4 cells) ran where the cells live.
      auto plan = gpu->plan_for(graph::GraphParams{4, 0, false, true});
      ASSERT_TRUE(plan.ok()) << plan.status().message();
      for (const graph::Node& n : (*plan)->graph.nodes) {
        if (n.op == graph::OpKind::kKvRows || n.op == graph::OpKind::kKvStore) {
          EXPECT_EQ(gpu->backends()[static_cast<size_t>(n.backend)]->name(), "Vulkan") << n.name;
        }
        if (n.op == graph::OpKind::kRope) {
          EXPECT_EQ(gpu->backends()[static_cast<size_t>(n.backend)]->name(),
                    std::string(preset) == "tiny-qwen2" ? "Vulkan" : "CPU")
              << n.name;
        }
      }
      if (std::string(preset) == "tiny-qwen2") {  // one device split: the deltas (a host input) copied in once
        size_t device_splits = 0;
        for (const auto& split : (*plan)->splits) device_splits += gpu->backends()[static_cast<size_t>(split.backend)]->name() == "Vulkan";
        EXPECT_EQ(device_splits, 1u);
      }
      // The keys of every layer, cell by cell (both engines placed the prompt in the same cells).
      const auto cells = cpu->kv().seq_cells(0);
      ASSERT_EQ(cells, gpu->kv().seq_cells(0));
      const size_t row = cpu->kv().views()[0].row_bytes;
      const int64_t n_el = cpu->kv().views()[0].row_elems;
      std::vector<uint8_t> a(row), b(row);
      std::vector<float> fa(static_cast<size_t>(n_el)), fb(static_cast<size_t>(n_el));
      double worst = 0;
      for (int32_t l = 0; l < cpu->hparams().n_layer; ++l) {
        for (const auto& [pos, cell] : cells) {
          ASSERT_TRUE(cpu->kv().read_row(l, false, cell, a.data()).ok());
          ASSERT_TRUE(gpu->kv().read_row(l, false, cell, b.data()).ok());
          quant::dequantize_row(cache, a.data(), fa.data(), n_el);
          quant::dequantize_row(cache, b.data(), fb.data(), n_el);
          for (int64_t i = 0; i < n_el; ++i) {
            const double x = fa[static_cast<size_t>(i)], y = fb[static_cast<size_t>(i)];
            const double tol = cache == DType::F32 ? 1e-5 : std::ldexp(std::max(std::abs(x), 1e-3), -10);
            worst = std::max(worst, std::abs(x - y) / tol);
          }
        }
      }
      fmt::print("{} {} cache: K shift on the device vs the CPU, largest key difference {:.3g} of its tolerance\n",
                 preset, dtype_name(cache), worst);
      EXPECT_LE(worst, 1.0) << "the largest key difference, in units of its tolerance";
      // Both moved the positions.
      ASSERT_EQ(cpu->kv().seq_pos_max(0), 5);
      ASSERT_EQ(gpu->kv().seq_pos_max(0), 5);
    }
  }
}

TEST(VulkanOffload, ACpuTypeDeviceIsUsedOnlyWhenNamed) {
  MINFER_VK_DEVICE_OR_SKIP(device);
  auto devices = vk::enumerate_devices();
  ASSERT_TRUE(devices.ok());
  bool any_gpu = false;
  for (const vk::DeviceInfo& d : *devices) any_gpu = any_gpu || d.default_use();
  const std::string path = minfer::test::write_tiny_model("tiny-qwen2", DType::F32, 7);
  const OffloadRun dflt = run(path, {}, -1, engine::kGpuLayersDefault);
  if (!any_gpu) {
    EXPECT_EQ(dflt.n_gpu_layers, 0) << dflt.placement;
    EXPECT_EQ(dflt.placement.find("Vulkan"), std::string::npos) << dflt.placement;
  }
  // Named by index: the default layer count is auto, which fits this tiny model whole.
  const OffloadRun named = run(path, {}, device, engine::kGpuLayersDefault);
  EXPECT_GT(named.n_gpu_layers, 0) << named.placement;
  EXPECT_NE(named.placement.find("Vulkan ("), std::string::npos) << named.placement;
}

}  // namespace
}  // namespace minfer::backend::test
