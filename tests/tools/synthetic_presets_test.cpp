// make-model presets: every listed name resolves, and the 7B-class shapes are the real models' (issue 18).
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

}  // namespace
}  // namespace minfer::tools
