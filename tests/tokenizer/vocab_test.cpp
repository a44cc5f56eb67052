// Loading rules: refusals name the offending key or value; special ids, types and the EOG set.
#include <gtest/gtest.h>

#include "tiny_vocab.h"

namespace minfer::tokenizer {
namespace {

using tok_test::TinyOptions;

Status load_status(const TinyOptions& o) {
  return Tokenizer::from_gguf(tok_test::tiny_metadata(o)).status();
}

TEST(VocabTest, RefusesUnknownModel) {
  TinyOptions o;
  o.model = "t5";
  const Status s = load_status(o);
  EXPECT_EQ(s.code(), StatusCode::kUnsupported);
  EXPECT_NE(s.message().find("'t5'"), std::string::npos) << s.message();
}

TEST(VocabTest, RefusesMissingPreTokenizer) {
  TinyOptions o;
  o.with_pre = false;
  const Status s = load_status(o);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("tokenizer.ggml.pre"), std::string::npos) << s.message();
}

TEST(VocabTest, RefusesUnknownPreTokenizer) {
  TinyOptions o;
  o.pre = "gpt-4o";
  const Status s = load_status(o);
  EXPECT_EQ(s.code(), StatusCode::kUnsupported);
  EXPECT_NE(s.message().find("'gpt-4o'"), std::string::npos) << s.message();
}

TEST(VocabTest, AcceptsPreTokenizerAliases) {
  for (const char* name : {"qwen2", "deepseek-r1-qwen", "qwen35"}) {
    TinyOptions o;
    o.pre = name;
    EXPECT_TRUE(load_status(o).ok()) << name;
  }
  TinyOptions o;
  o.pre = "qwen35";
  EXPECT_EQ(tok_test::tiny_tokenizer(o).pre_tokenizer(), PreTokenizer::kQwen35);
}

TEST(VocabTest, RefusesEmptyMerges) {
  TinyOptions o;
  o.with_merges = false;
  const Status s = load_status(o);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("tokenizer.ggml.merges"), std::string::npos) << s.message();
}

TEST(VocabTest, RefusesMissingByteToken) {
  TinyOptions o;
  o.drop_byte = 'x';
  const Status s = load_status(o);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("0x78"), std::string::npos) << s.message();
}

TEST(VocabTest, RefusesDuplicateTokens) {
  TinyOptions o;
  o.duplicate = true;
  const Status s = load_status(o);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("duplicate token 'hello'"), std::string::npos) << s.message();
}

TEST(VocabTest, RefusesMissingTokens) {
  gguf::Metadata meta = tok_test::tiny_metadata();
  meta.erase("tokenizer.ggml.tokens");
  const Status s = Tokenizer::from_gguf(meta).status();
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_NE(s.message().find("tokenizer.ggml.tokens"), std::string::npos) << s.message();
}

TEST(VocabTest, SpecialIdsTypesAndEog) {
  const Tokenizer tok = tok_test::tiny_tokenizer();
  EXPECT_EQ(tok.n_vocab(), 269);
  EXPECT_EQ(tok.bos(), tok_test::kEndOfText);
  EXPECT_EQ(tok.eos(), tok_test::kImEnd);
  EXPECT_EQ(tok.eot(), tok_test::kImEnd);  // detected by name: <|im_end|> is listed before <|endoftext|>
  EXPECT_FALSE(tok.add_bos());
  EXPECT_TRUE(tok.is_eog(tok_test::kImEnd));
  EXPECT_TRUE(tok.is_eog(tok_test::kEndOfText));  // named like an end marker
  EXPECT_FALSE(tok.is_eog(tok_test::kImStart));
  EXPECT_FALSE(tok.is_eog(-1));
  EXPECT_FALSE(tok.is_eog(100000));
  EXPECT_TRUE(tok.is_control(tok_test::kImStart));
  EXPECT_FALSE(tok.is_control(tok_test::kThink));
  EXPECT_FALSE(tok.is_control('a'));
  EXPECT_EQ(tok.token_type(tok_test::kThink), TokenType::kUserDefined);
  EXPECT_EQ(tok.find_token("<think>"), tok_test::kThink);
  EXPECT_EQ(tok.find_token("nope"), -1);
}

TEST(VocabTest, TokenBytes) {
  const Tokenizer tok = tok_test::tiny_tokenizer();
  EXPECT_EQ(tok.token_bytes(' '), " ");
  EXPECT_EQ(tok.token_text(' '), "\xc4\xa0");  // U+0120
  EXPECT_EQ(tok.token_bytes('\n'), "\n");
  EXPECT_EQ(tok.token_bytes(0xff), "\xff");
  EXPECT_EQ(tok.token_bytes(262), " wor");
  EXPECT_EQ(tok.token_bytes(tok_test::kImStart), "<|im_start|>");
  EXPECT_EQ(tok.token_bytes(tok_test::kPad), "");  // unused tokens render as nothing, as in llama.cpp
}

TEST(VocabTest, TokenizerIsCopyableAndMovable) {
  Tokenizer a = tok_test::tiny_tokenizer();
  Tokenizer b = a;
  Tokenizer c = std::move(a);
  EXPECT_EQ(b.encode("hello", /*add_special=*/false, false), c.encode("hello", /*add_special=*/false, false));
}

}  // namespace
}  // namespace minfer::tokenizer
