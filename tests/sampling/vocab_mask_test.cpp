// On the real Qwen2 vocabulary (151,936 tokens from the fixture GGUF): masks from the trie walk equal
// per-token stepping, and a JSON-Schema-constrained greedy run over random logits produces valid JSON.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "common/fixtures.h"
#include "core/byte_unicode.h"
#include "core/rng.h"
#include "core/utf8.h"
#include "gguf/reader.h"
#include "sampling/grammar/matcher.h"
#include "sampling/sampler.h"

namespace minfer::sampling {
namespace {

std::shared_ptr<const VocabView> load_qwen2_vocab() {
  auto file = gguf::File::open(test::fixture_path("tokenizer/qwen2-vocab.gguf"));
  EXPECT_TRUE(file.ok()) << file.status().message();
  if (!file.ok()) return nullptr;
  auto tokens = file->metadata().get_string_array("tokenizer.ggml.tokens");
  auto types = file->metadata().get_int_array("tokenizer.ggml.token_type");
  EXPECT_TRUE(tokens.ok() && types.ok());
  auto v = std::make_shared<VocabView>();
  for (size_t id = 0; id < tokens->size(); ++id) {
    std::string bytes;
    const std::string& text = (*tokens)[id];
    if ((*types)[id] == 1) {  // NORMAL: GPT-2 byte-unicode -> raw bytes
      for (size_t pos = 0; pos < text.size();) {
        size_t len = 0;
        const int32_t cp = utf8_decode(text, pos, &len);
        const int b = cp < 0 ? -1 : codepoint_to_byte(static_cast<uint32_t>(cp));
        if (b >= 0) bytes += static_cast<char>(b);
        pos += len;
      }
    }
    v->token_bytes.push_back(std::move(bytes));
  }
  v->eog_ids = {151643, 151645};
  return v;
}

TEST(VocabMask, TrieWalkEqualsPerTokenSteppingOnQwen2) {
  MINFER_REQUIRE_FIXTURES();
  auto vocab = load_qwen2_vocab();
  ASSERT_TRUE(vocab);
  ASSERT_EQ(vocab->n_vocab(), 151936);
  auto g = grammar::Grammar::parse(R"(root ::= "{" ws "\"name\"" ws ":" ws string ws "}"
string ::= "\"" [^"\\]* "\""
ws ::= [ \n]*)");
  ASSERT_TRUE(g.ok()) << g.status().message();
  for (const std::string prefix : {"", "{", "{ \"na", "{\"name\": \"caf", "{\"name\": \"\xE6\x97"}) {
    grammar::GrammarMatcher m(*g, grammar::TokenTrie::for_vocab(vocab), vocab);
    ASSERT_TRUE(m.accept_bytes(prefix).ok());
    const grammar::TokenMask& mask = m.mask();
    grammar::Automaton a(*g);
    const int32_t s = a.step_bytes(a.initial(), prefix);
    size_t allowed = 0;
    for (int32_t id = 0; id < vocab->n_vocab(); ++id) {
      const std::string& b = vocab->token_bytes[static_cast<size_t>(id)];
      bool want = false;
      if (vocab->is_eog(id)) {
        want = a.accepting(s);
      } else if (!b.empty()) {
        want = a.step_bytes(s, b) != grammar::Automaton::kDead;
      }
      allowed += want ? 1 : 0;
      ASSERT_EQ(mask.test(id), want) << "token " << id << " after '" << prefix << "'";
    }
    EXPECT_GT(allowed, 0u);
  }
}

TEST(VocabMask, SchemaConstrainedRunsOnQwen2ProduceValidJson) {
  MINFER_REQUIRE_FIXTURES();
  auto vocab = load_qwen2_vocab();
  ASSERT_TRUE(vocab);
  const std::string schema =
      R"({"type":"object","properties":{"name":{"type":"string","maxLength":12},"age":{"type":"integer","minimum":0,"maximum":150},"tags":{"type":"array","items":{"enum":["a","b"]},"maxItems":3}},"required":["name","age","tags"],"additionalProperties":false})";
  for (uint64_t seed = 0; seed < 8; ++seed) {
    SamplerConfig cfg;
    cfg.json_schema = schema;
    cfg.seed = seed;
    auto s = Sampler::create(cfg, vocab);
    ASSERT_TRUE(s.ok()) << s.status().message();
    Rng rng(seed);
    std::string out;
    bool done = false;
    for (int step = 0; step < 300 && !done; ++step) {
      std::vector<float> logits(static_cast<size_t>(vocab->n_vocab()));
      for (float& l : logits) l = static_cast<float>(rng.normal()) * 3.0f;
      logits[151645] += 20.0f;
      auto tok = s->sample(logits);
      ASSERT_TRUE(tok.ok()) << tok.status().message();
      s->accept(*tok);
      if (vocab->is_eog(*tok)) {
        done = true;
      } else {
        out += vocab->token_bytes[static_cast<size_t>(*tok)];
      }
    }
    ASSERT_TRUE(done) << out;
    const auto doc = nlohmann::json::parse(out, nullptr, false);
    ASSERT_FALSE(doc.is_discarded()) << out;
    EXPECT_TRUE(doc["name"].is_string() && doc["name"].get<std::string>().size() <= 48) << out;
    EXPECT_TRUE(doc["age"].is_number_integer() && doc["age"].get<int>() >= 0 && doc["age"].get<int>() <= 150)
        << out;
    EXPECT_TRUE(doc["tags"].is_array() && doc["tags"].size() <= 3) << out;
    EXPECT_EQ(doc.size(), 3u) << out;
  }
}

}  // namespace
}  // namespace minfer::sampling
