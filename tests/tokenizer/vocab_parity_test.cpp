// The SentencePiece (Llama 2 / Mistral-style, Gemma 3) and Llama 3 vocabularies of tests/tokenizer/vocab,
// made by `minfer convert --vocab-only` from the npm copies of their tokenizer.json, against llama.cpp's
// ids and detokenized text recorded through the peer (vectors.<family>.json, see that folder's README):
// ids with special parsing on and off, llama_detokenize with and without unparse_special and after a BOS,
// and the streamed text equal to the pieces.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/fixtures.h"
#include "core/utf8.h"
#include "gguf/reader.h"
#include "inp_out.h"
#include "tokenizer/stream_decoder.h"
#include "tokenizer/tokenizer.h"

namespace minfer::tokenizer {
namespace {

using Ids = std::vector<int32_t>;
using tok_test::show;

const std::string kDir = MINFER_TOKENIZER_VOCAB_DIR;

Tokenizer load(const std::string& name) {
  auto file = gguf::File::open(kDir + "/" + name);
  EXPECT_TRUE(file.ok()) << file.status().message();
  auto tok = Tokenizer::from_gguf(file->metadata());
  EXPECT_TRUE(tok.ok()) << tok.status().message();
  return std::move(tok).value();
}

class VocabParity : public ::testing::TestWithParam<std::string> {};

TEST_P(VocabParity, IdsAndTextEqualLlamaCpp) {
  const std::string family = GetParam();
  const nlohmann::json vectors =
      nlohmann::json::parse(test::read_file(kDir + "/vectors." + family + ".json"));
  const Tokenizer tok = load(vectors["vocab"].get<std::string>());
  ASSERT_EQ(tok.bos(), vectors["bos"].get<int32_t>());
  const auto& items = vectors["items"];
  ASSERT_GE(items.size(), 300u);
  int failures = 0;
  for (size_t i = 0; i < items.size() && failures < 10; ++i) {
    const auto& it = items[i];
    const std::string text = it["text"].get<std::string>();
    const Ids ids = it["ids"].get<Ids>();
    const Ids ids_plain = it["ids_plain"].get<Ids>();
    const Ids got = tok.encode(text, /*add_special=*/false, /*parse_special=*/true);
    const Ids got_plain = tok.encode(text, /*add_special=*/false, /*parse_special=*/false);
    const std::string where = fmt::format("{} item {} {}", family, i, nlohmann::json(text).dump());
    failures += got != ids;
    EXPECT_EQ(show(got), show(ids)) << where;
    failures += got_plain != ids_plain;
    EXPECT_EQ(show(got_plain), show(ids_plain)) << where << " (parse_special off)";
    EXPECT_EQ(tok.detokenize(ids), it["detok"].get<std::string>()) << where;
    EXPECT_EQ(tok.detokenize(ids_plain, false, /*unparse_special=*/false),
              it["detok_plain"].get<std::string>())
        << where;
    Ids with_bos{tok.bos()};
    with_bos.insert(with_bos.end(), ids.begin(), ids.end());
    EXPECT_EQ(tok.detokenize(with_bos), it["detok_bos"].get<std::string>()) << where;
    // Streaming emits the pieces: complete characters only, together equal to decode().
    StreamDecoder dec(tok);
    std::string streamed;
    for (const int32_t id : ids) {
      const std::string part = dec.push(id);
      EXPECT_TRUE(utf8_valid(part)) << where;
      streamed += part;
    }
    dec.finish();
    EXPECT_EQ(streamed, tok.decode(ids)) << where;
    EXPECT_EQ(dec.dropped_bytes(), 0u) << where;
  }
}

INSTANTIATE_TEST_SUITE_P(Families, VocabParity, ::testing::Values("llama2", "gemma3", "llama3"));

TEST(VocabParity, SpecialIdsAndFlagsAsLlamaCpp) {
  const Tokenizer llama2 = load("llama2-vocab.gguf");
  EXPECT_EQ(llama2.kind(), VocabKind::kSpm);
  EXPECT_EQ(llama2.bos(), 1);
  EXPECT_EQ(llama2.eos(), 2);
  EXPECT_TRUE(llama2.add_bos());
  EXPECT_FALSE(llama2.add_eos());
  EXPECT_TRUE(llama2.add_space_prefix());
  EXPECT_TRUE(llama2.is_eog(2));
  EXPECT_EQ(llama2.token_bytes(llama2.find_token("<0x0A>")), "\n");
  EXPECT_EQ(llama2.token_bytes(llama2.find_token("\xe2\x96\x81world")), " world");

  const Tokenizer gemma3 = load("gemma3-vocab.gguf");
  EXPECT_EQ(gemma3.kind(), VocabKind::kSpm);
  EXPECT_EQ(gemma3.bos(), 2);
  EXPECT_EQ(gemma3.eos(), 106);  // <end_of_turn>, tokenizer_config.json's eos_token
  EXPECT_TRUE(gemma3.add_bos());
  EXPECT_FALSE(gemma3.add_space_prefix());
  EXPECT_TRUE(gemma3.is_eog(106));
  EXPECT_TRUE(gemma3.is_eog(1));  // <eos>, by name
  EXPECT_TRUE(gemma3.is_control(gemma3.find_token("<start_of_turn>")));

  const Tokenizer llama3 = load("llama3-vocab.gguf");
  EXPECT_EQ(llama3.kind(), VocabKind::kBpe);
  EXPECT_EQ(llama3.pre_tokenizer(), PreTokenizer::kLlama3);
  EXPECT_EQ(llama3.bos(), 128000);
  EXPECT_EQ(llama3.eos(), 128009);
  EXPECT_TRUE(llama3.add_bos());
  // This copy of the Llama 3 vocabulary has no <|eom_id|> (128008 is a reserved token), as in Llama 3.0.
  for (const char* name : {"<|eot_id|>", "<|end_of_text|>"}) {
    EXPECT_TRUE(llama3.is_eog(llama3.find_token(name))) << name;
  }
}

// SentencePiece loading and encoding speed on the real vocabularies (a regression guard, generous bounds
// for sanitizer builds; docs/PERFORMANCE.md has the measured figures).
TEST(VocabParity, SentencePieceIsFastEnough) {
  for (const char* name : {"llama2-vocab.gguf", "gemma3-vocab.gguf"}) {
    const Tokenizer tok = load(name);
    std::string text;
    for (int i = 0; i < 2000; ++i)
      text += fmt::format("Line {}: the quick brown fox, {}; 你好世界 🙂\n", i, i * 7919);
    const auto t0 = std::chrono::steady_clock::now();
    const Ids ids = tok.encode(text, /*add_special=*/false, true);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_EQ(tok.detokenize(ids), text) << name;
    EXPECT_LT(s, 5.0) << name << ": " << ids.size() << " tokens";
  }
}

}  // namespace
}  // namespace minfer::tokenizer
