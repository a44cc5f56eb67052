// Lexing and parsing: whitespace control (trim_blocks, lstrip_blocks, -/+ modifiers), comments, raw,
// literals, and syntax errors that name the construct and the line. Expectations follow jinja2 3.1's
// documented behaviour with trim_blocks=True and lstrip_blocks=True.
#include <gtest/gtest.h>

#include "chat/jinja/template.h"
#include "render_helpers.h"

namespace minfer::chat::jinja {
namespace {

using test::out;
using test::render;

TEST(JinjaWhitespace, TrimBlocksRemovesTheNewlineAfterABlockTag) {
  EXPECT_EQ(out("{% if true %}\nA{% endif %}\nB"), "AB");
  // Only one newline goes, and only after block tags, not after {{ }}.
  EXPECT_EQ(out("{% if true %}\n\nA{% endif %}"), "\nA");
  EXPECT_EQ(out("{{ 'x' }}\ny"), "x\ny");
}

TEST(JinjaWhitespace, LstripBlocksRemovesIndentBeforeABlockTag) {
  EXPECT_EQ(out("  {% if true %}x{% endif %}"), "x");
  EXPECT_EQ(out("a\n    {% if true %}\n    b\n    {% endif %}\nc"), "a\n    b\nc");
  // Not before variables, and not when other text precedes the tag on its line.
  EXPECT_EQ(out("  {{ 'x' }}"), "  x");
  EXPECT_EQ(out("a {% if true %}b{% endif %}"), "a b");
  // {%+ disables lstrip for that tag.
  EXPECT_EQ(out("  {%+ if true %}x{% endif %}"), "  x");
}

TEST(JinjaWhitespace, MinusModifiersStripAllWhitespaceIncludingNewlines) {
  EXPECT_EQ(out("a  \n {{- 'b' -}}  \n c"), "abc");
  EXPECT_EQ(out("a\n\n{%- if true -%}\n\n b {%- endif %}"), "ab");
  EXPECT_EQ(out("x {#- comment -#} y"), "xy");
}

TEST(JinjaWhitespace, CommentsAreDroppedAndTrimmedLikeBlocks) {
  EXPECT_EQ(out("{# a comment #}\nx"), "x");
  EXPECT_EQ(out("a{# multi\nline #}b"), "ab");
  EXPECT_EQ(out("    {# indented #}\nx"), "x");
}

TEST(JinjaWhitespace, RawBlocksAreLiteral) {
  EXPECT_EQ(out("{% raw %}{{ x }}{% if %}{% endraw %}"), "{{ x }}{% if %}");
}

TEST(JinjaWhitespace, NewlinesAreNormalizedAndOneTrailingNewlineDropped) {
  EXPECT_EQ(out("a\n"), "a");
  EXPECT_EQ(out("a\n\n"), "a\n");
  EXPECT_EQ(out("a\r\nb\rc"), "a\nb\nc");
}

TEST(JinjaLiterals, StringsNumbersAndContainers) {
  EXPECT_EQ(out(R"({{ 'a\nb' }})"), "a\nb");
  EXPECT_EQ(out(R"({{ "tab\there" }})"), "tab\there");
  EXPECT_EQ(out(R"({{ "\u00e9\x41" }})"), "\xc3\xa9" "A");
  EXPECT_EQ(out(R"({{ 'it\'s' }})"), "it's");
  EXPECT_EQ(out("{{ 'a' 'b' }}"), "ab");
  EXPECT_EQ(out("{{ 1_000 }}"), "1000");
  EXPECT_EQ(out("{{ 2.5e3 }}"), "2500.0");
  EXPECT_EQ(out("{{ [1, 'a', none, true, false] }}"), "[1, 'a', None, True, False]");
  EXPECT_EQ(out("{{ {'a': 1, 'b': [2]} }}"), "{'a': 1, 'b': [2]}");
  EXPECT_EQ(out("{{ (1,) }} {{ (1, 2) }} {{ () }}"), "(1,) (1, 2) ()");
  EXPECT_EQ(out("{{ 1, 2 }}"), "(1, 2)");
  EXPECT_EQ(out("{{ True }} {{ None }}"), "True None");
}

TEST(JinjaPrecedence, OperatorsBindLikeJinja2) {
  EXPECT_EQ(out("{{ 1 + 2 * 3 }}"), "7");
  EXPECT_EQ(out("{{ (1 + 2) * 3 }}"), "9");
  EXPECT_EQ(out("{{ 2 ** 3 ** 2 }}"), "64");  // jinja2's ** is left-associative
  EXPECT_EQ(out("{{ -2 ** 2 }}"), "4");       // unary minus binds tighter than ** in jinja2
  EXPECT_EQ(out("{{ 'a' ~ 1 * 2 }}"), "a2");   // * binds tighter than ~
  EXPECT_FALSE(render("{{ 'a' ~ 1 + 2 }}").ok());  // ~ binds tighter than +: ('a' ~ 1) + 2 is str + int
  EXPECT_EQ(out("{{ not false and false }}"), "False");
  EXPECT_EQ(out("{{ -3 | abs }}"), "3");  // the filter applies to -3
  EXPECT_EQ(out("{{ 'a' if false else 'b' ~ 'c' }}"), "bc");
  EXPECT_EQ(out("{{ not 1 is defined }}"), "False");
}

TEST(JinjaSyntaxErrors, NameTheConstructAndTheLine) {
  auto r = render("line1\nline2\n{% if %}");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("template line 3"), std::string::npos) << r.status().message();

  r = render("ok\n{% for x in y %}never closed");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("endfor"), std::string::npos) << r.status().message();

  r = render("{{ 'unterminated }}");
  EXPECT_FALSE(r.ok());
  r = render("{{ (1 }}");
  EXPECT_FALSE(r.ok());
  r = render("{% endif %}");
  EXPECT_FALSE(r.ok());
  r = render("{{ x | }}");
  EXPECT_FALSE(r.ok());
  r = render("{% break %}");
  EXPECT_FALSE(r.ok());
}

TEST(JinjaSyntaxErrors, UnsupportedConstructsAreRefusedAtParseTime) {
  struct Case {
    const char* source;
    const char* names;
    const char* line;
  };
  const Case cases[] = {
      {"a\n\n{% include 'other.jinja' %}", "include", "line 3"},
      {"{% extends 'base' %}", "extends", "line 1"},
      {"\n{{ x | frobnicate }}", "frobnicate", "line 2"},
      {"{{ x is frobnicated }}", "frobnicated", "line 1"},
      {"\n\n\n{{ 'abc'.zfill(5) }}", "zfill", "line 4"},
      {"{% for x in y recursive %}{% endfor %}", "recursive", "line 1"},
      {"{% do x.append(1) %}", "do", "line 1"},
  };
  for (const Case& c : cases) {
    auto t = Template::parse(c.source);
    ASSERT_FALSE(t.ok()) << c.source;
    EXPECT_EQ(t.status().code(), StatusCode::kUnsupported) << t.status().message();
    EXPECT_NE(t.status().message().find(c.names), std::string::npos) << t.status().message();
    EXPECT_NE(t.status().message().find(c.line), std::string::npos) << t.status().message();
  }
}

TEST(JinjaSyntaxErrors, InvalidUtf8SourceIsRefused) {
  EXPECT_FALSE(Template::parse("abc\xff").ok());
}

}  // namespace
}  // namespace minfer::chat::jinja
