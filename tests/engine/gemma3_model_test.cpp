// The gemma3 architecture on tiny generated models: the hyperparameters as llama.cpp reads them (the
// sliding-window layer pattern, local and global RoPE bases and scaling, the attention scale, soft-capping),
// batch invariance with sliding-window layers (one batch, chunks that cut through windows, token by token:
// bitwise equal), that the window changes results, the per-layer KV shift, and the loud refusals. Parity with
// llama.cpp itself is tests/parity/gemma3_parity_test.cpp.
#include <cmath>
#include <cstring>

#include <gtest/gtest.h>

#include "engine/engine.h"
#include "gguf/writer.h"
#include "tiny_model.h"

namespace minfer::engine {
namespace {

// tiny-gemma3 rewritten with extra (or replaced) metadata.
std::string rewrite(const std::string& name, const std::vector<std::pair<std::string, gguf::Value>>& extra) {
  auto file = gguf::File::open(test::write_tiny_model("tiny-gemma3"));
  EXPECT_TRUE(file.ok());
  gguf::Writer w;
  w.metadata() = file->metadata();
  for (const auto& [k, v] : extra) w.metadata().set(k, v);
  for (const auto& t : file->tensors()) {
    std::vector<int64_t> ne(t.ne.begin(), t.ne.begin() + t.n_dims);
    EXPECT_TRUE(w.add_tensor(t.name, t.type, ne, std::span<const uint8_t>(t.data, t.n_bytes)).ok());
  }
  const std::string out = test::temp_dir() + "/gemma3-" + name + ".gguf";
  EXPECT_TRUE(w.write(out).ok());
  return out;
}

Result<std::unique_ptr<Engine>> load(const std::string& path, int32_t n_batch = 512, int32_t threads = 2,
                                     DType cache = DType::F32) {
  EngineOptions o;
  o.n_ctx = 256;
  o.cache_type = cache;
  o.n_batch = n_batch;
  o.n_threads = threads;
  return Engine::load(path, o);
}

std::vector<int32_t> tokens() { return test::prompt_of(45, 4); }  // longer than the window (8) many times

std::vector<float> prefill(Engine& e, const std::vector<int32_t>& toks, int32_t first_pos = 0) {
  Batch b;
  for (size_t i = 0; i < toks.size(); ++i) b.add(toks[i], first_pos + static_cast<int32_t>(i), 0, true);
  auto r = e.decode(b);
  EXPECT_TRUE(r.ok()) << r.status().message();
  return r.ok() ? *r : std::vector<float>();
}

double max_diff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double d = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) d = std::max(d, std::abs(static_cast<double>(a[i]) - b[i]));
  return d;
}

TEST(Gemma3Model, ReadsHyperparametersAsLlamaCpp) {
  auto e = load(test::write_tiny_model("tiny-gemma3"));
  ASSERT_TRUE(e.ok()) << e.status().message();
  const models::HParams& hp = (*e)->hparams();
  EXPECT_EQ(hp.n_swa, 8);
  ASSERT_EQ(hp.swa_layers.size(), 7u);
  for (size_t l = 0; l < 7; ++l) EXPECT_EQ(hp.swa_layers[l], l != 5) << "layer " << l;  // every 6th global
  EXPECT_EQ(hp.rope_freq_base, 1e6f);
  EXPECT_EQ(hp.rope_freq_scale, 0.125f);      // global layers: linear factor 8
  EXPECT_EQ(hp.rope_freq_base_swa, 10000.0f);  // llama.cpp's default for the local layers
  EXPECT_EQ(hp.rope_freq_scale_swa, 1.0f);
  EXPECT_EQ(hp.head_dim, 64);
  auto pattern = load(rewrite("pattern", {{"gemma3.attention.sliding_window_pattern", gguf::Value::u32(2)},
                                          {"gemma3.rope.freq_base_swa", gguf::Value::f32(5000.0f)}}));
  ASSERT_TRUE(pattern.ok()) << pattern.status().message();
  for (size_t l = 0; l < 7; ++l) EXPECT_EQ((*pattern)->hparams().swa_layers[l], l % 2 == 0) << "layer " << l;
  EXPECT_EQ((*pattern)->hparams().rope_freq_base_swa, 5000.0f);
  auto global = load(rewrite("no-window", {{"gemma3.attention.sliding_window", gguf::Value::u32(0)}}));
  ASSERT_TRUE(global.ok()) << global.status().message();
  EXPECT_TRUE((*global)->hparams().swa_layers.empty());
}

TEST(Gemma3Model, PrefillChunksAndTokenByTokenAreBitwiseEqual) {
  const std::string path = test::write_tiny_model("tiny-gemma3");
  for (DType cache : {DType::F32, DType::F16, DType::Q8_0}) {
    SCOPED_TRACE(dtype_name(cache));
    auto whole = load(path, 512, 2, cache);
    ASSERT_TRUE(whole.ok());
    const std::vector<float> ref = prefill(**whole, tokens());
    for (int32_t n_batch : {3, 17}) {  // chunks that start inside a window and across the 16-cell alignment
      auto chunked = load(path, n_batch, 2, cache);
      ASSERT_TRUE(chunked.ok());
      EXPECT_EQ(prefill(**chunked, tokens()), ref) << "n_batch " << n_batch;
    }
    auto single = load(path, 512, 1, cache);
    ASSERT_TRUE(single.ok());
    std::vector<float> stepwise;
    const auto toks = tokens();
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

// The window changes what the local layers see once the prompt is longer than it: the same model with a
// window of 4096 (no cut) agrees on the first 8 positions and differs after them.
TEST(Gemma3Model, TheWindowCutsTheLocalLayers) {
  auto windowed = load(test::write_tiny_model("tiny-gemma3"));
  auto wide = load(rewrite("wide", {{"gemma3.attention.sliding_window", gguf::Value::u32(4096)}}));
  ASSERT_TRUE(windowed.ok() && wide.ok());
  const auto a = prefill(**windowed, tokens()), b = prefill(**wide, tokens());
  const auto nv = static_cast<size_t>((*windowed)->n_vocab());
  const std::vector<float> a_head(a.begin(), a.begin() + 8 * nv), b_head(b.begin(), b.begin() + 8 * nv);
  EXPECT_EQ(a_head, b_head);
  const std::vector<float> a_tail(a.end() - nv, a.end()), b_tail(b.end() - nv, b.end());
  EXPECT_GT(max_diff(a_tail, b_tail), 0.01);
}

// A KV shift (the --cnv context shift) re-rotates each layer's keys with its own base: shifting a sequence
// stored at positions 10.. down to 0.. gives the keys of a prefill at 0.., so the next token's logits match
// (to f32 re-rotation rounding).
TEST(Gemma3Model, KvShiftRotatesLocalAndGlobalLayersWithTheirBases) {
  const std::string path = test::write_tiny_model("tiny-gemma3");
  const auto toks = tokens();
  const std::vector<int32_t> head(toks.begin(), toks.end() - 1);
  auto direct = load(path);
  ASSERT_TRUE(direct.ok());
  prefill(**direct, head);
  const std::vector<float> want = prefill(**direct, {toks.back()}, static_cast<int32_t>(head.size()));
  auto shifted = load(path);
  ASSERT_TRUE(shifted.ok());
  prefill(**shifted, head, 10);
  const Status st = (*shifted)->seq_add(0, 0, -1, -10);
  ASSERT_TRUE(st.ok()) << st.message();
  const std::vector<float> got = prefill(**shifted, {toks.back()}, static_cast<int32_t>(head.size()));
  EXPECT_LT(max_diff(got, want), 2e-3);
  // Positions moved without re-rotating the keys: the logits are wrong, so the test can fail.
  auto wrong = load(path);
  ASSERT_TRUE(wrong.ok());
  prefill(**wrong, head, 10);
  auto cells = (*wrong)->kv().shift_cells(0, 0, -1, -10);
  ASSERT_TRUE(cells.ok());
  (*wrong)->kv().add_positions(*cells, -10);
  EXPECT_GT(max_diff(prefill(**wrong, {toks.back()}, static_cast<int32_t>(head.size())), want), 0.01);
}

TEST(Gemma3Model, RefusesWhatItDoesNotRun) {
  // llama.cpp ignores an array here and uses its default period; refused rather than guessed.
  auto array = load(rewrite("pattern-array", {{"gemma3.attention.sliding_window_pattern",
                                               gguf::Value::array(gguf::Array::of(gguf::ValueType::I32,
                                                                                  std::vector<int32_t>(7, 1)))}}));
  ASSERT_FALSE(array.ok());
  EXPECT_NE(array.status().message().find("gemma3.attention.sliding_window_pattern"), std::string::npos)
      << array.status().message();
  auto swa_dims = load(rewrite("key-length-swa", {{"gemma3.attention.key_length_swa", gguf::Value::u32(16)}}));
  ASSERT_FALSE(swa_dims.ok());
  EXPECT_EQ(swa_dims.status().message(), "model: gemma3 key 'gemma3.attention.key_length_swa' is not supported");
  auto yarn = load(rewrite("yarn", {{"gemma3.rope.scaling.type", gguf::Value::string("yarn")}}));
  ASSERT_FALSE(yarn.ok());
  EXPECT_EQ(yarn.status().message(),
            "model: rope scaling 'yarn' is not supported (supported: none, linear, llama3 rope_freqs)");
  auto cap = load(rewrite("bad-cap", {{"gemma3.final_logit_softcapping", gguf::Value::f32(-1.0f)}}));
  ASSERT_FALSE(cap.ok());
  EXPECT_EQ(cap.status().message(), "model: gemma3.final_logit_softcapping = -1 is invalid");
}

}  // namespace
}  // namespace minfer::engine
