// GBNF parsing: every construct of the language with accept/reject strings, the reported errors
// (undefined rule, missing root, left recursion, syntax with line:col), unused-rule warnings, printing.
#include <gtest/gtest.h>

#include "sampling/grammar/grammar.h"
#include "sampling/grammar/matcher.h"

namespace minfer::sampling::grammar {
namespace {

std::shared_ptr<const Grammar> must_parse(const std::string& text) {
  auto g = Grammar::parse(text);
  EXPECT_TRUE(g.ok()) << g.status().message() << "\n" << text;
  return g.ok() ? *g : nullptr;
}

void check(const std::string& gbnf, const std::vector<std::string>& accept,
           const std::vector<std::string>& reject) {
  auto g = must_parse(gbnf);
  ASSERT_TRUE(g);
  for (const std::string& s : accept)
    EXPECT_TRUE(grammar_accepts(g, s)) << "should accept '" << s << "' with\n" << gbnf;
  for (const std::string& s : reject)
    EXPECT_FALSE(grammar_accepts(g, s)) << "should reject '" << s << "' with\n" << gbnf;
  // The printed grammar is GBNF again and means the same.
  auto again = Grammar::parse(g->to_gbnf());
  ASSERT_TRUE(again.ok()) << again.status().message() << "\n" << g->to_gbnf();
  for (const std::string& s : accept)
    EXPECT_TRUE(grammar_accepts(*again, s)) << "printed grammar lost '" << s << "'";
  for (const std::string& s : reject)
    EXPECT_FALSE(grammar_accepts(*again, s)) << "printed grammar took '" << s << "'";
}

void expect_error(const std::string& gbnf, const std::string& needle) {
  auto g = Grammar::parse(gbnf);
  ASSERT_FALSE(g.ok()) << "expected an error for\n" << gbnf;
  EXPECT_NE(g.status().message().find(needle), std::string::npos) << g.status().message();
}

TEST(Gbnf, LiteralsAndEscapes) {
  check(R"(root ::= "a\n\t\"\\\x41\u00e9\U0001F600")", {"a\n\t\"\\A\xC3\xA9\xF0\x9F\x98\x80"},
        {"a", "a\n\t\"\\A"});
  check(R"(root ::= "hello" " " "world")", {"hello world"}, {"hello", "helloworld", "hello world!"});
  check("root ::= \"caf\xC3\xA9\"", {"caf\xC3\xA9"}, {"cafe", "caf\xC3"});
}

TEST(Gbnf, CharacterClasses) {
  check("root ::= [a-cx]", {"a", "b", "c", "x"}, {"d", "", "ab", "X"});
  check("root ::= [^a-c\\n]", {"d", "Z", "\xC3\xA9"}, {"a", "c", "\n", ""});
  check("root ::= [\\]\\-]", {"]", "-"}, {"\\", "a"});
  check("root ::= [\\x00-\\x1F]", {"\x01", "\x1F"}, {" "});
  check("root ::= .", {"a", "\xE4\xB8\x80", "\n"}, {"", "ab"});
  check("root ::= [\\u4e00-\\u9fff]+", {"\xE4\xB8\x80\xE9\xBE\xA5"}, {"a", "\xE4\xB8"});
}

TEST(Gbnf, GroupingAlternationRepetition) {
  check("root ::= (\"a\" | \"bc\")* \"d\"", {"d", "ad", "bcad", "aaabcd"}, {"", "b", "bd", "da"});
  check("root ::= \"x\"+", {"x", "xxx"}, {"", "xy"});
  check("root ::= \"x\"?", {"", "x"}, {"xx"});
  check("root ::= \"ab\"{3}", {"ababab"}, {"abab", "abababab"});
  check("root ::= [0-9]{2,}", {"12", "12345"}, {"1", ""});
  check("root ::= [0-9]{1,3}", {"1", "12", "123"}, {"", "1234"});
  check("root ::= [0-9]{0,2} \"!\"", {"!", "1!", "12!"}, {"123!"});
  check("root ::= (\"a\" [0-9]){2}", {"a1a2"}, {"a1", "a1a2a3"});
}

TEST(Gbnf, CommentsNewlinesAndRuleReferences) {
  check(R"(# leading comment
root ::= greeting " " name  # trailing comment
greeting ::= "hi" | "hello"
name ::= [A-Z] [a-z]*

# inner comment
)",
        {"hi Bob", "hello Al"}, {"hi bob", "hey Bob"});
  check("root ::= (\n  \"a\"\n  | \"b\"\n)", {"a", "b"}, {"ab"});
  check("root ::= \"a\"\r\nother ::= \"b\"\r\n", {"a"}, {"b"});
}

TEST(Gbnf, RecursionThatIsNotLeftRecursion) {
  check("root ::= \"(\" root \")\" | \"x\"", {"x", "(x)", "((x))"}, {"(x", "()", "(x))"});
}

TEST(Gbnf, ReportsErrors) {
  expect_error("root ::= foo", "undefined rule 'foo'");
  expect_error("rot ::= \"a\"", "no 'root' rule");
  expect_error("root ::= root \"a\" | \"b\"", "left recursion in rule 'root'");
  expect_error("root ::= a\na ::= b \"x\"\nb ::= a | \"y\"", "left recursion");
  expect_error("root ::= e a\ne ::= \"\" | \"q\"\na ::= e a \"x\" | \"y\"",
               "left recursion");  // through nullable e
  expect_error("root ::= \"a\\q\"", "unknown escape");
  expect_error("root ::= \"abc", "end of input");
  expect_error("root ::= [abc", "end of input");
  expect_error("root ::= \"a\"{3,1}", "n < m");
  expect_error("root = \"a\"", "expecting ::=");
  expect_error("root ::= \"a\"\nroot ::= \"b\"", "defined twice");
  expect_error("root ::= \"a\" )", "expecting newline or end");
  expect_error("root ::= *", "preceding item");
  expect_error("root ::= [z-a]", "below its lower bound");
  // Syntax errors carry the position.
  expect_error("root ::= \"a\"\nfoo ::= \"b\\z\"", "line 2 col");
  // Group nesting is bounded (the parser recurses per group; 2000 levels overflowed a fuzzer's stack).
  expect_error("root ::= " + std::string(2000, '(') + "\"a\"" + std::string(2000, ')'),
               "nested deeper than 64");
}

TEST(Gbnf, RepetitionExpansionIsBounded) {
  // Each bound is legal, but stacked or applied to a long item they would copy 1e8 elements (gigabytes):
  // refused by name before anything is copied.
  expect_error("root ::= item\nitem ::= \"ab\"{10000}{10000}",
               "rule 'item': repetitions expand to more than 1000000 grammar elements");
  expect_error("root ::= \"" + std::string(500, 'x') + "\"{0,10000}", "rule 'root'");
  // Groups are rule references, so nesting them stays linear and parses.
  std::string ab;
  for (int i = 0; i < 1000; ++i) ab += "ab";
  check("root ::= ((\"ab\"){10}){100}", {ab}, {"ab", ab + "ab"});
}

TEST(Gbnf, WarnsAboutUnusedRules) {
  auto g = must_parse("root ::= \"a\"\nlonely ::= \"b\"");
  ASSERT_TRUE(g);
  ASSERT_EQ(g->warnings().size(), 1u);
  EXPECT_NE(g->warnings()[0].find("'lonely' is never used"), std::string::npos);
}

}  // namespace
}  // namespace minfer::sampling::grammar
