// One owner for special tokens (issue 49): the ids that `run`, `serve`, `tokenize`, `perplexity` and `viz`
// feed the model for the same text equal llama.cpp's, on each vocabulary kind: Qwen (byte-level BPE, no
// BOS), Llama 3 (BPE with a BOS, a template that writes {{ bos_token }}), SentencePiece (Mistral's, with a
// BOS) and Gemma 3 (SentencePiece with a BOS and a template that writes it). The references
// (special_tokens/refs.json) are llama.cpp's tokenization through the peer, made by
// special_tokens/make_refs.mjs: raw text (llama_tokenize with add_special, parse_special), perplexity's
// (parse_special off) and the chat prompt (the GGUF's template rendered by another Jinja engine, then
// llama.cpp's common/chat.cpp rule: the leading BOS text dropped because add_special adds it).
// Each case runs a tiny random-weight model carrying the real vocabulary: the weights do not matter here.
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli/run_minfer.h"
#include "common/fixtures.h"
#include "gguf/reader.h"
#include "server/test_server.h"
#include "tools/synthetic_model.h"
#include "viz/viz_app.h"

namespace minfer::cli {
namespace {

using json = nlohmann::json;

struct VocabCase {
  std::string name;    // the key in refs.json
  std::string preset;  // the tiny model the vocabulary is copied into
  std::string vocab;   // the GGUF holding it
};

void PrintTo(const VocabCase& c, std::ostream* os) {
  *os << c.name;
}

const json& refs() {
  static const json r = json::parse(std::ifstream(MINFER_SPECIAL_TOKENS_REFS));
  return r;
}

std::vector<VocabCase> cases() {
  const std::string vocab_dir = std::string(MINFER_SOURCE_DIR) + "/tests/tokenizer/vocab/";
  return {{"qwen", "tiny-qwen3", ""},  // the shared fixtures' real Qwen3 vocabulary (path set in the test)
          {"llama3", "tiny-llama", vocab_dir + "llama3-vocab.gguf"},
          {"spm", "tiny-llama", vocab_dir + "llama2-vocab.gguf"},
          {"gemma", "tiny-gemma3", vocab_dir + "gemma3-vocab.gguf"}};
}

// A tiny model of `preset` with the vocabulary (tokens, merges, special ids, add_bos, template) of `vocab`.
std::string model_with_vocab(const VocabCase& c, const std::string& vocab) {
  auto file = gguf::File::open(vocab);
  EXPECT_TRUE(file.ok()) << vocab;
  if (!file.ok()) return "";
  tools::SyntheticOptions o;
  o.shape = *tools::synthetic_preset(c.preset);
  o.seed = 3;
  o.vocab_source = &*file;
  const std::string path = ::minfer::test::temp_dir() + "/special-" + c.name + ".gguf";
  auto w = tools::make_synthetic_model(o);
  EXPECT_TRUE(w.ok()) << w.status().message();
  if (!w.ok() || !w->write(path).ok()) return "";
  return path;
}

std::vector<int32_t> ids_of(const json& j) {
  return j.get<std::vector<int32_t>>();
}

class SpecialTokens : public ::testing::TestWithParam<VocabCase> {};

TEST_P(SpecialTokens, EveryCommandFeedsTheModelLlamaCppsIds) {
  MINFER_REQUIRE_FIXTURES();
  const json& r = refs();
  const std::string text = r["text"];
  const std::string system = r["messages"][0]["content"], user = r["messages"][1]["content"];
  {
    const VocabCase& c = GetParam();
    const json& want = r["vocabs"][c.name];
    const std::string vocab =
        c.vocab.empty() ? ::minfer::test::fixture_path("tokenizer/qwen3-vocab.gguf") : c.vocab;
    const std::string model = model_with_vocab(c, vocab);
    ASSERT_FALSE(model.empty());
    const std::vector<int32_t> raw = ids_of(want["raw"]), plain = ids_of(want["plain"]);

    // tokenize: llama-tokenize's ids (BOS when the vocabulary adds one, special tokens parsed).
    Ran t = run_minfer({"tokenize", model, text, "--ids"});
    ASSERT_EQ(t.rc, 0) << t.all();
    EXPECT_EQ(json::parse(t.out).get<std::vector<int32_t>>(), raw) << "tokenize";

    // run without a template: the raw text, as llama-cli -no-cnv -p.
    Ran plain_run = run_minfer({"run", model, text, "--no-template", "-n", "1", "--greedy", "-o", "json"});
    ASSERT_EQ(plain_run.rc, 0) << plain_run.all();
    EXPECT_EQ(ids_of(json::parse(plain_run.out)["prompt_ids"]), raw) << "run --no-template";

    // run through the model's template: llama.cpp's chat prompt (one BOS, however the template writes it).
    if (want.contains("chat")) {
      Ran chat_run = run_minfer({"run", model, user, "-sys", system, "-n", "1", "--greedy", "-o", "json"});
      ASSERT_EQ(chat_run.rc, 0) << chat_run.all();
      EXPECT_EQ(ids_of(json::parse(chat_run.out)["prompt_ids"]), ids_of(want["chat"]))
          << "run (chat template)";
    }

    // perplexity: llama-perplexity's ids (special tokens are plain text), counted in its JSON.
    const std::string text_file = ::minfer::test::temp_dir() + "/special-" + c.name + ".txt";
    std::ofstream(text_file) << text;
    Ran ppl = run_minfer({"perplexity", model, "-f", text_file, "-c", "4", "-o", "json"});
    ASSERT_EQ(ppl.rc, 0) << ppl.all();
    EXPECT_EQ(json::parse(ppl.out)["n_tokens"].get<size_t>(), plain.size()) << "perplexity";

    // serve: /tokenize with add_special, and the prompts completions and chat completions evaluate.
    {
      server::test::TestServerOptions so;
      so.model_path = model;
      so.n_slots = 1;
      server::test::TestServer s(so);
      ASSERT_TRUE(s.ok());
      json body = {{"content", text}, {"add_special", true}};
      auto tok = server::test::post(s, "/tokenize", body.dump());
      ASSERT_EQ(tok.status, 200) << tok.raw;
      EXPECT_EQ(ids_of(tok.body["tokens"]), raw) << "serve /tokenize";
      body = {{"prompt", text}, {"max_tokens", 1}};
      auto done = server::test::post(s, "/v1/completions", body.dump());
      ASSERT_EQ(done.status, 200) << done.raw;
      EXPECT_EQ(done.body["usage"]["prompt_tokens"].get<size_t>(), raw.size()) << "serve /v1/completions";
      if (want.contains("chat")) {
        body = {{"messages", r["messages"]}, {"max_tokens", 1}};
        auto chat = server::test::post(s, "/v1/chat/completions", body.dump());
        ASSERT_EQ(chat.status, 200) << chat.raw;
        EXPECT_EQ(chat.body["usage"]["prompt_tokens"].get<size_t>(), want["chat"].size())
            << "serve /v1/chat/completions";
      }
      // viz runs the raw text as run --no-template does.
      viz::VizOptions vo;
      auto app = viz::VizApp::create(s.engine(), vo);
      ASSERT_TRUE(app.ok()) << app.status().message();
      server::HttpRequest req;
      req.method = "POST";
      req.path = "/api/run";
      req.body = json{{"prompt", text}, {"n_predict", 1}}.dump();
      const server::HttpResponse started = (*app)->handle(req, [] { return true; });
      ASSERT_EQ(started.status, 202) << started.body;
      EXPECT_EQ(json::parse(started.body)["prompt_tokens"].get<size_t>(), raw.size()) << "viz";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(VocabularyKinds, SpecialTokens, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<VocabCase>& i) { return i.param.name; });

}  // namespace
}  // namespace minfer::cli
