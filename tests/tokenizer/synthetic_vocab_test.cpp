// The small byte-level vocabulary that `minfer make-model` writes into demo models loads and round-trips.
#include <gtest/gtest.h>

#include "tokenizer/tokenizer.h"
#include "tools/synthetic_model.h"

namespace minfer::tokenizer {
namespace {

TEST(SyntheticVocabTest, LoadsAndRoundTrips) {
  for (const char* preset : {"tiny-qwen2", "tiny-qwen3"}) {
    tools::SyntheticOptions options;
    auto shape = tools::synthetic_preset(preset);
    ASSERT_TRUE(shape.ok()) << shape.status().message();
    options.shape = *shape;
    auto writer = tools::make_synthetic_model(options);
    ASSERT_TRUE(writer.ok()) << writer.status().message();
    auto tok = Tokenizer::from_gguf(writer->metadata());
    ASSERT_TRUE(tok.ok()) << tok.status().message();

    const int32_t im_start = tok->find_token("<|im_start|>");
    const int32_t im_end = tok->find_token("<|im_end|>");
    ASSERT_GE(im_start, 256);
    EXPECT_EQ(tok->eos(), im_end);
    EXPECT_TRUE(tok->is_eog(im_end));
    EXPECT_TRUE(tok->is_eog(tok->find_token("<|endoftext|>")));
    const std::string prompt = "<|im_start|>user\nthe cat is in the garden<|im_end|>\n";
    const std::vector<int32_t> ids = tok->encode(prompt, /*add_special=*/false, true);
    ASSERT_GE(ids.size(), 3u);
    EXPECT_EQ(ids.front(), im_start);
    EXPECT_LT(ids.size(), prompt.size() - 20);  // the merges apply
    EXPECT_EQ(tok->decode(ids), prompt);
  }
}

}  // namespace
}  // namespace minfer::tokenizer
