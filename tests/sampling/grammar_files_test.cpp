// The grammars llama.cpp ships (json, arithmetic, list, chess, c, english, japanese; copies in data/)
// parse, and accept / reject hand-written strings.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "sampling/grammar/grammar.h"
#include "sampling/grammar/matcher.h"

namespace minfer::sampling::grammar {
namespace {

std::shared_ptr<const Grammar> load(const std::string& name) {
  std::ifstream in(std::string(MINFER_SAMPLING_TEST_DATA) + "/" + name, std::ios::binary);
  EXPECT_TRUE(in.good()) << name;
  std::stringstream ss;
  ss << in.rdbuf();
  auto g = Grammar::parse(ss.str());
  EXPECT_TRUE(g.ok()) << name << ": " << g.status().message();
  return g.ok() ? *g : nullptr;
}

struct Case {
  const char* file;
  std::vector<std::string> accept;
  std::vector<std::string> reject;
};

class ShippedGrammar : public ::testing::TestWithParam<Case> {};

TEST_P(ShippedGrammar, AcceptsAndRejects) {
  const Case& c = GetParam();
  auto g = load(c.file);
  ASSERT_TRUE(g);
  EXPECT_TRUE(g->warnings().empty()) << g->warnings().front();
  for (const std::string& s : c.accept)
    EXPECT_TRUE(grammar_accepts(g, s)) << c.file << " should accept:\n" << s;
  for (const std::string& s : c.reject)
    EXPECT_FALSE(grammar_accepts(g, s)) << c.file << " should reject:\n" << s;
}

INSTANTIATE_TEST_SUITE_P(
    LlamaCpp, ShippedGrammar,
    ::testing::Values(
        Case{"json.gbnf",
             {R"({})", R"({"a": 1})", R"({"a":[1, 2.5, -3e12, "x\n\u00e9", true, false, null, {}]})",
              "{\n  \"key\": \"caf\xC3\xA9 \xF0\x9F\x98\x80\",\n  \"n\": {\"m\": []}\n}",
              R"({"a": -0.5E+3 } )"},
             {R"([])", R"({"a" 1})", R"({"a": 01x})", R"({'a': 1})", R"({"a": tru})", "{\"a\": \"\x01\"}",
              R"({"a": "\q"})", R"({"a": 1,})", R"({"a": 1} x)"}},
        Case{"arithmetic.gbnf",
             {"1+2=3\n", "(a +b) *c = d\n", "x=1\ny=(2/3)\n", "foo_1 -2=bar\n"},
             {"1+2=3", "=3\n", "1++2=3\n", "A=1\n", "(1=2\n", "1 + 2=3\n"}},
        Case{"list.gbnf",
             {"- a\n", "- one\n- two items\n", "- caf\xC3\xA9\n"},
             {"- a", "-a\n", "- \n", "", "* a\n", "- \xE2\x80\xA8x\n" /* U+2028 is excluded */}},
        Case{"chess.gbnf",
             {"1. e4 e5\n2. Nf3 Nc6\n", "1. d4 d5\n2. c4 dxc4\n3. O-O O-O-O\n", "1. e8=Q+ Kxe8#\n2. a3 a6\n"},
             {"1. e4 e5\n", "1. e9 e5\n2. a3 a6\n", "1. e4\n2. e5 e6\n", "1. Ze4 e5\n2. a3 a6\n"}},
        Case{"c.gbnf",
             {"int main(){return 0;}", "float f(int x){y = x*2+1;while(y<3){y = y+1;}}",
              "char g(){// note\n/* block */if(a==b){c = -d;}else{e (f, g);}}",
              "int a(){for(int i = 0; i<10; i = i+1){}}int b(){}"},
             {"int main() {return 0;}", "main(){}", "int f(){return 0}", "int f(){x = ;}", "int f(){e(x);}"}},
        Case{"english.gbnf",
             {"Hello, world!", "a b\tc\nd", "It's 42 (ok)."},
             {"", "caf\xC3\xA9", " leading", "two  spaces"}},
        Case{"japanese.gbnf",
             {"\xE3\x81\x93\xE3\x82\x93\xE3\x81\xAB\xE3\x81\xA1\xE3\x81\xAF",  // こんにちは
              "\xE3\x82\xAB\xE3\x82\xBF\xE3\x82\xAB\xE3\x83\x8A "
              "\xE6\xBC\xA2\xE5\xAD\x97\xE3\x80\x82"},  // カタカナ 漢字。
             {"hello", "\xE3\x81\x93 ", "\xE3\x81", ""}}),
    [](const ::testing::TestParamInfo<Case>& param_info) {
      std::string n = param_info.param.file;
      return n.substr(0, n.find('.'));
    });

}  // namespace
}  // namespace minfer::sampling::grammar
