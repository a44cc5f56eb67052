// `minfer info`'s hyperparameters: the mixture-of-experts settings of a qwen3moe file are shown (issue 24),
// and a dense file shows none of them.
#include <gtest/gtest.h>

#include "common/fixtures.h"
#include "gguf/reader.h"
#include "tools/model_info.h"
#include "tools/synthetic_model.h"

namespace minfer::tools {
namespace {

nlohmann::ordered_json hparams_of(const std::string& preset) {
  SyntheticOptions o;
  o.shape = *synthetic_preset(preset);
  auto writer = make_synthetic_model(o);
  EXPECT_TRUE(writer.ok()) << writer.status().message();
  const std::string path = test::temp_dir() + "/info-" + preset + ".gguf";
  EXPECT_TRUE(writer->write(path).ok());
  auto file = gguf::File::open(path);
  EXPECT_TRUE(file.ok()) << file.status().message();
  return info_json(*file)["hparams"];
}

TEST(ModelInfo, ShowsTheExpertSettingsOfAMoeModel) {
  const auto hp = hparams_of("tiny-qwen3moe");
  const SyntheticShape s = *synthetic_preset("tiny-qwen3moe");
  ASSERT_TRUE(hp.contains("expert_count")) << hp.dump();
  EXPECT_EQ(hp["expert_count"].get<uint32_t>(), s.n_expert);
  EXPECT_EQ(hp["expert_used_count"].get<uint32_t>(), s.n_expert_used);
  EXPECT_TRUE(hp.contains("expert_feed_forward_length"));
  EXPECT_NE(info_text(*gguf::File::open(test::temp_dir() + "/info-tiny-qwen3moe.gguf")).find("expert_used_count"),
            std::string::npos);
}

TEST(ModelInfo, ADenseModelHasNoExpertSettings) {
  const auto hp = hparams_of("tiny-qwen3");
  EXPECT_TRUE(hp.contains("block_count"));
  EXPECT_FALSE(hp.contains("expert_count"));
}

}  // namespace
}  // namespace minfer::tools
