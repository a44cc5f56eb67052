// Untrusted templates: runaway loops, recursion, output bombs and deep nesting stop with kOutOfRange
// (or a parse error) instead of hanging or crashing; ChatTemplate's own API.
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "chat/chat_template.h"
#include "render_helpers.h"

namespace minfer::chat::jinja {
namespace {

using test::render;

std::string repeat(const std::string& s, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += s;
  return out;
}

TEST(JinjaLimits, RunawayLoopsStop) {
  auto r = render("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kOutOfRange) << r.status().message();
  EXPECT_NE(r.status().message().find("iterations"), std::string::npos) << r.status().message();

  RenderOptions options;
  options.max_loop_iterations = 100;
  r = render("{% for i in range(101) %}{% endfor %}", nlohmann::ordered_json::object(), options);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kOutOfRange);
  EXPECT_TRUE(render("{% for i in range(100) %}{% endfor %}", nlohmann::ordered_json::object(), options).ok());
  EXPECT_FALSE(render("{{ range(1000000) | length }}").ok());  // jinja2's sandbox caps range() too
}

TEST(JinjaLimits, RecursionStops) {
  auto r = render("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kOutOfRange) << r.status().message();
  // Bounded recursion is fine.
  EXPECT_EQ(test::out("{% macro f(n) %}{% if n > 0 %}{{ n }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(5) }}"), "54321");
}

TEST(JinjaLimits, OutputAndStringBombsStop) {
  RenderOptions options;
  options.max_output_bytes = 1000;
  auto r = render("{% for i in range(2000) %}ab{% endfor %}", nlohmann::ordered_json::object(), options);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kOutOfRange);
  r = render("{{ 'x' * 1000000000 }}");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kOutOfRange);
  r = render("{% set ns = namespace(s='ab') %}{% for i in range(100) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kOutOfRange);
}

TEST(JinjaLimits, MemoryBombsStopBeforeBuildingTheirResult) {
  RenderOptions options;
  options.max_output_bytes = 1 << 20;
  const char* bombs[] = {
      "{% set s = 'x' * 1000000 %}{{ [s] * 10000 }}",               // printing many references to one big string
      "{% set s = 'x' * 1000000 %}{{ ([s] * 10000) | tojson }}",
      "{% set s = 'x' * 1000000 %}{{ ([s] * 10000) | join }}",
      "{{ [0] * 100000000 }}",                                      // a list far longer than the bound
      "{% set s = 'x' * 1000000 %}{{ s | replace('', s) }}",         // replace() result sized before building
      "{% set s = 'x' * 1000000 %}{{ s.replace('x', s) }}",
      "{{ '%1000000000d' % 1 }}",                                   // printf width
      "{% set s = 'x' * 1000000 %}{% for c in s %}{% endfor %}",     // iterating a huge string
      "{{ range(100000) | list | tojson(indent=100) }}",
  };
  for (const char* src : bombs) {
    auto r = render(src, nlohmann::ordered_json::object(), options);
    ASSERT_FALSE(r.ok()) << src;
    EXPECT_EQ(r.status().code(), StatusCode::kOutOfRange) << src << ": " << r.status().message();
  }
}

TEST(JinjaLimits, DeepNestingIsAnErrorNotAStackOverflow) {
  for (const std::string& src : {"{{ " + repeat("(", 5000) + "1" + repeat(")", 5000) + " }}",
                                 "{{ " + repeat("[", 5000) + repeat("]", 5000) + " }}",
                                 "{{ " + repeat("-", 5000) + "1 }}", "{{ " + repeat("not ", 5000) + "1 }}",
                                 repeat("{% if true %}", 3000) + repeat("{% endif %}", 3000),
                                 "{{ x" + repeat(".a", 5000) + " }}", "{{ x" + repeat("|trim", 5000) + " }}"}) {
    auto t = Template::parse(src);
    EXPECT_FALSE(t.ok()) << src.substr(0, 40);
  }
  // A namespace that contains itself cannot be printed forever (and does not leak).
  auto r = render("{% set ns = namespace() %}{% set ns.self = ns %}{{ ns }}");
  EXPECT_FALSE(r.ok());
  // Lists nested through a namespace hit the container depth bound.
  r = render("{% set ns = namespace(l=[]) %}{% for i in range(1000) %}{% set ns.l = [ns.l] %}{% endfor %}{{ ns.l | length }}");
  EXPECT_FALSE(r.ok());
}

TEST(JinjaLimits, ErrorsNameTheTemplateLine) {
  auto r = render("a\n{% for m in messages %}\n{{ m.content + 1 }}\n{% endfor %}", {{"messages", {{{"content", "x"}}}}});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("template line 3"), std::string::npos) << r.status().message();
}

TEST(ChatTemplateApi, ChatMlFallbackAndVariables) {
  ChatInputs in;
  in.messages = nlohmann::ordered_json::parse(R"([{"role": "system", "content": "S"}, {"role": "user", "content": "Hi"}])");
  in.add_generation_prompt = true;
  auto r = ChatTemplate::chatml().render(in);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(*r, "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");

  auto t = ChatTemplate::parse(
      "{{ bos_token }}{{ tools is none }}{{ documents is none }}{{ enable_thinking }}{{ messages | length }}"
      "{{ add_generation_prompt }}{{ custom.k }}");
  ASSERT_TRUE(t.ok()) << t.status().message();
  in.extra = {{"bos_token", "<s>"}, {"enable_thinking", false}, {"custom", {{"k", 7}}}};
  ChatTemplate copy = *t;  // copies share the parsed template
  r = copy.render(in);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(*r, "<s>TrueTrueFalse2True7");

  in.tools = nlohmann::ordered_json::parse(R"([{"type": "function"}])");
  r = ChatTemplate::parse("{{ tools | tojson }}")->render(in);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, R"([{"type": "function"}])");
}

TEST(ChatTemplateApi, ConcurrentRendersOfOneTemplateAgree) {
  auto t = ChatTemplate::parse(
      "{%- set ns = namespace(n=0) %}{%- macro tag(r) %}<{{ r | upper }}>{% endmacro %}"
      "{%- for m in messages %}{% set ns.n = ns.n + 1 %}{{ tag(m.role) }}{{ m.content | tojson }}{{ ns.n }}\n{% endfor %}");
  ASSERT_TRUE(t.ok()) << t.status().message();
  ChatInputs in;
  for (int i = 0; i < 20; ++i) in.messages.push_back({{"role", i % 2 ? "assistant" : "user"}, {"content", std::to_string(i)}});
  const Result<std::string> want = t->render(in);
  ASSERT_TRUE(want.ok()) << want.status().message();
  std::vector<std::thread> threads;
  std::vector<int> mismatches(4, 0);
  for (size_t k = 0; k < mismatches.size(); ++k) {
    threads.emplace_back([&, k] {
      const ChatTemplate copy = *t;
      for (int rep = 0; rep < 50; ++rep) {
        auto got = copy.render(in);
        if (!got.ok() || *got != *want) ++mismatches[k];
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int m : mismatches) EXPECT_EQ(m, 0);
}

TEST(ChatTemplateApi, UnsupportedConstructIsRefusedAtParseWithItsLine) {
  auto t = ChatTemplate::parse("{%- for m in messages %}\n{{- m.content.splitlines2() }}\n{%- endfor %}");
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), StatusCode::kUnsupported);
  EXPECT_NE(t.status().message().find("splitlines2"), std::string::npos) << t.status().message();
  EXPECT_NE(t.status().message().find("line 2"), std::string::npos) << t.status().message();
}

}  // namespace
}  // namespace minfer::chat::jinja
