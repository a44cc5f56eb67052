// make-model presets: every listed name resolves, and the 7B-class shapes are the real models' (issue 18).
#include <cmath>

#include <gtest/gtest.h>

#include "tools/synthetic_model.h"

namespace minfer::tools {
namespace {

TEST(SyntheticPresets, EveryListedNameResolves) {
  for (const std::string& name : synthetic_preset_names()) EXPECT_TRUE(synthetic_preset(name).ok()) << name;
  EXPECT_FALSE(synthetic_preset("qwen2.5-9b").ok());
}

TEST(SyntheticPresets, Qwen25_7bIsUntiedWith28LayersAnd4KvHeads) {
  const SyntheticShape s = *synthetic_preset("qwen2.5-7b");
  EXPECT_EQ(s.arch, "qwen2");
  EXPECT_EQ(s.n_embd, 3584u);
  EXPECT_EQ(s.n_layer, 28u);
  EXPECT_EQ(s.n_head, 28u);
  EXPECT_EQ(s.n_head_kv, 4u);
  EXPECT_EQ(s.n_ff, 18944u);
  EXPECT_FALSE(s.tied_output);
  const SyntheticShape q3 = *synthetic_preset("qwen3-8b");
  EXPECT_EQ(q3.arch, "qwen3");
  EXPECT_EQ(q3.n_embd, 4096u);
  EXPECT_EQ(q3.n_layer, 36u);
  EXPECT_FALSE(q3.tied_output);
  EXPECT_TRUE(synthetic_preset("qwen2.5-3b")->tied_output);
}

TEST(SyntheticPresets, LlamaShapes) {
  const SyntheticShape l1 = *synthetic_preset("llama-3.2-1b");
  EXPECT_EQ(l1.arch, "llama");
  EXPECT_EQ(l1.n_embd, 2048u);
  EXPECT_EQ(l1.n_layer, 16u);
  EXPECT_EQ(l1.n_head, 32u);
  EXPECT_EQ(l1.n_head_kv, 8u);
  EXPECT_EQ(l1.head_dim, 64u);
  EXPECT_EQ(l1.n_ff, 8192u);
  EXPECT_EQ(l1.rope_freq_base, 500000.0f);
  EXPECT_EQ(l1.llama3_rope_factor, 32.0f);
  EXPECT_TRUE(l1.tied_output);
  const SyntheticShape l8 = *synthetic_preset("llama-3.1-8b");
  EXPECT_EQ(l8.n_embd, 4096u);
  EXPECT_EQ(l8.n_ff, 14336u);
  EXPECT_EQ(l8.llama3_rope_factor, 8.0f);
  EXPECT_FALSE(l8.tied_output);
  const SyntheticShape m7 = *synthetic_preset("mistral-7b");
  EXPECT_EQ(m7.rope_freq_base, 1e6f);
  EXPECT_EQ(m7.llama3_rope_factor, 0.0f);
}

// Gemma 3 1B and 4B text configs (config.json / text_config): sliding window 512 / 1024, rope_theta 1e6, the
// 4B's linear rope_scaling 8 on the global layers; written with the keys convert_hf_to_gguf.py writes.
TEST(SyntheticPresets, GemmaShapes) {
  const SyntheticShape g1 = *synthetic_preset("gemma-3-1b");
  EXPECT_EQ(g1.arch, "gemma3");
  EXPECT_EQ(g1.n_layer, 26u);
  EXPECT_EQ(g1.n_embd, 1152u);
  EXPECT_EQ(g1.n_ff, 6912u);
  EXPECT_EQ(g1.n_head, 4u);
  EXPECT_EQ(g1.n_head_kv, 1u);
  EXPECT_EQ(g1.head_dim, 256u);
  EXPECT_EQ(g1.n_swa, 512u);
  EXPECT_EQ(g1.rope_freq_base, 1e6f);
  EXPECT_EQ(g1.rope_scale_linear, 0.0f);
  EXPECT_TRUE(g1.tied_output);
  const SyntheticShape g4 = *synthetic_preset("gemma-3-4b");
  EXPECT_EQ(g4.n_layer, 34u);
  EXPECT_EQ(g4.n_embd, 2560u);
  EXPECT_EQ(g4.n_ff, 10240u);
  EXPECT_EQ(g4.n_head, 8u);
  EXPECT_EQ(g4.n_head_kv, 4u);
  EXPECT_EQ(g4.head_dim, 256u);
  EXPECT_EQ(g4.n_swa, 1024u);
  EXPECT_EQ(g4.rope_scale_linear, 8.0f);
  const SyntheticShape tiny = *synthetic_preset("tiny-gemma3");
  EXPECT_GE(tiny.n_layer, 7u);  // local and global layers
  SyntheticOptions o;
  o.shape = g4;
  o.shape.n_layer = 1;  // the keys, not the bytes
  o.shape.n_embd = 256;
  o.shape.n_ff = 32;
  auto w = make_synthetic_model(o);
  ASSERT_TRUE(w.ok()) << w.status().message();
  const std::string path = ::testing::TempDir() + "/gemma3-keys.gguf";
  ASSERT_TRUE(w->write(path).ok());
  auto f = gguf::File::open(path);
  ASSERT_TRUE(f.ok());
  const gguf::Metadata& m = f->metadata();
  EXPECT_EQ(*m.get_u32("gemma3.attention.sliding_window"), 1024u);
  EXPECT_EQ(*m.get_u32("gemma3.attention.key_length"), 256u);
  EXPECT_EQ(*m.get_string("gemma3.rope.scaling.type"), "linear");
  EXPECT_EQ(*m.get_f32("gemma3.rope.scaling.factor"), 8.0f);
  EXPECT_FALSE(m.contains("gemma3.final_logit_softcapping"));
  EXPECT_NE(f->find_tensor("blk.0.post_attention_norm.weight"), nullptr);
  EXPECT_NE(f->find_tensor("blk.0.post_ffw_norm.weight"), nullptr);
  EXPECT_EQ(f->find_tensor("output.weight"), nullptr);
}

// rope_freqs.weight as convert_hf_to_gguf.py writes it for rope_type llama3: 1 for wavelengths under
// 8192/4, `factor` over 8192, the smooth interpolation between.
TEST(SyntheticPresets, Llama3RopeFreqs) {
  SyntheticOptions o;
  o.shape = *synthetic_preset("llama-3.2-1b");
  o.shape.n_layer = 1;
  o.shape.n_embd = 64;
  o.shape.n_head = 1;
  o.shape.n_head_kv = 1;
  o.shape.n_ff = 32;
  auto w = make_synthetic_model(o);
  ASSERT_TRUE(w.ok()) << w.status().message();
  const std::string path = ::testing::TempDir() + "/llama3-freqs.gguf";
  ASSERT_TRUE(w->write(path).ok());
  auto f = gguf::File::open(path);
  ASSERT_TRUE(f.ok());
  const gguf::TensorInfo* t = f->find_tensor("rope_freqs.weight");
  ASSERT_NE(t, nullptr);
  ASSERT_EQ(t->ne[0], 32);
  const auto* v = reinterpret_cast<const float*>(t->data);
  for (int i = 0; i < 32; ++i) {
    const double freq = std::pow(500000.0, -2.0 * i / 64.0);
    const double wavelen = 2 * M_PI / freq;
    const double smooth = (8192.0 / wavelen - 1.0) / 3.0;
    const double want = wavelen < 2048 ? 1.0 : wavelen > 8192 ? 32.0 : 1.0 / ((1 - smooth) / 32.0 + smooth);
    EXPECT_NEAR(v[i], want, 1e-4 * want) << i;
  }
  EXPECT_EQ(v[0], 1.0f);
  EXPECT_EQ(v[31], 32.0f);
}

}  // namespace
}  // namespace minfer::tools
