// JSON Schema -> GBNF: for each schema, valid documents are accepted and invalid ones rejected by the
// grammar; random constrained generations parse as JSON and pass an independent validator written here;
// unsupported keywords are refused naming their JSON path.
#include <gtest/gtest.h>

#include <cmath>

#include <nlohmann/json.hpp>

#include "core/rng.h"
#include "json_validator.h"
#include "sampling/grammar/matcher.h"
#include "sampling/json_schema/to_grammar.h"
#include "sampling/sampler.h"

namespace minfer::sampling {
namespace {

using json = nlohmann::ordered_json;
using schema_check::validate;

// ---- cases ----

struct Case {
  const char* name;
  const char* schema;
  std::vector<std::string> valid;
  std::vector<std::string> invalid;
};

const std::vector<Case>& cases() {
  static const std::vector<Case> kCases = {
      {"person",
       R"({"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer","minimum":0,"maximum":150}},"required":["name","age"],"additionalProperties":false})",
       {R"({"name":"John","age":25})", R"({ "name": "", "age": 0 })", R"({"name":"x\"y","age":150})"},
       {R"({"name":"John"})", R"({"name":"John","age":151})", R"({"name":"John","age":-1})",
        R"({"name":"John","age":2.5})", R"({"name":"J","age":3,"x":1})", R"({"name":1,"age":3})"}},
      {"type-array", R"({"type":["string","null"]})", {R"("a")", "null"}, {"1", "true", "[]"}},
      {"enum", R"({"enum":["red","green",1,null]})", {R"("red")", "1", "null"}, {R"("blue")", "2", "true"}},
      {"const", R"({"const":{"a":[1,2]}})", {R"({"a":[1,2]})"}, {R"({"a":[1]})", R"({"a":[2,1]})"}},
      {"array-bounds",
       R"({"type":"array","items":{"type":"integer"},"minItems":2,"maxItems":3})",
       {"[1,2]", "[1, 2, 3]"},
       {"[1]", "[1,2,3,4]", R"([1,"a"])", "[]"}},
      {"prefix-items",
       R"({"type":"array","prefixItems":[{"type":"string"},{"type":"boolean"}]})",
       {R"(["a",true])"},
       {R"([true,"a"])", R"(["a",1])"}},
      {"string-length",
       R"({"type":"string","minLength":2,"maxLength":4})",
       {R"("ab")", R"("abcd")", "\"\xC3\xA9\xE2\x82\xAC\""},
       {R"("a")", R"("abcde")", R"("")"}},
      {"integer-exclusive",
       R"({"type":"integer","exclusiveMinimum":-5,"exclusiveMaximum":10})",
       {"-4", "0", "9"},
       {"-5", "10", "100", "-50", "1.5"}},
      {"integer-range",
       R"({"type":"integer","minimum":-123,"maximum":4567})",
       {"-123", "-1", "0", "99", "1000", "4567", "-99"},
       {"-124", "4568", "10000", "-1000", "5000"}},
      {"integer-min-only",
       R"({"type":"integer","minimum":42})",
       {"42", "43", "99", "100", "123456"},
       {"41", "0", "-42", "9"}},
      {"integer-max-only", R"({"type":"integer","maximum":-3})", {"-3", "-4", "-100"}, {"-2", "0", "3"}},
      {"number-bounds",
       R"({"type":"number","minimum":-2,"exclusiveMaximum":3})",
       {"-2", "-2.0", "-1.5", "0", "2.999", "2"},
       {"-2.5", "3", "3.0", "3.5", "10", "-2.1"}},
      {"number-positive",
       R"({"type":"number","exclusiveMinimum":0})",
       {"0.5", "1", "12.25"},
       {"0", "-1", "0.0"}},
      {"number-max", R"({"type":"number","maximum":10})", {"10", "9.99", "-3.5", "0"}, {"10.5", "11", "100"}},
      {"number-decimal",
       R"({"type":"number","minimum":0.5,"maximum":2.25})",
       {"0.5", "0.75", "1", "2.25", "2.2", "1.999", "0.50"},
       {"0.49", "2.26", "2.3", "3", "0.4999", "-1", "0"}},
      {"number-decimal-exclusive",
       R"({"type":"number","exclusiveMinimum":-1.5,"exclusiveMaximum":0.1})",
       {"-1.4", "-1.49", "0", "0.09", "-0.5", "-1"},
       {"-1.5", "-1.50", "0.1", "0.10", "0.2", "-2", "-1.51"}},
      {"number-same-integer-part",
       R"({"type":"number","minimum":0.25,"maximum":0.75})",
       {"0.25", "0.5", "0.75", "0.3", "0.7499"},
       {"0.2", "0.8", "0.76", "0.249", "1", "0"}},
      {"number-negative-max",
       R"({"type":"number","maximum":-0.5})",
       {"-0.5", "-1", "-0.75", "-12.5"},
       {"-0.4", "0", "0.5", "-0.49"}},
      {"number-narrow",
       R"({"type":"number","exclusiveMinimum":0.05,"exclusiveMaximum":0.06})",
       {"0.055", "0.0599", "0.05001"},
       {"0.05", "0.06", "0.061", "0.0500", "0.049"}},
      {"number-point",
       R"({"type":"number","minimum":1.5,"maximum":1.5})",
       {"1.5", "1.50"},
       {"1.51", "1.4", "2"}},
      {"boolean", R"({"type":"boolean"})", {"true", "false"}, {R"("true")", "1"}},
      {"null", R"({"type":"null"})", {"null"}, {"0", R"("null")"}},
      {"any-of",
       R"({"anyOf":[{"type":"integer"},{"type":"string","maxLength":1}]})",
       {"5", R"("a")"},
       {R"("ab")", "1.5", "true"}},
      {"one-of", R"({"oneOf":[{"type":"boolean"},{"type":"null"}]})", {"true", "null"}, {"0", R"("x")"}},
      {"all-of",
       R"({"allOf":[{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]},{"properties":{"b":{"type":"string"}},"required":["b"]}]})",
       {R"({"a":1,"b":"x"})"},
       {R"({"a":1})", R"({"a":"x","b":"y"})", R"({"b":"y"})"}},
      {"recursive",
       R"({"$defs":{"node":{"type":"object","properties":{"v":{"type":"integer"},"next":{"anyOf":[{"$ref":"#/$defs/node"},{"type":"null"}]}},"required":["v","next"],"additionalProperties":false}},"$ref":"#/$defs/node"})",
       {R"({"v":1,"next":null})", R"({"v":1,"next":{"v":2,"next":{"v":3,"next":null}}})"},
       {R"({"v":1,"next":{"v":"x","next":null}})", R"({"v":1})", R"({"v":1,"next":{"v":2}})"}},
      {"date",
       R"({"type":"string","format":"date"})",
       {R"("2024-02-29")"},
       {R"("2024-13-01")", R"("24-01-01")"}},
      {"time",
       R"({"type":"string","format":"time"})",
       {R"("12:30:00Z")", R"("23:59:59.123+02:00")"},
       {R"("24:00:00Z")", R"("12:30:00")"}},
      {"date-time",
       R"({"type":"string","format":"date-time"})",
       {R"("2024-01-31T10:00:00Z")"},
       {R"("2024-01-31 10:00:00Z")"}},
      {"uuid",
       R"({"type":"string","format":"uuid"})",
       {R"("123e4567-e89b-12d3-a456-426614174000")"},
       {R"("123e4567")"}},
      {"pattern",
       R"({"type":"string","pattern":"^[A-Z]{2}-\\d{3}(-[a-z]+)?$"})",
       {R"("AB-123")", R"("ZZ-000-abc")"},
       {R"("A-123")", R"("AB-12")", R"("ab-123")", R"("AB-123-")"}},
      {"pattern-quote",
       R"({"type":"string","pattern":"^a\"b|c\\.d$"})",
       {R"("a\"b")", R"("c.d")"},
       {R"("ab")", R"("cxd")"}},
      {"additional-schema",
       R"({"type":"object","properties":{"id":{"type":"integer"}},"required":["id"],"additionalProperties":{"type":"number"}})",
       {R"({"id":1})", R"({"id":1,"x":2.5,"y":3})"},
       {R"({"id":1,"x":"s"})", R"({"x":1})"}},
      {"optional-properties",
       R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer"},"c":{"type":"integer"}}})",
       {"{}", R"({"a":1})", R"({"b":2})", R"({"a":1,"c":3})", R"({"a":1,"b":2,"c":3})"},
       {R"({"a":"x"})", R"({"b":[]})"}},
      {"array-of-objects",
       R"({"type":"array","items":{"type":"object","properties":{"k":{"type":"string"}},"required":["k"]}})",
       {R"([ {"k": "v"} ])", "[]"},
       {R"([{"j":"v"}])", R"([{"k":1}])"}},
      {"any-value", R"({})", {"1", R"("x")", R"({"a":[null, true]})"}, {"tru", "[1,]"}},
  };
  return kCases;
}

std::shared_ptr<const grammar::Grammar> compile(const std::string& schema) {
  auto gbnf = json_schema::to_grammar(schema);
  EXPECT_TRUE(gbnf.ok()) << gbnf.status().message();
  if (!gbnf.ok()) return nullptr;
  auto g = grammar::Grammar::parse(*gbnf);
  EXPECT_TRUE(g.ok()) << g.status().message() << "\n" << *gbnf;
  return g.ok() ? *g : nullptr;
}

TEST(JsonSchema, GrammarAcceptsValidAndRejectsInvalidDocuments) {
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name);
    const json schema = json::parse(c.schema);
    auto g = compile(c.schema);
    ASSERT_TRUE(g);
    for (const std::string& doc : c.valid) {
      // The test data itself is checked by the independent validator first.
      EXPECT_TRUE(validate(json::parse(doc), schema, schema)) << "bad test data (valid): " << doc;
      EXPECT_TRUE(grammar::grammar_accepts(g, doc)) << "grammar rejects valid " << doc << "\n"
                                                    << g->to_gbnf();
    }
    for (const std::string& doc : c.invalid) {
      const json parsed = json::parse(doc, nullptr, false);
      if (!parsed.is_discarded()) {
        EXPECT_FALSE(validate(parsed, schema, schema)) << "bad test data (invalid): " << doc;
      }
      EXPECT_FALSE(grammar::grammar_accepts(g, doc)) << "grammar accepts invalid " << doc << "\n"
                                                     << g->to_gbnf();
    }
  }
}

std::shared_ptr<const VocabView> char_vocab() {
  auto v = std::make_shared<VocabView>();
  for (int b = 0x20; b < 0x7F; ++b) v->token_bytes.emplace_back(1, static_cast<char>(b));
  for (const char* s :
       {"\n", "\t", "\xC3\xA9", "\xE2\x82\xAC", "\xE6\x97\xA5", "true", "null", "\":", "\"}", "12"}) {
    v->token_bytes.emplace_back(s);
  }
  v->token_bytes.emplace_back();  // EOG
  v->eog_ids = {static_cast<int32_t>(v->token_bytes.size() - 1)};
  return v;
}

// The end-to-end property without a model: whatever the sampler picks, a finished output parses as JSON
// and satisfies the schema (checked by the validator above, not by the grammar).
TEST(JsonSchema, RandomGenerationsAlwaysValidate) {
  auto vocab = char_vocab();
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name);
    const json schema = json::parse(c.schema);
    int finished = 0;
    for (uint64_t seed = 0; seed < 25; ++seed) {
      SamplerConfig cfg;
      cfg.json_schema = c.schema;
      cfg.seed = seed;
      cfg.temp = 1.0f;
      cfg.top_k = 0;
      cfg.top_p = 1.0f;
      auto s = Sampler::create(cfg, vocab);
      ASSERT_TRUE(s.ok()) << s.status().message();
      Rng rng(seed * 31 + 7);
      std::string out;
      bool done = false;
      for (int step = 0; step < 500 && !done; ++step) {
        std::vector<float> logits(static_cast<size_t>(vocab->n_vocab()));
        for (float& l : logits) l = static_cast<float>(rng.normal());
        for (char ch : std::string("\"}],n"))
          logits[static_cast<size_t>(static_cast<uint8_t>(ch) - 0x20)] += 2.0f;
        logits[static_cast<size_t>(vocab->eog_ids[0])] += 6.0f;
        auto tok = s->sample(logits);
        ASSERT_TRUE(tok.ok()) << tok.status().message() << " after '" << out << "'";
        s->accept(*tok);
        if (vocab->is_eog(*tok)) {
          done = true;
        } else {
          out += vocab->token_bytes[static_cast<size_t>(*tok)];
        }
      }
      if (!done) continue;
      ++finished;
      const json doc = json::parse(out, nullptr, false);
      ASSERT_FALSE(doc.is_discarded()) << "not JSON: " << out;
      EXPECT_TRUE(validate(doc, schema, schema)) << "does not validate: " << out;
    }
    EXPECT_GE(finished, 5);
  }
}

TEST(JsonSchema, RefusesUnsupportedKeywordsNamingThePath) {
  const std::vector<std::pair<const char*, const char*>> refused = {
      {R"({"type":"string","format":"email"})", "#/format"},
      {R"({"type":"number","multipleOf":2})", "#/multipleOf"},
      {R"({"type":"object","properties":{"a":{"type":"array","uniqueItems":true}}})",
       "#/properties/a/uniqueItems"},
      {R"({"type":"number","maximum":0.1234567890123456})", "more than 15 fraction digits"},
      {R"({"type":"number","minimum":2,"exclusiveMaximum":2})", "leave no value"},
      {R"({"$ref":"http://example.com/s.json"})", "not local"},
      {R"({"$ref":"#/$defs/missing"})", "does not resolve"},
      {R"({"type":"string","pattern":"abc"})", "must start with '^'"},
      {R"({"type":"string","pattern":"^(?=a)b$"})", "lookaround"},
      {R"({"type":"strin"})", "unknown type"},
      {R"({"type":"object","properties":{"a":{}},"required":["b"]})", "'b'"},
      {R"({"if":{"type":"string"}})", "#/if"},
      {R"({"type":"array","items":{"type":"string","minLength":-1}})", "#/items/minLength"},
      {"{not json", "not valid JSON"},
      // Found by fuzz/json_schema_fuzz.cpp: a schema that is only a reference to itself gave `ref ::= ref`.
      {R"({"$defs":{"node":{"ty":{}}},"$ref":"#"})", "refers to itself without consuming input"},
      {R"({"$defs":{"a":{"$ref":"#/$defs/b"},"b":{"$ref":"#/$defs/a"}},"$ref":"#/$defs/a"})",
       "refers to itself without consuming input"},
  };
  // Also found by the fuzzer: nesting overflowed the converter's stack. It is bounded (64) and refused.
  std::string deep_pattern = R"({"type":"string","pattern":"^)";
  for (int i = 0; i < 2000; ++i) deep_pattern += "(";
  deep_pattern += "a";
  for (int i = 0; i < 2000; ++i) deep_pattern += ")";
  deep_pattern += R"($"})";
  std::string deep_schema;
  for (int i = 0; i < 2000; ++i) deep_schema += R"({"type":"array","items":)";
  deep_schema += "{}";
  for (int i = 0; i < 2000; ++i) deep_schema += "}";
  for (const auto& [schema, needle] : std::vector<std::pair<std::string, const char*>>{
           {deep_pattern, "nested deeper than 64"}, {deep_schema, "nested deeper than 64"}}) {
    auto r = json_schema::to_grammar(schema);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status().message();
  }
  for (const auto& [schema, needle] : refused) {
    auto r = json_schema::to_grammar(schema);
    ASSERT_FALSE(r.ok()) << schema;
    EXPECT_NE(r.status().message().find(needle), std::string::npos)
        << schema << " -> " << r.status().message();
  }
}

TEST(JsonSchema, PrintsLlamaCppStyleRules) {
  auto r =
      json_schema::to_grammar(R"({"type":"object","properties":{"a":{"type":"boolean"}},"required":["a"]})");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_NE(r->find("root ::= \"{\" space a-kv \"}\" space"), std::string::npos) << *r;
  EXPECT_NE(r->find("a-kv ::= \"\\\"a\\\"\" space \":\" space boolean"), std::string::npos) << *r;
  EXPECT_NE(r->find("space ::= | \" \" | \"\\n\"{1,2} [ \\t]{0,20}"), std::string::npos) << *r;
}

}  // namespace
}  // namespace minfer::sampling
