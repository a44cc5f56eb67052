// Encoding and decoding on the tiny vocabulary: merge order, special tokens, invalid UTF-8, round trips.
#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <thread>

#include "core/rng.h"
#include "tiny_vocab.h"

namespace minfer::tokenizer {
namespace {

using Ids = std::vector<int32_t>;

Ids concat(std::initializer_list<Ids> parts) {
  Ids out;
  for (const Ids& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

TEST(TokenizerTest, AppliesMergesByRank) {
  const Tokenizer tok = tok_test::tiny_tokenizer();
  EXPECT_EQ(tok.encode("hello", /*add_special=*/false, false), (Ids{259}));
  // " world": " w"(rank 4) and "or"(5) merge, then " wor"(6); "l", "d" stay bytes.
  EXPECT_EQ(tok.encode("hello world", /*add_special=*/false, false), (Ids{259, 262, 'l', 'd'}));
  EXPECT_EQ(tok.encode("hell", /*add_special=*/false, false), (Ids{258}));
  EXPECT_EQ(tok.encode("help", /*add_special=*/false, false), (Ids{256, 'l', 'p'}));
}

TEST(TokenizerTest, EqualRanksMergeLeftmostFirst) {
  const Tokenizer tok = tok_test::tiny_tokenizer();
  EXPECT_EQ(tok.encode("aaa", /*add_special=*/false, false), (Ids{263, 'a'}));
  EXPECT_EQ(tok.encode("aaaa", /*add_special=*/false, false), (Ids{263, 263}));
  EXPECT_EQ(tok.encode("aaaaa", /*add_special=*/false, false), (Ids{263, 263, 'a'}));
}

TEST(TokenizerTest, MergesStayInsideWords) {
  const Tokenizer tok = tok_test::tiny_tokenizer();
  // "he" + "llo" are one word; "he" and "ll" in different words never merge.
  EXPECT_EQ(tok.encode("he ll", /*add_special=*/false, false), (Ids{256, ' ', 257}));
  EXPECT_EQ(tok.encode("a a", /*add_special=*/false, false), (Ids{'a', ' ', 'a'}));
}

TEST(TokenizerTest, ControlTokensOnlyWithParseSpecial) {
  const Tokenizer tok = tok_test::tiny_tokenizer();
  const std::string text = "<|im_start|>hello<|im_end|>";
  EXPECT_EQ(tok.encode(text, /*add_special=*/false, true), (Ids{tok_test::kImStart, 259, tok_test::kImEnd}));
  EXPECT_EQ(tok.encode(text, /*add_special=*/false, false), concat({tok_test::byte_ids("<|"),
                                             tok_test::byte_ids("im"),
                                             tok_test::byte_ids("_start"),
                                             tok_test::byte_ids("|>"),
                                             {259},
                                             tok_test::byte_ids("<|"),
                                             tok_test::byte_ids("im"),
                                             tok_test::byte_ids("_end"),
                                             tok_test::byte_ids("|>")}));
}

TEST(TokenizerTest, UserDefinedTokensAlwaysMatch) {
  const Tokenizer tok = tok_test::tiny_tokenizer();
  EXPECT_EQ(tok.encode("<think>hello", /*add_special=*/false, false), (Ids{tok_test::kThink, 259}));
  EXPECT_EQ(tok.encode("<think>hello", /*add_special=*/false, true), (Ids{tok_test::kThink, 259}));
  EXPECT_EQ(tok.encode("<think><think>", /*add_special=*/false, false), (Ids{tok_test::kThink, tok_test::kThink}));
}

TEST(TokenizerTest, UnusedTokensAreNotSpecial) {
  const Tokenizer tok = tok_test::tiny_tokenizer();
  const Ids ids = tok.encode("[PAD268]", /*add_special=*/false, true);
  EXPECT_GT(ids.size(), 1u);
  EXPECT_EQ(tok.decode(ids), "[PAD268]");
}

TEST(TokenizerTest, InvalidUtf8BecomesByteTokens) {
  const Tokenizer tok = tok_test::tiny_tokenizer();
  EXPECT_EQ(tok.encode("\xff\xfehello", /*add_special=*/false, false), (Ids{0xff, 0xfe, 259}));
  EXPECT_EQ(tok.encode("\xe4\xb8", /*add_special=*/false, false), (Ids{0xe4, 0xb8}));
  const std::string bad = "a\xc3(\xed\xa0\x80 \xf4\x90\x80\x80z\x80";
  EXPECT_EQ(tok.decode(tok.encode(bad, /*add_special=*/false, true)), bad);
}

TEST(TokenizerTest, EmptyText) {
  const Tokenizer tok = tok_test::tiny_tokenizer();
  EXPECT_TRUE(tok.encode("", /*add_special=*/false, true).empty());
  EXPECT_EQ(tok.decode(Ids{}), "");
}

TEST(TokenizerTest, DecodeSkipsIdsOutsideTheVocabulary) {
  const Tokenizer tok = tok_test::tiny_tokenizer();
  EXPECT_EQ(tok.decode(Ids{259, -1, 100000, tok_test::kImEnd}), "hello<|im_end|>");
}

TEST(TokenizerTest, RandomBytesRoundTrip) {
  const Tokenizer tok = tok_test::tiny_tokenizer();
  Rng rng(7);
  const std::string alphabet[] = {"a",
                                  "h",
                                  "e",
                                  "l",
                                  "o",
                                  " ",
                                  "  ",
                                  "\n",
                                  "\r\n",
                                  "\t",
                                  "'s",
                                  "1",
                                  "!",
                                  "<|im_start|>",
                                  "<think>",
                                  "<|im_end|>",
                                  "\xc3\xa9",
                                  "\xe4\xb8\xad",
                                  "\xf0\x9f\x98\x80",
                                  "\xff",
                                  "\x80",
                                  "\xe4"};
  for (int i = 0; i < 2000; ++i) {
    std::string s;
    const uint64_t n = rng.below(24);
    for (uint64_t j = 0; j < n; ++j) s += alphabet[rng.below(std::size(alphabet))];
    for (const bool special : {false, true}) ASSERT_EQ(tok.decode(tok.encode(s, /*add_special=*/false, special)), s) << s;
  }
}

// Textbook BPE on strings (lowest rank, leftmost), as an independent check of both merge loops
// (short words take a scan, long ones a heap).
std::vector<int32_t> naive_bpe(const Tokenizer& tok, std::string_view word) {
  std::map<std::pair<std::string, std::string>, size_t> ranks;
  for (size_t r = 0; r < tok_test::tiny_merges().size(); ++r) ranks[tok_test::tiny_merges()[r]] = r;
  std::vector<std::string> syms;
  for (const char c : word) syms.push_back(tok_test::byte_str(static_cast<uint8_t>(c)));
  for (;;) {
    size_t best = SIZE_MAX, best_rank = SIZE_MAX;
    for (size_t i = 0; i + 1 < syms.size(); ++i) {
      const auto it = ranks.find({syms[i], syms[i + 1]});
      if (it != ranks.end() && it->second < best_rank) best = i, best_rank = it->second;
    }
    if (best == SIZE_MAX) break;
    syms[best] += syms[best + 1];
    syms.erase(syms.begin() + static_cast<std::ptrdiff_t>(best) + 1);
  }
  std::vector<int32_t> ids;
  for (const std::string& s : syms) ids.push_back(tok.find_token(s));
  return ids;
}

TEST(TokenizerTest, MergeLoopsMatchTextbookBpe) {
  const Tokenizer tok = tok_test::tiny_tokenizer();
  Rng rng(99);
  const char letters[] = "aahheelllloowwr";
  for (int i = 0; i < 3000; ++i) {
    std::string word(1 + rng.below(i % 2 ? 100 : 40), 'a');
    for (char& c : word) c = letters[rng.below(sizeof(letters) - 1)];
    ASSERT_EQ(tok.encode(word, /*add_special=*/false, false), naive_bpe(tok, word)) << word;
    const std::string spaced = " w" + word;  // the " w" merge only happens at a word start
    std::vector<int32_t> want = naive_bpe(tok, spaced);
    ASSERT_EQ(tok.encode(spaced, /*add_special=*/false, false), want) << spaced;
  }
}

TEST(TokenizerTest, LongInputsStayLinear) {
  const Tokenizer tok = tok_test::tiny_tokenizer();
  // One 200k-byte word: a quadratic merge loop would take minutes.
  const std::string a(200000, 'a');
  const Ids ids = tok.encode(a, /*add_special=*/false, false);
  EXPECT_EQ(ids.size(), 100000u);
  EXPECT_EQ(tok.decode(ids), a);
}

TEST(TokenizerTest, ConcurrentEncodesAgree) {
  const Tokenizer tok = tok_test::tiny_tokenizer();
  const std::string text = "hello world <|im_start|>aaa hell help <think>\n";
  const Ids expected = tok.encode(text, /*add_special=*/false, true);
  std::vector<std::thread> threads;
  std::vector<int> ok(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      int good = 1;
      for (int i = 0; i < 500; ++i) good &= tok.encode(text, /*add_special=*/false, true) == expected;
      ok[t] = good;
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(ok, std::vector<int>(4, 1));
}

// llama.cpp's ignore_merges for llama3: a pre-token that is itself a token is that token even when no merge
// path builds it ("xyz", "123" here); without it (qwen2) such words fall back to their bytes. The llama3
// pre-tokenizer also adds BOS unless tokenizer.ggml.add_bos_token says otherwise. llama.cpp (../shared/peer
// `tokenize`, on tiny-llama's vocabulary with these four tokens added and pre = llama-bpe) gives the same
// ids: "xyz 12345" -> xyz, ' ', 123, '4', '5'; "Hello world" -> Hello, " world"; "a1234567b" -> a, 123, 4, 5,
// 6, 7, b (no 456 token, so its bytes).
TEST(TokenizerTest, Llama3IgnoresMergesForWholeTokens) {
  for (const char* pre : {"llama-bpe", "qwen2"}) {
    tok_test::TinyOptions o;
    o.pre = pre;
    gguf::Metadata m = tok_test::tiny_metadata(o);
    std::vector<std::string> tokens = *m.get_string_array("tokenizer.ggml.tokens");
    const auto xyz = static_cast<int32_t>(tokens.size());
    tokens.push_back("xyz");
    tokens.push_back("123");
    tokens.push_back("Hello");
    tokens.push_back(tok_test::byte_str(' ') + "world");
    m.set("tokenizer.ggml.tokens", gguf::Value::array(gguf::Array::of_strings(tokens)));
    m.erase("tokenizer.ggml.token_type");
    m.erase("tokenizer.ggml.add_bos_token");
    auto tok = Tokenizer::from_gguf(m);
    ASSERT_TRUE(tok.ok()) << tok.status().message();
    const std::vector<int32_t> ids = tok->encode("xyz 12345", /*add_special=*/false, false);
    if (std::string(pre) == "llama-bpe") {
      EXPECT_EQ(ids, (std::vector<int32_t>{xyz, ' ', xyz + 1, '4', '5'}));
      EXPECT_EQ(tok->encode("Hello world", /*add_special=*/false, false), (std::vector<int32_t>{xyz + 2, xyz + 3}));
      EXPECT_EQ(tok->encode("a1234567b", /*add_special=*/false, false), (std::vector<int32_t>{'a', xyz + 1, '4', '5', '6', '7', 'b'}));
      EXPECT_TRUE(tok->add_bos());
    } else {
      EXPECT_EQ(ids, tok_test::byte_ids("xyz 12345"));
      EXPECT_FALSE(tok->add_bos());
    }
  }
}

// The tokenizer owns special tokens (llama.cpp's llama_tokenize add_special, common/chat.cpp's BOS rule): BOS
// and EOS are added only where the vocabulary asks, and a rendered chat prompt that writes the BOS text
// itself is not given a second one.
TEST(TokenizerTest, AddSpecialAddsWhatTheVocabularyAsksAndEncodeChatNeverDoublesIt) {
  using tok_test::kEndOfText;
  using tok_test::kImEnd;
  using tok_test::kImStart;
  const Tokenizer none = tok_test::tiny_tokenizer();  // add_bos_token false, no add_eos_token (Qwen)
  EXPECT_EQ(none.encode("hello", /*add_special=*/true, /*parse_special=*/true), (Ids{259}));
  EXPECT_EQ(none.encode_chat("<|endoftext|>hello"), (Ids{kEndOfText, 259}));  // kept: nothing adds it again
  EXPECT_EQ(none.added_bos(), -1);
  EXPECT_EQ(none.bos_text(), "<|endoftext|>");
  EXPECT_EQ(none.eos_text(), "<|im_end|>");

  gguf::Metadata m = tok_test::tiny_metadata();
  m.set("tokenizer.ggml.add_bos_token", gguf::Value::boolean(true));
  m.set("tokenizer.ggml.add_eos_token", gguf::Value::boolean(true));
  auto both = Tokenizer::from_gguf(m);
  ASSERT_TRUE(both.ok()) << both.status().message();
  EXPECT_EQ(both->encode("hello", true, true), (Ids{kEndOfText, 259, kImEnd}));
  EXPECT_EQ(both->encode("hello", false, true), (Ids{259}));
  EXPECT_EQ(both->encode("", true, true), (Ids{kEndOfText, kImEnd}));  // tokenizers: encode('') gives them
  Ids out{7};
  both->encode("hello", true, false, out);  // appends
  EXPECT_EQ(out, (Ids{7, kEndOfText, 259, kImEnd}));
  EXPECT_EQ(both->added_bos(), kEndOfText);
  // A raw text that starts with the BOS text gets two, as llama.cpp's llama_tokenize gives (it only warns)...
  EXPECT_EQ(both->encode("<|endoftext|>hello", true, true), (Ids{kEndOfText, kEndOfText, 259, kImEnd}));
  // ...but a rendered chat prompt loses its leading BOS text and trailing EOS text, which add_special adds.
  EXPECT_EQ(both->encode_chat("<|endoftext|><|im_start|>hello<|im_end|>"),
            (Ids{kEndOfText, kImStart, 259, kImEnd}));
  EXPECT_EQ(both->encode_chat("<|im_start|>hello"), (Ids{kEndOfText, kImStart, 259, kImEnd}));
}

}  // namespace
}  // namespace minfer::tokenizer
