// SentencePiece (`tokenizer.ggml.model = llama`) on a constructed vocabulary: score order and ties,
// byte fallback, the space prefix around special tokens, detokenization's leading-space rule, refusals.
// The real vocabularies against llama.cpp are in vocab_parity_test.cpp.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <fmt/format.h>

#include "tokenizer/tokenizer.h"

namespace minfer::tokenizer {
namespace {

using Ids = std::vector<int32_t>;
const std::string kSp = "\xe2\x96\x81";  // ▁

struct Spm {
  std::vector<std::string> tokens;
  std::vector<float> scores;
  std::vector<int32_t> types;
  int32_t add(const std::string& t, float score, TokenType type = TokenType::kNormal) {
    tokens.push_back(t);
    scores.push_back(score);
    types.push_back(static_cast<int32_t>(type));
    return static_cast<int32_t>(tokens.size()) - 1;
  }
  Spm() {
    add("<unk>", 0, TokenType::kUnknown);
    add("<s>", 0, TokenType::kControl);
    add("</s>", 0, TokenType::kControl);
    for (int b = 0; b < 256; ++b) add(fmt::format("<0x{:02X}>", b), 0, TokenType::kByte);
  }
  Result<Tokenizer> build(bool space_prefix = false, int drop = -1) {
    VocabSpec spec;
    spec.model = "llama";
    if (drop >= 0) tokens[static_cast<size_t>(drop)] = "<gone>";
    spec.tokens = tokens;
    spec.scores = scores;
    spec.token_types = types;
    spec.ids.bos = 1;
    spec.ids.eos = 2;
    spec.ids.unk = 0;
    spec.add_bos = true;
    spec.add_space_prefix = space_prefix;
    return Tokenizer::from_spec(spec);
  }
};

constexpr int32_t kByte0 = 3;  // <0x00>

TEST(SpmTest, HigherScoreMergesFirst) {
  for (const bool bc_first : {true, false}) {
    Spm v;
    const int32_t a = v.add("a", -10), b = v.add("b", -11), c = v.add("c", -12);
    const int32_t ab = v.add("ab", bc_first ? -2.0f : -1.0f), bc = v.add("bc", bc_first ? -1.0f : -2.0f);
    auto tok = v.build();
    ASSERT_TRUE(tok.ok()) << tok.status().message();
    EXPECT_EQ(tok->encode("abc", /*add_special=*/false, true), bc_first ? (Ids{a, bc}) : (Ids{ab, c}));
    (void)b;
  }
}

TEST(SpmTest, EqualScoresMergeLeftmostFirst) {
  Spm v;
  v.add("a", -10);
  v.add("b", -11);
  const int32_t c = v.add("c", -12);
  const int32_t ab = v.add("ab", -1);
  v.add("bc", -1);
  auto tok = v.build();
  ASSERT_TRUE(tok.ok());
  EXPECT_EQ(tok->encode("abc", /*add_special=*/false, true), (Ids{ab, c}));
}

TEST(SpmTest, MergesAnySplitOfAToken) {
  // "abcd" is reached through "ab" + "cd" although no rule names that pair: SentencePiece merges any
  // adjacent pair whose text is a token.
  Spm v;
  v.add("a", -10);
  v.add("b", -11);
  v.add("c", -12);
  v.add("d", -13);
  v.add("ab", -1);
  v.add("cd", -2);
  const int32_t abcd = v.add("abcd", -3);
  auto tok = v.build();
  ASSERT_TRUE(tok.ok());
  EXPECT_EQ(tok->encode("abcd", /*add_special=*/false, true), (Ids{abcd}));
}

TEST(SpmTest, UnknownCharactersFallBackToBytes) {
  Spm v;
  const int32_t a = v.add("a", -1);
  auto tok = v.build();
  ASSERT_TRUE(tok.ok());
  EXPECT_EQ(tok->encode("a\xc3\xa9", /*add_special=*/false, true), (Ids{a, kByte0 + 0xc3, kByte0 + 0xa9}));
  EXPECT_EQ(tok->decode(tok->encode("a\xc3\xa9", /*add_special=*/false, true)), "a\xc3\xa9");
  EXPECT_EQ(tok->token_bytes(kByte0 + 0x0a), "\n");
}

TEST(SpmTest, SpacePrefixStartsEachFragmentAfterASpecialToken) {
  Spm v;
  const int32_t sp = v.add(kSp, -5);
  const int32_t a = v.add("a", -6);
  const int32_t spa = v.add(kSp + "a", -1);
  auto tok = v.build(/*space_prefix=*/true);
  ASSERT_TRUE(tok.ok());
  EXPECT_TRUE(tok->add_space_prefix());
  EXPECT_EQ(tok->encode("a", /*add_special=*/false, true), (Ids{spa}));
  EXPECT_EQ(tok->encode("a a", /*add_special=*/false, true), (Ids{spa, spa}));
  EXPECT_EQ(tok->encode("a</s>a", /*add_special=*/false, true), (Ids{spa, 2, spa}));
  EXPECT_EQ(tok->encode("</s>a", /*add_special=*/false, true), (Ids{2, spa}));
  // Without special parsing `</s>` is text: one fragment, one prefix.
  const Ids plain = tok->encode("a</s>a", /*add_special=*/false, false);
  EXPECT_EQ(plain.front(), spa);
  EXPECT_EQ(plain.back(), a);
  EXPECT_EQ(tok->encode("  ", /*add_special=*/false, true), (Ids{sp, sp, sp}));
  // No prefix when the vocabulary says so.
  auto bare = v.build(/*space_prefix=*/false);
  ASSERT_TRUE(bare.ok());
  EXPECT_EQ(bare->encode("a", /*add_special=*/false, true), (Ids{a}));
}

TEST(SpmTest, DetokenizeDropsTheAddedSpaceOnce) {
  Spm v;
  v.add(kSp, -5);
  v.add("a", -6);
  const int32_t spa = v.add(kSp + "a", -1);
  auto tok = v.build(/*space_prefix=*/true);
  ASSERT_TRUE(tok.ok());
  EXPECT_EQ(tok->token_bytes(spa), " a");
  EXPECT_EQ(tok->decode(Ids{spa, spa}), " a a");     // the pieces, as streamed
  EXPECT_EQ(tok->detokenize(Ids{spa, spa}), "a a");  // llama_detokenize
  EXPECT_EQ(tok->detokenize(Ids{1, spa}), "<s> a");  // BOS kept: the space stays
  EXPECT_EQ(tok->detokenize(Ids{1, spa}, /*remove_special=*/true), " a");
  EXPECT_EQ(tok->detokenize(Ids{1, spa}, false, /*unparse_special=*/false), " a");
  EXPECT_EQ(tok->detokenize(Ids{spa, 2}, true), "a</s>");  // add_eos is off: </s> stays
  EXPECT_EQ(tok->detokenize(Ids{spa, 2}, false, false), "a");
}

TEST(SpmTest, RefusesAVocabularyWithoutAllByteTokens) {
  Spm v;
  v.add("a", -1);
  auto tok = v.build(false, /*drop=*/kByte0 + 0x41);
  ASSERT_FALSE(tok.ok());
  EXPECT_NE(tok.status().message().find("<0x41>"), std::string::npos) << tok.status().message();
}

TEST(SpmTest, RefusesShortScores) {
  Spm v;
  v.add("a", -1);
  v.scores.pop_back();
  auto tok = v.build();
  ASSERT_FALSE(tok.ok());
  EXPECT_NE(tok.status().message().find("tokenizer.ggml.scores"), std::string::npos)
      << tok.status().message();
}

TEST(SpmTest, LongWordStaysFast) {
  Spm v;
  v.add("a", -3);
  const int32_t aa = v.add("aa", -2);
  const int32_t aaaa = v.add("aaaa", -1);
  auto tok = v.build();
  ASSERT_TRUE(tok.ok());
  const Ids ids = tok->encode(std::string(200002, 'a'), /*add_special=*/false, true);
  ASSERT_EQ(ids.size(), 50001u);
  EXPECT_EQ(ids.front(), aaaa);
  EXPECT_EQ(ids.back(), aa);
}

}  // namespace
}  // namespace minfer::tokenizer
