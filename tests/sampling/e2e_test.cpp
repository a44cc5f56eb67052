// End to end on the fixture models (parity tier): over many seeds, default-pipeline generations under a
// JSON Schema or a GBNF grammar that end with EOG parse under their grammar / validate against their
// schema (independent validator), and unfinished ones are still a prefix the grammar accepts.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "common/fixtures.h"
#include "engine/generate.h"
#include "json_validator.h"
#include "sampling/grammar/automaton.h"
#include "sampling/grammar/matcher.h"
#include "sampling/json_schema/to_grammar.h"

namespace minfer::sampling {
namespace {

using json = nlohmann::ordered_json;

std::string read_data(const std::string& name) {
  std::ifstream in(std::string(MINFER_SAMPLING_TEST_DATA) + "/" + name, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct Outcome {
  std::string text;
  bool finished = false;
};

Outcome run(const std::string& model, const SamplerConfig& cfg, const std::string& prompt) {
  auto engine =
      engine::Engine::load(::minfer::test::fixture_path("models/" + model), {.n_ctx = 1024, .n_threads = 1});
  EXPECT_TRUE(engine.ok()) << engine.status().message();
  if (!engine.ok()) return {};
  const std::vector<int32_t> ids =
      (*engine)->tokenizer().encode(prompt, /*add_special=*/false, /*parse_special=*/true);
  engine::GenerateOptions opts;
  opts.n_predict = 160;
  opts.sampling = cfg;
  auto r = engine::generate(**engine, ids, opts);
  EXPECT_TRUE(r.ok()) << r.status().message();
  if (!r.ok()) return {};
  EXPECT_NE(r->stop_reason, "grammar") << "the grammar allowed no token after '" << r->text << "'";
  return {r->text, r->stop_reason == "eog"};
}

bool is_prefix_of_language(const std::string& gbnf, const std::string& text) {
  auto g = grammar::Grammar::parse(gbnf);
  grammar::Automaton a(*g);
  return a.step_bytes(a.initial(), text) != grammar::Automaton::kDead;
}

TEST(SamplingEndToEnd, SchemaConstrainedGenerationsValidate) {
  MINFER_REQUIRE_FIXTURES();
  const std::vector<std::string> schemas = {
      R"({"type":"object","properties":{"name":{"type":"string","maxLength":10},"age":{"type":"integer","minimum":0,"maximum":150}},"required":["name","age"],"additionalProperties":false})",
      R"({"type":"array","items":{"enum":["red","green","blue"]},"minItems":1,"maxItems":4})",
      R"({"type":"object","properties":{"ok":{"type":"boolean"},"score":{"type":"number","minimum":-1,"maximum":1}},"required":["ok"]})",
  };
  for (const char* model : {"qwen2-mini-q8_0.gguf", "qwen3-mini-q8_0.gguf"}) {
    for (const std::string& schema_text : schemas) {
      const json schema = json::parse(schema_text);
      int finished = 0;
      for (uint64_t seed = 1; seed <= 12; ++seed) {
        SamplerConfig cfg;
        cfg.json_schema = schema_text;
        cfg.seed = seed;
        const Outcome o = run(model, cfg, "Give me some JSON:");
        if (!o.finished) {
          EXPECT_TRUE(is_prefix_of_language(*json_schema::to_grammar(schema_text), o.text)) << o.text;
          continue;
        }
        ++finished;
        const json doc = json::parse(o.text, nullptr, false);
        ASSERT_FALSE(doc.is_discarded()) << model << " seed " << seed << ": not JSON: " << o.text;
        EXPECT_TRUE(schema_check::validate(doc, schema, schema))
            << model << " seed " << seed << ": " << o.text;
      }
      EXPECT_GE(finished, 3) << model << " " << schema_text;
    }
  }
}

TEST(SamplingEndToEnd, GrammarConstrainedGenerationsParse) {
  MINFER_REQUIRE_FIXTURES();
  int total_finished = 0;
  for (const char* file : {"json.gbnf", "chess.gbnf", "arithmetic.gbnf"}) {
    const std::string gbnf = read_data(file);
    auto g = grammar::Grammar::parse(gbnf);
    ASSERT_TRUE(g.ok());
    int finished = 0;
    for (uint64_t seed = 1; seed <= 10; ++seed) {
      SamplerConfig cfg;
      cfg.grammar = gbnf;
      cfg.seed = seed;
      const Outcome o = run("qwen2-mini-q8_0.gguf", cfg, "Output:");
      if (o.finished) {
        ++finished;
        EXPECT_TRUE(grammar::grammar_accepts(*g, o.text)) << file << " seed " << seed << ": " << o.text;
      } else {
        EXPECT_TRUE(is_prefix_of_language(gbnf, o.text)) << file << " seed " << seed << ": " << o.text;
      }
    }
    // Greedy respects the mask too.
    SamplerConfig greedy;
    greedy.grammar = gbnf;
    greedy.temp = 0.0f;
    const Outcome o = run("qwen2-mini-q8_0.gguf", greedy, "Output:");
    EXPECT_TRUE(o.finished ? grammar::grammar_accepts(*g, o.text) : is_prefix_of_language(gbnf, o.text))
        << o.text;
    total_finished += finished;
  }
  // EOG is unlikely exactly where these grammars accept (random weights), so not every grammar finishes.
  EXPECT_GE(total_finished, 3);
}

}  // namespace
}  // namespace minfer::sampling
