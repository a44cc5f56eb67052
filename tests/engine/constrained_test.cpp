// Constrained generation end to end on a tiny random-weight model: over many seeds, every generation under
// a JSON Schema or a GBNF grammar ends at end-of-generation and is valid, as checked by validators written
// here (nlohmann::json parsing + explicit constraint checks, a hand-written matcher) rather than by the
// engine.

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/utf8.h"
#include "engine/generate.h"
#include "tiny_model.h"

namespace minfer::engine {
namespace {

size_t code_points(const std::string& s) {
  size_t n = 0;
  for (size_t i = 0; i < s.size();) {
    size_t len = 1;
    utf8_decode(s, i, &len);
    i += len;
    ++n;
  }
  return n;
}

std::vector<GenerateResult> generate_many(const sampling::SamplerConfig& base, int seeds) {
  EngineOptions o;
  o.n_ctx = 512;
  o.n_threads = 1;
  auto e = Engine::load(test::write_tiny_model("tiny-qwen2"), o);
  EXPECT_TRUE(e.ok()) << e.status().message();
  std::vector<GenerateResult> out;
  for (int seed = 1; seed <= seeds; ++seed) {
    (*e)->kv().clear();
    GenerateOptions g;
    g.n_predict = 300;
    g.sampling = base;
    g.sampling.seed = static_cast<uint64_t>(seed);
    g.sampling.temp = 1.0f;
    auto r = generate(**e, {10, 20, 30}, g);
    EXPECT_TRUE(r.ok()) << r.status().message();
    if (r.ok()) out.push_back(*r);
  }
  return out;
}

TEST(Constrained, JsonSchemaOutputsAlwaysValidate) {
  sampling::SamplerConfig cfg;
  cfg.json_schema = R"({"type": "object",
    "properties": {"name": {"type": "string", "maxLength": 8},
                   "age": {"type": "integer", "minimum": 0, "maximum": 150},
                   "ok": {"type": "boolean"}},
    "required": ["name", "age", "ok"], "additionalProperties": false})";
  for (const GenerateResult& r : generate_many(cfg, 20)) {
    SCOPED_TRACE(r.text);
    EXPECT_EQ(r.stop_reason, "eog");
    const auto j = nlohmann::json::parse(r.text, nullptr, /*allow_exceptions=*/false);
    ASSERT_FALSE(j.is_discarded());
    ASSERT_TRUE(j.is_object());
    EXPECT_EQ(j.size(), 3u);
    ASSERT_TRUE(j.contains("name") && j["name"].is_string());
    EXPECT_LE(code_points(j["name"].get<std::string>()), 8u);
    ASSERT_TRUE(j.contains("age") && j["age"].is_number_integer());
    EXPECT_GE(j["age"].get<int64_t>(), 0);
    EXPECT_LE(j["age"].get<int64_t>(), 150);
    ASSERT_TRUE(j.contains("ok") && j["ok"].is_boolean());
  }
}

// Independent matcher for (yes|no|[0-9]{1,3})(,[a-c]+)?
bool matches_answer(const std::string& s) {
  size_t i = 0;
  if (s.rfind("yes", 0) == 0) {
    i = 3;
  } else if (s.rfind("no", 0) == 0) {
    i = 2;
  } else {
    while (i < s.size() && i < 4 && s[i] >= '0' && s[i] <= '9') ++i;
    if (i == 0 || i > 3) return false;
  }
  if (i == s.size()) return true;
  if (s[i] != ',' || i + 1 == s.size()) return false;
  for (size_t j = i + 1; j < s.size(); ++j) {
    if (s[j] < 'a' || s[j] > 'c') return false;
  }
  return true;
}

TEST(Constrained, GbnfOutputsAlwaysMatch) {
  sampling::SamplerConfig cfg;
  cfg.grammar = R"(root ::= ("yes" | "no" | [0-9]{1,3}) ("," [a-c]+)?)";
  for (const GenerateResult& r : generate_many(cfg, 20)) {
    EXPECT_EQ(r.stop_reason, "eog") << r.text;
    EXPECT_TRUE(matches_answer(r.text)) << r.text;
  }
}

}  // namespace
}  // namespace minfer::engine
