// Token ids against llama.cpp's, recorded in ../shared/fixtures: its own qwen2 test vectors and the
// 314-string corpus (special parsing on and off) for the Qwen2.5 and Qwen3 vocabularies, the synthetic
// models' prompts, plus decode(encode(x)) == x and llama.cpp's special ids and end-of-generation set.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/fixtures.h"
#include "core/rng.h"
#include "gguf/reader.h"
#include "inp_out.h"
#include "tokenizer/tokenizer.h"

namespace minfer::tokenizer {
namespace {

using Ids = std::vector<int32_t>;

using tok_test::read_inp;
using tok_test::read_out;
using tok_test::show;

Tokenizer load(const std::string& gguf_path) {
  auto file = gguf::File::open(gguf_path);
  EXPECT_TRUE(file.ok()) << file.status().message();
  auto tok = Tokenizer::from_gguf(file->metadata());
  EXPECT_TRUE(tok.ok()) << tok.status().message();
  return std::move(tok).value();
}

struct Case {
  std::string vocab;  // empty for the placeholder
  std::string inp;
  std::string out;
  bool parse_special = false;
};
// Readable case names in gtest and ctest listings (instead of the struct's bytes).
void PrintTo(const Case& c, std::ostream* os) {
  *os << c.vocab << ":" << c.out;
}

// Listed when the binary runs, from what the fixtures hold: llama.cpp's own test vectors
// (ggml-vocab-*.gguf.inp/.out) against every vocabulary, and the corpus ids per vocabulary
// (corpus.<v>.out with special parsing, corpus.<v>.no-parse-special.out without) against <v>-vocab.gguf.
std::vector<Case> cases() {
  std::vector<Case> out;
  const std::vector<std::string> vocabs = test::fixture_entries("tokenizer", "-vocab.gguf");
  for (const std::string& ref : test::fixture_entries("tokenizer", ".out")) {
    const std::string stem = ref.substr(0, ref.size() - 4);
    if (ref.rfind("ggml-vocab-", 0) == 0) {
      for (const std::string& v : vocabs) out.push_back({v, stem + ".inp", ref, false});
    } else if (ref.rfind("corpus.", 0) == 0) {
      const std::string rest = stem.substr(7);  // "qwen2" or "qwen2.no-parse-special"
      const size_t dot = rest.find('.');
      const std::string v = rest.substr(0, dot);
      out.push_back({v + "-vocab.gguf", "corpus.inp", ref, dot == std::string::npos});
    }
  }
  if (out.empty()) out.push_back({});  // one placeholder: gtest wants an instance; it never passes
  return out;
}

class TokenizerParity : public ::testing::TestWithParam<Case> {};

TEST_P(TokenizerParity, MatchesLlamaCpp) {
  const Case& c = GetParam();
  if (c.vocab.empty()) return test::no_parity_cases("tokenizer");
  const Tokenizer tok = load(test::fixture_path("tokenizer/" + c.vocab));
  const std::vector<std::string> texts = read_inp(test::fixture_path("tokenizer/" + c.inp));
  const std::vector<Ids> expected = read_out(test::fixture_path("tokenizer/" + c.out));
  ASSERT_EQ(texts.size(), expected.size());
  ASSERT_GT(texts.size(), 40u);
  size_t agree = 0;
  for (size_t i = 0; i < texts.size(); ++i) {
    const Ids got = tok.encode(texts[i], /*add_special=*/false, c.parse_special);
    if (got == expected[i]) {
      ++agree;
    } else {
      ADD_FAILURE() << "string " << i << " '" << texts[i] << "'\n  want" << show(expected[i]) << "\n  got "
                    << show(got);
    }
    EXPECT_EQ(tok.decode(got), texts[i]) << "round trip of string " << i;
  }
  EXPECT_EQ(agree, texts.size());
  test::record_parity_case("tokenizer", c.vocab + ":" + c.out);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, TokenizerParity, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<Case>& param_info) {
                           if (param_info.param.vocab.empty()) return std::string("NoFixtures");
                           std::string name =
                               fmt::format("{}_{}", std::string_view(param_info.param.vocab).substr(0, 5),
                                           param_info.param.out);
                           for (char& ch : name) {
                             if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           }
                           return name;
                         });

TEST(TokenizerParityIds, SpecialIdsAndEogMatchLlamaCpp) {
  MINFER_REQUIRE_FIXTURES();
  for (const char* vocab : {"tokenizer/qwen2-vocab.gguf", "tokenizer/qwen3-vocab.gguf"}) {
    const Tokenizer tok = load(test::fixture_path(vocab));
    EXPECT_EQ(tok.n_vocab(), 151936);
    EXPECT_EQ(tok.bos(), 151643);
    EXPECT_EQ(tok.eos(), 151645);
    EXPECT_EQ(tok.eot(), 151645);
    EXPECT_EQ(tok.pad(), 151643);
    EXPECT_FALSE(tok.add_bos());
    const SpecialIds& s = tok.special_ids();
    EXPECT_EQ(s.fim_pre, 151659);
    EXPECT_EQ(s.fim_suf, 151661);
    EXPECT_EQ(s.fim_mid, 151660);
    EXPECT_EQ(s.fim_pad, 151662);
    EXPECT_EQ(s.fim_rep, 151663);
    EXPECT_EQ(s.fim_sep, 151664);
    EXPECT_EQ(tok.eog_ids(), (Ids{128247, 151643, 151645, 151662, 151663, 151664})) << vocab;
    EXPECT_TRUE(tok.is_control(128247));  // `</s>`: a normal BPE token llama.cpp turns into CONTROL
  }
}

TEST(TokenizerParityIds, LoadsQuickly) {
  MINFER_REQUIRE_FIXTURES();
  auto file = gguf::File::open(test::fixture_path("tokenizer/qwen2-vocab.gguf"));
  ASSERT_TRUE(file.ok());
  const auto t0 = std::chrono::steady_clock::now();
  auto tok = Tokenizer::from_gguf(file->metadata());
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_TRUE(tok.ok());
  RecordProperty("load_ms", std::to_string(ms));
  EXPECT_LT(ms, 1000.0);  // budget ~100 ms; generous here for loaded CI machines and sanitizer builds
}

// Any bytes at all (invalid UTF-8, broken special tokens, control characters) encode without failing and
// decode back to themselves with the real vocabulary, with and without special parsing.
TEST(TokenizerParityIds, ArbitraryBytesRoundTrip) {
  MINFER_REQUIRE_FIXTURES();
  const Tokenizer tok = load(test::fixture_path("tokenizer/qwen3-vocab.gguf"));
  const std::string pieces[] = {"the",
                                " quick",
                                "  ",
                                "\n",
                                "\r\n",
                                "\t",
                                "'s",
                                "'LL",
                                "123",
                                "\xc3\xa9",
                                "\xcc\x81",
                                "\xe4\xb8\xad\xe6\x96\x87",
                                "\xf0\x9f\xa6\x99",
                                "\xe2\x80\x8d",
                                "<|im_start|>",
                                "<|im_",
                                "end|>",
                                "</s>",
                                "<think>",
                                "</think",
                                "<|endoftext|>",
                                "\xff",
                                "\x80",
                                "\xe4\xb8",
                                "\xed\xa0\x80",
                                "\xc0\xaf",
                                std::string(1, '\0'),
                                "\x1b[0m"};
  Rng rng(2026);
  for (int i = 0; i < 1000; ++i) {
    std::string s;
    const uint64_t n = rng.below(48);
    for (uint64_t j = 0; j < n; ++j) {
      if (rng.below(8) == 0) {
        s += static_cast<char>(rng.below(256));
      } else {
        s += pieces[rng.below(std::size(pieces))];
      }
    }
    for (const bool special : {false, true}) {
      const Ids ids = tok.encode(s, /*add_special=*/false, special);
      for (const int32_t id : ids) ASSERT_TRUE(id >= 0 && id < tok.n_vocab());
      ASSERT_EQ(tok.decode(ids), s) << "special=" << special;
    }
  }
}

// The synthetic models carry a truncated vocabulary; their reference prompts were tokenized by llama.cpp
// with parse_special on.
TEST(TokenizerParityIds, SyntheticModelPrompts) {
  MINFER_REQUIRE_FIXTURES();
  namespace fs = std::filesystem;
  int checked = 0;
  for (const char* model : {"qwen2-mini", "qwen3-mini"}) {
    const Tokenizer tok = load(test::fixture_path(std::string("models/") + model + "-f32.gguf"));
    const fs::path dir = test::fixture_path(std::string("models/refs/") + model + "-f32/exact");
    for (const auto& entry : fs::directory_iterator(dir)) {
      if (entry.path().extension() != ".json") continue;
      const auto j = nlohmann::json::parse(test::read_file(entry.path().string()));
      const std::string text = j.at("prompt_text").get<std::string>();
      const Ids want = j.at("prompt_ids").get<Ids>();
      EXPECT_EQ(tok.encode(text, /*add_special=*/false, true), want) << entry.path();
      EXPECT_EQ(tok.decode(want), text) << entry.path();
      ++checked;
    }
  }
  EXPECT_GE(checked, 14);
}

}  // namespace
}  // namespace minfer::tokenizer
