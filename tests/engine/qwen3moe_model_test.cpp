// The qwen3moe architecture on tiny generated models (8 experts, 2 per token): hyperparameters as llama.cpp
// reads them, one-batch prefill vs chunked vs token-by-token bitwise equal for f32 and quantized experts,
// and the loud refusals. Parity with llama.cpp itself is tests/parity/qwen3moe_parity_test.cpp.
#include <algorithm>

#include <gtest/gtest.h>

#include "engine/engine.h"
#include "gguf/writer.h"
#include "tiny_model.h"

namespace minfer::engine {
namespace {

std::string write_moe(const std::string& quant_type, uint64_t seed = 7) {
  tools::SyntheticOptions o;
  o.shape = *tools::synthetic_preset("tiny-qwen3moe");
  o.quant_type = quant_type;
  o.seed = seed;
  auto writer = tools::make_synthetic_model(o);
  EXPECT_TRUE(writer.ok()) << writer.status().message();
  const std::string path = test::temp_dir() + "/tiny-qwen3moe-" + (quant_type.empty() ? "f32" : quant_type) + ".gguf";
  EXPECT_TRUE(writer->write(path).ok());
  return path;
}

// The f32 model rewritten with extra or replaced metadata keys (and without the ones in `drop`).
std::string rewrite(const std::string& name, const std::vector<std::pair<std::string, gguf::Value>>& extra,
                    const std::vector<std::string>& drop = {}) {
  auto file = gguf::File::open(write_moe(""));
  EXPECT_TRUE(file.ok());
  gguf::Writer w;
  for (const auto& [k, v] : file->metadata().entries()) {
    if (std::find(drop.begin(), drop.end(), k) == drop.end()) w.metadata().set(k, v);
  }
  for (const auto& [k, v] : extra) w.metadata().set(k, v);
  for (const auto& t : file->tensors()) {
    std::vector<int64_t> ne(t.ne.begin(), t.ne.begin() + t.n_dims);
    EXPECT_TRUE(w.add_tensor(t.name, t.type, ne, std::span<const uint8_t>(t.data, t.n_bytes)).ok());
  }
  const std::string out = test::temp_dir() + "/qwen3moe-" + name + ".gguf";
  EXPECT_TRUE(w.write(out).ok());
  return out;
}

Result<std::unique_ptr<Engine>> load(const std::string& path, int32_t n_batch = 512, int32_t threads = 2) {
  EngineOptions o;
  o.n_ctx = 256;
  o.cache_type = DType::F32;
  o.n_batch = n_batch;
  o.n_threads = threads;
  return Engine::load(path, o);
}

std::vector<float> prefill(Engine& e, const std::vector<int32_t>& toks) {
  Batch b;
  for (size_t i = 0; i < toks.size(); ++i) b.add(toks[i], static_cast<int32_t>(i), 0, true);
  auto r = e.decode(b);
  EXPECT_TRUE(r.ok()) << r.status().message();
  return r.ok() ? *r : std::vector<float>();
}

TEST(Qwen3MoeModel, ReadsTheExpertHyperparameters) {
  auto e = load(write_moe(""));
  ASSERT_TRUE(e.ok()) << e.status().message();
  const models::HParams& hp = (*e)->hparams();
  EXPECT_EQ(hp.arch, "qwen3moe");
  EXPECT_EQ(hp.n_expert, 8);
  EXPECT_EQ(hp.n_expert_used, 2);
  EXPECT_EQ(hp.n_ff_exp, 256);
  EXPECT_TRUE(hp.expert_weights_norm);
  EXPECT_EQ(hp.head_dim, 64);
  // Without expert_feed_forward_length (and without the dense width, which llama.cpp reads as optional)
  // the width is feed_forward_length / expert_used_count.
  auto derived = load(rewrite("no-exp-ff", {{"qwen3moe.feed_forward_length", gguf::Value::u32(512)}},
                              {"qwen3moe.expert_feed_forward_length"}));
  ASSERT_TRUE(derived.ok()) << derived.status().message();
  EXPECT_EQ((*derived)->hparams().n_ff_exp, 256);
  auto no_dense = load(rewrite("no-ff", {}, {"qwen3moe.feed_forward_length"}));
  ASSERT_TRUE(no_dense.ok()) << no_dense.status().message();
}

// Every token's logits do not depend on how the batch groups the tokens by expert: one batch, chunks of 5
// and one token at a time (1 thread) are bitwise equal, for f32 experts and for quantized ones (q4_0:
// repacked Q4_0; q4_K_M: repacked Q4_K gate/up, Q6_K/Q4_K down by layer).
TEST(Qwen3MoeModel, PrefillChunksAndTokenByTokenAreBitwiseEqual) {
  const std::vector<int32_t> toks = test::prompt_of(24, 5);
  for (const std::string type : {"", "q4_0", "q4_K_M"}) {
    SCOPED_TRACE(type.empty() ? "f32" : type);
    const std::string path = write_moe(type);
    auto whole = load(path);
    ASSERT_TRUE(whole.ok()) << whole.status().message();
    const std::vector<float> ref = prefill(**whole, toks);
    auto chunked = load(path, /*n_batch=*/5);
    ASSERT_TRUE(chunked.ok());
    EXPECT_EQ(prefill(**chunked, toks), ref);
    auto single = load(path, 512, /*threads=*/1);
    ASSERT_TRUE(single.ok());
    std::vector<float> stepwise;
    for (size_t i = 0; i < toks.size(); ++i) {
      Batch b;
      b.add(toks[i], static_cast<int32_t>(i), 0, true);
      auto r = (*single)->decode(b);
      ASSERT_TRUE(r.ok()) << r.status().message();
      stepwise.insert(stepwise.end(), r->begin(), r->end());
    }
    EXPECT_EQ(stepwise, ref);
  }
}

TEST(Qwen3MoeModel, RefusesWhatItDoesNotRun) {
  auto no_experts = load(rewrite("no-count", {}, {"qwen3moe.expert_count"}));
  ASSERT_FALSE(no_experts.ok());
  EXPECT_EQ(no_experts.status().message(), "model: missing key 'qwen3moe.expert_count'");
  auto too_many = load(rewrite("used", {{"qwen3moe.expert_used_count", gguf::Value::u32(9)}}));
  ASSERT_FALSE(too_many.ok());
  EXPECT_EQ(too_many.status().message(), "model: qwen3moe.expert_used_count = 9 for 8 experts");
  auto shared = load(rewrite("shared", {{"qwen3moe.expert_shared_count", gguf::Value::u32(1)}}));
  ASSERT_FALSE(shared.ok());
  EXPECT_EQ(shared.status().message(), "model: qwen3moe with 1 shared experts is not supported");
  auto sigmoid = load(rewrite("gating", {{"qwen3moe.expert_gating_func", gguf::Value::u32(2)}}));
  ASSERT_FALSE(sigmoid.ok());
  EXPECT_EQ(sigmoid.status().message(), "model: qwen3moe expert_gating_func 2 (only 1, softmax)");
  auto wrong_count = load(rewrite("count16", {{"qwen3moe.expert_count", gguf::Value::u32(16)}}));
  ASSERT_FALSE(wrong_count.ok());
  EXPECT_EQ(wrong_count.status().message(),
            "model: tensor 'blk.0.ffn_gate_inp.weight' has shape [256, 8, 1, 1], expected [256, 16, 1, 1]");
}

}  // namespace
}  // namespace minfer::engine
