// Tool calls in the Llama 3 and Mistral syntaxes: the format is read from the published templates, the
// parser splits real output shapes (fed whole and at every chunking), the forcing grammar accepts exactly
// the family's syntax, and what the grammar forces parses back into calls the template accepts again.
#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "chat/chat_template.h"
#include "common/fixtures.h"
#include "sampling/grammar/grammar.h"
#include "sampling/grammar/matcher.h"
#include "server/openai_response.h"
#include "server/tool_calls.h"

namespace minfer::server {
namespace {

using json = nlohmann::ordered_json;

std::string reference_template(const std::string& name) {
  std::ifstream f(std::string(MINFER_CHAT_REFERENCES) + "/templates/" + name, std::ios::binary);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

struct Split {
  std::string content;
  std::vector<ToolCall> calls;
};

Split run(ToolCallFormat format, const std::string& text, size_t step) {
  ChoiceAssembler a(/*reasoning=*/false, false, /*tools=*/true, format);
  Split s;
  auto take = [&](Delta d) {
    s.content += d.content;
    for (auto& c : d.calls) s.calls.push_back(c);
  };
  for (size_t i = 0; i < text.size(); i += step) take(a.push(text.substr(i, step)));
  take(a.finish());
  return s;
}

// Every chunking (1..7 bytes and whole) gives the same split.
Split split(ToolCallFormat format, const std::string& text) {
  Split whole = run(format, text, text.size() + 1);
  for (size_t step = 1; step <= 7; ++step) {
    Split s = run(format, text, step);
    EXPECT_EQ(s.content, whole.content) << "step " << step;
    EXPECT_EQ(s.calls.size(), whole.calls.size()) << "step " << step;
    for (size_t i = 0; i < std::min(s.calls.size(), whole.calls.size()); ++i) {
      EXPECT_EQ(s.calls[i].name, whole.calls[i].name);
      EXPECT_EQ(s.calls[i].arguments, whole.calls[i].arguments);
    }
  }
  return whole;
}

const json kTools = json::parse(R"([
  {"type":"function","function":{"name":"get_weather","parameters":{"type":"object",
    "properties":{"city":{"type":"string"}},"required":["city"],"additionalProperties":false}}},
  {"type":"function","function":{"name":"noop","parameters":{}}}])");

TEST(ToolFormat, ReadFromThePublishedTemplates) {
  EXPECT_EQ(detect_tool_call_format(reference_template("meta-llama-Llama-3.1-8B-Instruct.jinja")),
            ToolCallFormat::kLlama3);
  EXPECT_EQ(detect_tool_call_format(reference_template("meta-llama-Llama-3.2-3B-Instruct.jinja")),
            ToolCallFormat::kLlama3);
  EXPECT_EQ(detect_tool_call_format(reference_template("mistralai-Mistral-7B-Instruct-v0.3.jinja")),
            ToolCallFormat::kMistral);
  EXPECT_EQ(detect_tool_call_format(reference_template("google-gemma-3-it.jinja")), ToolCallFormat::kNone);
  EXPECT_EQ(detect_tool_call_format("{{ '<tool_call>' }}"), ToolCallFormat::kHermes);
  // A ChatML template without tool markup (minfer's fallback, make-model's) keeps the Hermes convention.
  EXPECT_EQ(detect_tool_call_format(chat::ChatTemplate::chatml().source()), ToolCallFormat::kHermes);
  EXPECT_EQ(detect_tool_call_format("{{ 'plain' }}"), ToolCallFormat::kNone);
  EXPECT_EQ(tool_call_format_name(ToolCallFormat::kMistral), "mistral");
}

// The Qwen fixture templates keep the Hermes syntax; DeepSeek R1's own `<｜tool▁calls▁begin｜>` syntax is not
// one we parse, so its template counts as having none.
TEST(ToolFormat, FixtureTemplates) {
  MINFER_REQUIRE_FIXTURES();
  for (const char* file : {"Qwen-Qwen2.5-7B-Instruct.jinja", "Qwen-Qwen3-0.6B.jinja", "Qwen-QwQ-32B.jinja"}) {
    SCOPED_TRACE(file);
    EXPECT_EQ(detect_tool_call_format(minfer::test::read_file(minfer::test::fixture_path(std::string("chat/templates/") + file))),
              ToolCallFormat::kHermes);
  }
  EXPECT_EQ(detect_tool_call_format(minfer::test::read_file(
                minfer::test::fixture_path("chat/templates/deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja"))),
            ToolCallFormat::kNone);
}

TEST(Llama3Calls, TheAnswerIsOneJsonCall) {
  // Llama 3.1/3.2 with custom tools answer {"name": ..., "parameters": ...} and end with <|eot_id|>.
  Split s = split(ToolCallFormat::kLlama3,
                  "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\", \"unit\": \"celsius\"}}");
  EXPECT_EQ(s.content, "");
  ASSERT_EQ(s.calls.size(), 1u);
  EXPECT_EQ(s.calls[0].name, "get_weather");
  EXPECT_EQ(json::parse(s.calls[0].arguments), json::parse(R"({"city":"Paris","unit":"celsius"})"));
  EXPECT_EQ(s.calls[0].id.rfind("call_", 0), 0u);
  // llama.cpp also takes a leading "type": "function" and "arguments"; whitespace around is glue.
  s = split(ToolCallFormat::kLlama3, "\n {\"type\": \"function\", \"name\": \"noop\", \"arguments\": {}}\n");
  EXPECT_EQ(s.content, "");
  ASSERT_EQ(s.calls.size(), 1u);
  EXPECT_EQ(s.calls[0].arguments, "{}");
}

TEST(Llama3Calls, SeveralCallsSeparatedBySemicolons) {
  Split s = split(ToolCallFormat::kLlama3,
                  "{\"name\": \"a\", \"parameters\": {\"s\": \"}{;\\\"\"}}; {\"name\": \"b\", \"parameters\": {}}");
  ASSERT_EQ(s.calls.size(), 2u);
  EXPECT_EQ(s.calls[0].name, "a");
  EXPECT_EQ(json::parse(s.calls[0].arguments)["s"], "}{;\"");
  EXPECT_EQ(s.calls[1].name, "b");
  EXPECT_EQ(s.content, "");
}

TEST(Llama3Calls, PythonTagJsonAndBuiltinTools) {
  Split s = split(ToolCallFormat::kLlama3,
                  "<|python_tag|>{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\"}}");
  ASSERT_EQ(s.calls.size(), 1u);
  EXPECT_EQ(s.calls[0].name, "get_weather");
  EXPECT_EQ(s.content, "");
  // Llama 3.1's built-in tools, as its template renders them back (builtin-tools-python-tag case).
  s = split(ToolCallFormat::kLlama3, "<|python_tag|>brave_search.call(query=\"weather in Paris, FR\", n=3)");
  ASSERT_EQ(s.calls.size(), 1u);
  EXPECT_EQ(s.calls[0].name, "brave_search");
  EXPECT_EQ(json::parse(s.calls[0].arguments), json::parse(R"({"query":"weather in Paris, FR","n":3})"));
  // Raw code for code_interpreter is no call we can name: it stays text, tag included.
  s = split(ToolCallFormat::kLlama3, "<|python_tag|>print(1 + 1)");
  EXPECT_TRUE(s.calls.empty());
  EXPECT_EQ(s.content, "<|python_tag|>print(1 + 1)");
}

TEST(Llama3Calls, AnswersThatAreNotCallsStayContent) {
  for (const std::string& text :
       {std::string("The weather is {\"fine\"}."), std::string("  {\"answer\": 4, \"unit\": null}"),
        std::string("{\"name\": \"Bob\", \"age\": 3}"), std::string("{\"name\": \"f\", \"parameters\": {"),
        std::string("<|python"), std::string("Sure. {\"name\": \"noop\", \"parameters\": {}}"),
        std::string("   ")}) {
    SCOPED_TRACE(text);
    Split s = split(ToolCallFormat::kLlama3, text);
    EXPECT_TRUE(s.calls.empty());
    EXPECT_EQ(s.content, text);
  }
}

TEST(MistralCalls, ContentThenAnArrayOfCalls) {
  // Mistral v0.3's shape, as its template renders an assistant tool-call turn.
  Split s = split(ToolCallFormat::kMistral,
                  "Let me look.[TOOL_CALLS] [{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}, "
                  "{\"name\": \"noop\", \"arguments\": {}, \"id\": \"abcDEF123\"}]");
  EXPECT_EQ(s.content, "Let me look.");
  ASSERT_EQ(s.calls.size(), 2u);
  EXPECT_EQ(s.calls[0].name, "get_weather");
  EXPECT_EQ(json::parse(s.calls[0].arguments), json::parse(R"({"city":"Paris"})"));
  EXPECT_EQ(s.calls[1].name, "noop");
  for (const auto& c : s.calls) {
    ASSERT_EQ(c.id.size(), 9u) << c.id;  // the Mistral template refuses any other id when it comes back
    for (char ch : c.id) EXPECT_TRUE(std::isalnum(static_cast<unsigned char>(ch))) << c.id;
  }
  EXPECT_NE(s.calls[0].id, s.calls[1].id);
}

TEST(MistralCalls, WhatIsNotACallArrayStaysContent) {
  for (const std::string& text :
       {std::string("[TOOL_CALLS] not an array"), std::string("x [TOOL_CALLS] [{\"no\": 1}] y"),
        std::string("[TOOL_CALLS] [{\"name\": \"f\", \"argu"), std::string("ends with [TOOL_CA"),
        std::string("[INST] is not [TOOL] either")}) {
    SCOPED_TRACE(text);
    Split s = split(ToolCallFormat::kMistral, text);
    EXPECT_TRUE(s.calls.empty());
    EXPECT_EQ(s.content, text);
  }
}

TEST(ToolFormat, NoneParsesNothingAndForcesNothing) {
  const std::string out = "<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n</tool_call>";
  Split s = split(ToolCallFormat::kNone, out);
  EXPECT_EQ(s.content, out);
  EXPECT_TRUE(s.calls.empty());
  auto g = tool_call_grammar(kTools, "", false, ToolCallFormat::kNone);
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("no tool-call syntax"), std::string::npos) << g.status().message();
}

// The grammar accepts exactly the family's syntax; what it accepts parses back to the call.
void expect_grammar(ToolCallFormat format, bool parallel, const std::vector<std::string>& good,
                    const std::vector<std::string>& bad) {
  auto g = tool_call_grammar(kTools, "", parallel, format);
  ASSERT_TRUE(g.ok()) << g.status().message();
  auto grammar = sampling::grammar::Grammar::parse(*g);
  ASSERT_TRUE(grammar.ok()) << grammar.status().message() << "\n" << *g;
  for (const auto& text : good) {
    EXPECT_TRUE(sampling::grammar::grammar_accepts(*grammar, text)) << text << "\n" << *g;
    Split s = split(format, text);
    EXPECT_FALSE(s.calls.empty()) << text;
    EXPECT_EQ(s.content, "") << text;
  }
  for (const auto& text : bad) EXPECT_FALSE(sampling::grammar::grammar_accepts(*grammar, text)) << text;
}

TEST(ToolGrammar, Llama3ForcesOneBareObject) {
  const std::string call = "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\"}}";
  expect_grammar(ToolCallFormat::kLlama3, /*parallel=*/true, {call, "{\"name\": \"noop\", \"parameters\": {}}"},
                 {"{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}",
                  "{\"name\": \"rm\", \"parameters\": {}}", call + "; " + call, "<tool_call>\n" + call, "hi"});
  auto named = tool_call_grammar(kTools, "noop", false, ToolCallFormat::kLlama3);
  ASSERT_TRUE(named.ok());
  EXPECT_EQ(named->find("get_weather"), std::string::npos);
}

TEST(ToolGrammar, MistralForcesTheToolCallsArray) {
  const std::string a = "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}";
  const std::string b = "{\"name\": \"noop\", \"arguments\": {}}";
  expect_grammar(ToolCallFormat::kMistral, false, {"[TOOL_CALLS] [" + a + "]"},
                 {"[TOOL_CALLS] [" + a + ", " + b + "]", "[TOOL_CALLS] []", a, "[TOOL_CALLS][" + a + "]"});
  expect_grammar(ToolCallFormat::kMistral, true, {"[TOOL_CALLS] [" + a + "]", "[TOOL_CALLS] [" + a + ", " + b + "]"},
                 {"[TOOL_CALLS] [" + a + "] [TOOL_CALLS] [" + b + "]"});
}

// A call parsed from the model's output goes back into the next prompt through the model's own template:
// the Mistral template accepts only 9-character ids, the Llama template only one call per turn.
TEST(ToolRoundTrip, ParsedCallsRenderThroughTheirTemplate) {
  struct Family {
    const char* file;
    ToolCallFormat format;
    std::string output;
  };
  const Family families[] = {
      {"mistralai-Mistral-7B-Instruct-v0.3.jinja", ToolCallFormat::kMistral,
       "[TOOL_CALLS] [{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}]"},
      {"meta-llama-Llama-3.1-8B-Instruct.jinja", ToolCallFormat::kLlama3,
       "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\"}}"},
      {"meta-llama-Llama-3.2-3B-Instruct.jinja", ToolCallFormat::kLlama3,
       "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\"}}"},
  };
  for (const auto& f : families) {
    SCOPED_TRACE(f.file);
    auto tmpl = chat::ChatTemplate::parse(reference_template(f.file));
    ASSERT_TRUE(tmpl.ok()) << tmpl.status().message();
    Split s = split(f.format, f.output);
    ASSERT_EQ(s.calls.size(), 1u);
    chat::ChatInputs in;
    in.tools = kTools;
    in.extra = {{"bos_token", "<s>"}, {"eos_token", "</s>"}};
    // As the server hands the client's follow-up to the template: arguments parsed back into an object.
    json call = {{"id", s.calls[0].id},
                 {"type", "function"},
                 {"function", {{"name", s.calls[0].name}, {"arguments", json::parse(s.calls[0].arguments)}}}};
    in.messages = json::array({{{"role", "user"}, {"content", "Weather in Oslo?"}},
                               {{"role", "assistant"}, {"tool_calls", json::array({call})}},
                               {{"role", "tool"}, {"tool_call_id", s.calls[0].id}, {"content", "21"}}});
    in.add_generation_prompt = true;
    auto text = tmpl->render(in);
    ASSERT_TRUE(text.ok()) << text.status().message();
    const std::string rendered_call =
        f.format == ToolCallFormat::kMistral
            ? "[TOOL_CALLS] [{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}, \"id\": \"" +
                  s.calls[0].id + "\"}]"
            : f.output;
    EXPECT_NE(text->find(rendered_call), std::string::npos) << *text;
  }
}

}  // namespace
}  // namespace minfer::server
