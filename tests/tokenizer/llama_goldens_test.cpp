// Goldens recorded from llama.cpp through the peer (data/README.md): the qwen35 pre-tokenizer (combining
// marks join letters; the fixtures' Qwen3 vocabulary with tokenizer.ggml.pre switched to "qwen35" in
// memory) and character-class probes across the Unicode range.
#include <gtest/gtest.h>

#include "common/fixtures.h"
#include "gguf/reader.h"
#include "inp_out.h"
#include "tokenizer/tokenizer.h"

namespace minfer::tokenizer {
namespace {

TEST(Qwen35Parity, MatchesLlamaCppOnMarkHeavyText) {
  MINFER_REQUIRE_FIXTURES();
  auto file = gguf::File::open(minfer::test::fixture_path("tokenizer/qwen3-vocab.gguf"));
  ASSERT_TRUE(file.ok()) << file.status().message();
  gguf::Metadata meta = file->metadata();
  meta.set("tokenizer.ggml.pre", gguf::Value::string("qwen35"));
  auto tok = Tokenizer::from_gguf(meta);
  ASSERT_TRUE(tok.ok()) << tok.status().message();
  ASSERT_EQ(tok->pre_tokenizer(), PreTokenizer::kQwen35);

  const std::string dir = MINFER_TOKENIZER_TEST_DATA;
  const std::vector<std::string> texts = tok_test::read_inp(dir + "/qwen35_marks.inp");
  ASSERT_EQ(texts.size(), 60u);
  for (const auto& [out, special] :
       {std::pair{"/qwen35_marks.out", true}, std::pair{"/qwen35_marks.no-parse-special.out", false}}) {
    const auto expected = tok_test::read_out(dir + out);
    ASSERT_EQ(expected.size(), texts.size());
    for (size_t i = 0; i < texts.size(); ++i) {
      const std::vector<int32_t> got = tok->encode(texts[i], /*add_special=*/false, special);
      EXPECT_EQ(got, expected[i]) << out << " string " << i << " '" << texts[i] << "'\n  want"
                                  << tok_test::show(expected[i]) << "\n  got " << tok_test::show(got);
      EXPECT_EQ(tok->decode(got), texts[i]);
    }
  }
}

// The same strings under qwen2 rules must differ somewhere, or the test above would not be testing marks.
TEST(Qwen35Parity, Qwen2RulesSplitMarksDifferently) {
  MINFER_REQUIRE_FIXTURES();
  auto file = gguf::File::open(minfer::test::fixture_path("tokenizer/qwen3-vocab.gguf"));
  ASSERT_TRUE(file.ok());
  auto tok = Tokenizer::from_gguf(file->metadata());
  ASSERT_TRUE(tok.ok());
  const std::string dir = MINFER_TOKENIZER_TEST_DATA;
  const std::vector<std::string> texts = tok_test::read_inp(dir + "/qwen35_marks.inp");
  const auto expected = tok_test::read_out(dir + "/qwen35_marks.out");
  size_t differ = 0;
  for (size_t i = 0; i < texts.size() && i < expected.size(); ++i)
    differ += tok->encode(texts[i], /*add_special=*/false, true) != expected[i];
  EXPECT_GT(differ, 10u);
}

// Character classes as llama.cpp's Unicode 15.1 tables have them: 2,034 code points (the White_Space set,
// CJK Extension I, marks, numbers, unassigned and private-use samples, every 557th code point) each in
// "c's xc c1 acb", where letter / number / mark / space / other each split differently.
TEST(UnicodeProbeParity, CharacterClassesMatchLlamaCpp) {
  MINFER_REQUIRE_FIXTURES();
  auto file = gguf::File::open(minfer::test::fixture_path("tokenizer/qwen2-vocab.gguf"));
  ASSERT_TRUE(file.ok()) << file.status().message();
  auto tok = Tokenizer::from_gguf(file->metadata());
  ASSERT_TRUE(tok.ok()) << tok.status().message();
  const std::string dir = MINFER_TOKENIZER_TEST_DATA;
  const std::vector<std::string> texts = tok_test::read_inp(dir + "/unicode_probe.inp");
  const auto expected = tok_test::read_out(dir + "/unicode_probe.no-parse-special.out");
  ASSERT_EQ(texts.size(), 2034u);
  ASSERT_EQ(expected.size(), texts.size());
  size_t agree = 0;
  for (size_t i = 0; i < texts.size(); ++i) {
    const std::vector<int32_t> got = tok->encode(texts[i], /*add_special=*/false, false);
    if (got == expected[i]) {
      ++agree;
    } else {
      ADD_FAILURE() << "probe " << i << " '" << texts[i] << "'\n  want" << tok_test::show(expected[i])
                    << "\n  got " << tok_test::show(got);
    }
  }
  EXPECT_EQ(agree, texts.size());
}

}  // namespace
}  // namespace minfer::tokenizer
