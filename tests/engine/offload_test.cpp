// Offload helpers without a device: the flag and variable parsers (refusals name the value), the
// layer rule, auto's budget arithmetic (against a fake device's free memory), and the CPU-only engine's
// placement line.
#include <gtest/gtest.h>

#include "common/fake_device.h"
#include "engine/engine.h"
#include "engine/offload.h"
#include "engine/tiny_model.h"

namespace minfer::engine {
namespace {

TEST(Offload, ParsesLayersBackendsAndSizesAndRefusesByName) {
  EXPECT_EQ(*parse_gpu_layers("12"), 12);
  EXPECT_EQ(*parse_gpu_layers("0"), 0);
  EXPECT_EQ(*parse_gpu_layers("AUTO"), kGpuLayersAuto);
  EXPECT_EQ(*parse_gpu_layers("all"), kGpuLayersAll);
  for (const char* bad : {"", "-1", "3x", "half"}) {
    auto r = parse_gpu_layers(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find(std::string("'") + bad + "'"), std::string::npos) << r.status().message();
  }
  EXPECT_EQ(*parse_backend_list("Vulkan, CPU,vulkan"), (std::vector<std::string>{"vulkan", "cpu"}));
  EXPECT_FALSE(parse_backend_list("cpu,,vulkan").ok());
  EXPECT_EQ(*parse_memory_size("4G"), 4ULL << 30);
  EXPECT_EQ(*parse_memory_size("512MiB"), 512ULL << 20);
  EXPECT_EQ(*parse_memory_size("1000"), 1000u);
  EXPECT_FALSE(parse_memory_size("4X").ok());
  EXPECT_FALSE(parse_memory_size("lots").ok());
}

TEST(Offload, LayerRule) {
  EXPECT_EQ(weight_layer("blk.7.attn_q.weight"), 7);
  EXPECT_EQ(weight_layer("blk.12.ffn_down.weight"), 12);
  EXPECT_EQ(weight_layer("token_embd.weight"), -1);
  EXPECT_EQ(weight_layer("blk.x.y"), -1);
  EXPECT_TRUE(offloaded(0, 1, 4));
  EXPECT_FALSE(offloaded(1, 1, 4));
  EXPECT_FALSE(offloaded(-1, 3, 4));  // embedding and head only with every block
  EXPECT_TRUE(offloaded(-1, 4, 4));
  EXPECT_FALSE(offloaded(-1, 0, 0));
}

TEST(Offload, AutoFitsBlocksInTheBudgetAndCountsNeedADevice) {
  models::HParams hp;
  hp.n_layer = 4;
  auto w = [&](const char* name, size_t n) { return backend::WeightSource{name, DType::F32, {1, 1, 1, 1}, nullptr, n}; };
  std::vector<backend::WeightSource> weights;
  std::vector<std::vector<uint8_t>> storage;
  for (const char* name : {"token_embd.weight", "blk.0.a", "blk.1.a", "blk.2.a", "blk.3.a"}) {
    storage.emplace_back(1);
    weights.push_back(w(name, std::string(name) == "token_embd.weight" ? 500 : 100));
    weights.back().data = storage.back().data();
  }
  test::FakeDevice dev;
  OffloadOptions o;
  o.gpu_layers = kGpuLayersAuto;
  // Each block: 100 bytes of weights + 10 of KV; 50 of activations first.
  o.gpu_mem_bytes = 50 + 2 * 110 + 5;
  EXPECT_EQ(*resolve_gpu_layers(o, &dev, hp, weights, 10, 50), 2);
  o.gpu_mem_bytes = 50 + 4 * 110;  // every block fits but not the embedding and head: the last stays off
  EXPECT_EQ(*resolve_gpu_layers(o, &dev, hp, weights, 10, 50), 3);
  o.gpu_mem_bytes = 50 + 4 * 110 + 500;
  EXPECT_EQ(*resolve_gpu_layers(o, &dev, hp, weights, 10, 50), 4);
  o.gpu_mem_bytes = 0;  // 3/4 of the device's free memory
  dev.free_bytes = (50 + 110) * 4 / 3 + 3;
  EXPECT_EQ(*resolve_gpu_layers(o, &dev, hp, weights, 10, 50), 1);
  o.gpu_layers = 9;  // more than the model has: all
  EXPECT_EQ(*resolve_gpu_layers(o, &dev, hp, weights, 10, 50), 4);
  // Without a device: 0 and auto are fine, a positive count or all is refused by name.
  o.gpu_layers = kGpuLayersDefault;
  EXPECT_EQ(*resolve_gpu_layers(o, nullptr, hp, weights, 10, 50), 0);
  o.gpu_layers = kGpuLayersAuto;
  EXPECT_EQ(*resolve_gpu_layers(o, nullptr, hp, weights, 10, 50), 0);
  o.gpu_layers = kGpuLayersAll;
  auto r = resolve_gpu_layers(o, nullptr, hp, weights, 10, 50);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("--gpu-layers all: no device backend is in use"), std::string::npos);
}

TEST(Offload, CpuOnlyPlacementLine) {
  const std::string path = test::write_tiny_model("tiny-qwen2", DType::F32, 7);
  EngineOptions o;
  o.n_ctx = 32;
  o.quiet = true;
  o.offload.backends = {"cpu"};
  auto e = Engine::load(path, o);
  ASSERT_TRUE(e.ok()) << e.status().message();
  EXPECT_EQ((*e)->n_gpu_layers(), 0);
  const std::string& line = (*e)->placement();
  EXPECT_EQ(line.rfind("placement: CPU: blocks 0-", 0), 0u) << line;
  EXPECT_NE(line.find("KV "), std::string::npos) << line;
  EXPECT_NE(line.find("on CPU; 1 split per step"), std::string::npos) << line;
}

}  // namespace
}  // namespace minfer::engine
