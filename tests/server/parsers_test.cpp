// Tool-call and reasoning parsers on real Qwen output shapes, fed whole and split at every byte, so the
// streamed split always equals the non-streamed one.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "sampling/grammar/grammar.h"
#include "sampling/grammar/matcher.h"
#include "server/openai_response.h"
#include "server/reasoning.h"
#include "server/tool_calls.h"

namespace minfer::server {
namespace {

struct Split {
  std::string reasoning, content;
  std::vector<ToolCall> calls;
};

// Feeds `text` in pieces of `step` bytes through a ChoiceAssembler and joins the deltas.
Split run(const std::string& text, size_t step, bool reasoning = true, bool think = false,
          bool tools = true) {
  ChoiceAssembler a(reasoning, think, tools);
  Split s;
  auto take = [&](Delta d) {
    s.reasoning += d.reasoning;
    s.content += d.content;
    for (auto& c : d.calls) s.calls.push_back(c);
  };
  for (size_t i = 0; i < text.size(); i += step) take(a.push(text.substr(i, step)));
  take(a.finish());
  EXPECT_EQ(s.reasoning, a.reasoning());
  EXPECT_EQ(s.content, a.content());
  EXPECT_EQ(s.calls.size(), a.calls().size());
  return s;
}

// Every chunking gives the same split as the whole text.
Split run_all_chunkings(const std::string& text, bool reasoning = true, bool think = false,
                        bool tools = true) {
  Split whole = run(text, text.size() + 1, reasoning, think, tools);
  for (size_t step = 1; step <= 7; ++step) {
    Split s = run(text, step, reasoning, think, tools);
    EXPECT_EQ(s.reasoning, whole.reasoning) << "step " << step;
    EXPECT_EQ(s.content, whole.content) << "step " << step;
    EXPECT_EQ(s.calls.size(), whole.calls.size()) << "step " << step;
    for (size_t i = 0; i < std::min(s.calls.size(), whole.calls.size()); ++i) {
      EXPECT_EQ(s.calls[i].name, whole.calls[i].name);
      EXPECT_EQ(s.calls[i].arguments, whole.calls[i].arguments);
    }
  }
  return whole;
}

TEST(ToolCalls, QwenSingleCall) {
  // Qwen2.5-7B-Instruct's shape: content, then a block with a JSON object on its own line.
  const std::string out =
      "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", "
      "\"unit\": "
      "\"celsius\"}}\n</tool_call>";
  Split s = run_all_chunkings(out);
  EXPECT_EQ(s.content, "Let me check.");
  ASSERT_EQ(s.calls.size(), 1u);
  EXPECT_EQ(s.calls[0].name, "get_weather");
  EXPECT_EQ(nlohmann::json::parse(s.calls[0].arguments),
            nlohmann::json::parse(R"({"city":"Paris","unit":"celsius"})"));
  EXPECT_EQ(s.calls[0].id.rfind("call_", 0), 0u);
}

TEST(ToolCalls, ParallelCallsAndNoContent) {
  const std::string out =
      "<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n</tool_call>\n<tool_call>\n{\"name\": \"b\", "
      "\"arguments\": {\"x\": [1, 2]}}\n</tool_call>\n";
  Split s = run_all_chunkings(out);
  EXPECT_EQ(s.content, "");
  ASSERT_EQ(s.calls.size(), 2u);
  EXPECT_EQ(s.calls[0].name, "a");
  EXPECT_EQ(s.calls[0].arguments, "{}");
  EXPECT_EQ(s.calls[1].name, "b");
  EXPECT_NE(s.calls[0].id, s.calls[1].id);
}

TEST(ToolCalls, MalformedBlockStaysInContent) {
  const std::string out = "x <tool_call>\n{not json}\n</tool_call> y";
  Split s = run_all_chunkings(out);
  EXPECT_TRUE(s.calls.empty());
  EXPECT_EQ(s.content, out);
}

TEST(ToolCalls, UnterminatedBlockIsContentAtTheEnd) {
  const std::string out = "a <tool_call>\n{\"name\": \"f\", \"argu";
  Split s = run_all_chunkings(out);
  EXPECT_TRUE(s.calls.empty());
  EXPECT_EQ(s.content, out);
}

TEST(ToolCalls, TextThatLooksLikeATagPrefixIsNotLost) {
  Split s = run_all_chunkings("a <tool and <tool_c but no call");
  EXPECT_EQ(s.content, "a <tool and <tool_c but no call");
  s = run_all_chunkings("ends with <tool_");
  EXPECT_EQ(s.content, "ends with <tool_");
}

TEST(ToolCalls, WithoutToolsEverythingIsContent) {
  const std::string out = "<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n</tool_call>";
  Split s = run_all_chunkings(out, true, false, /*tools=*/false);
  EXPECT_EQ(s.content, out);
  EXPECT_TRUE(s.calls.empty());
}

TEST(ToolCalls, ArgumentsAsStringAreKept) {
  ToolCall c;
  ASSERT_TRUE(parse_tool_call_body("{\"name\": \"f\", \"arguments\": \"{\\\"a\\\":1}\"}", &c));
  EXPECT_EQ(c.arguments, "{\"a\":1}");
  EXPECT_FALSE(parse_tool_call_body("{\"arguments\": {}}", &c));
  EXPECT_FALSE(parse_tool_call_body("[1]", &c));
}

TEST(Reasoning, Qwen3ThinkBlock) {
  // Qwen3's shape: <think>\n...\n</think>\n\n then the answer.
  const std::string out =
      "<think>\nThe user greets me. I should greet back.\n</think>\n\nHello! How can I help?";
  Split s = run_all_chunkings(out, true, false, false);
  EXPECT_EQ(s.reasoning, "\nThe user greets me. I should greet back.\n");
  EXPECT_EQ(s.content, "Hello! How can I help?");
}

TEST(Reasoning, NoneFormatKeepsTheBlockInContent) {
  const std::string out = "<think>\nhm\n</think>\n\nHi";
  Split s = run_all_chunkings(out, /*reasoning=*/false, false, false);
  EXPECT_EQ(s.reasoning, "");
  EXPECT_EQ(s.content, out);
}

TEST(Reasoning, OnlyALeadingBlockCounts) {
  Split s = run_all_chunkings("Answer first <think>x</think> tail", true, false, false);
  EXPECT_EQ(s.reasoning, "");
  EXPECT_EQ(s.content, "Answer first <think>x</think> tail");
  s = run_all_chunkings("  <thin", true, false, false);  // ends undecided: released as content
  EXPECT_EQ(s.content, "  <thin");
}

TEST(Reasoning, UnterminatedBlockIsStillReasoning) {
  Split s = run_all_chunkings("<think>still thinking </thi", true, false, false);
  EXPECT_EQ(s.reasoning, "still thinking </thi");
  EXPECT_EQ(s.content, "");
}

TEST(Reasoning, PromptThatOpenedTheBlock) {
  // DeepSeek-R1 / QwQ templates end the prompt with "<think>\n": the output starts inside the block.
  EXPECT_TRUE(prompt_opens_think("<|im_start|>assistant\n<think>\n"));
  EXPECT_FALSE(prompt_opens_think("<|im_start|>assistant\n"));
  Split s = run_all_chunkings("plan\n</think>\n\nanswer", true, /*think=*/true, false);
  EXPECT_EQ(s.reasoning, "plan\n");
  EXPECT_EQ(s.content, "answer");
}

TEST(Reasoning, ThinkThenToolCall) {
  const std::string out =
      "<think>\nI need the weather.\n</think>\n\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
      "{\"city\": \"Oslo\"}}\n</tool_call>";
  Split s = run_all_chunkings(out);
  EXPECT_EQ(s.reasoning, "\nI need the weather.\n");
  EXPECT_EQ(s.content, "");
  ASSERT_EQ(s.calls.size(), 1u);
  EXPECT_EQ(s.calls[0].name, "get_weather");
}

TEST(Reasoning, Utf8IsNeverSplit) {
  // Multi-byte characters around the tags: the splitter cuts only at ASCII tag boundaries.
  const std::string out = "<think>é日本</think>ü€";
  ChoiceAssembler a(true, false, false);
  std::string reasoning, content;
  // Feed whole characters (the batcher only emits complete UTF-8).
  for (const char* piece : {"<think>", "é", "日", "本", "</", "think>", "ü", "€"}) {
    Delta d = a.push(piece);
    reasoning += d.reasoning;
    content += d.content;
  }
  Delta d = a.finish();
  reasoning += d.reasoning;
  content += d.content;
  EXPECT_EQ(reasoning, "é日本");
  EXPECT_EQ(content, "ü€");
}

TEST(ToolGrammar, WrapsTheParameterSchemaInQwenTags) {
  const auto tools = nlohmann::ordered_json::parse(R"([
    {"type":"function","function":{"name":"get_weather","parameters":{"type":"object",
      "properties":{"city":{"type":"string"}},"required":["city"]}}},
    {"type":"function","function":{"name":"noop"}}])");
  auto g = tool_call_grammar(tools, "", false);
  ASSERT_TRUE(g.ok()) << g.status().message();
  EXPECT_EQ(g->rfind("root ::= tool-call-block\n", 0), 0u) << *g;
  EXPECT_NE(g->find("\\\"get_weather\\\""), std::string::npos) << *g;
  EXPECT_NE(g->find("\\\"noop\\\""), std::string::npos) << *g;
  EXPECT_NE(g->find("tool-call-json ::="), std::string::npos) << *g;
  EXPECT_EQ(g->find("\nroot ::="), std::string::npos) << *g;  // exactly one root
  auto named = tool_call_grammar(tools, "noop", false);
  ASSERT_TRUE(named.ok());
  EXPECT_EQ(named->find("get_weather"), std::string::npos);
  EXPECT_FALSE(tool_call_grammar(tools, "missing", false).ok());
  auto par = tool_call_grammar(tools, "", true);
  ASSERT_TRUE(par.ok());
  EXPECT_NE(par->find("(\"\\n\" tool-call-block)*"), std::string::npos);
}

TEST(ToolGrammar, AcceptsExactlyWellFormedCallsOfTheAllowedTools) {
  const auto tools = nlohmann::ordered_json::parse(R"([
    {"type":"function","function":{"name":"get_weather","parameters":{"type":"object",
      "properties":{"city":{"type":"string"}},"required":["city"],"additionalProperties":false}}},
    {"type":"function","function":{"name":"noop","parameters":{}}}])");
  auto g = tool_call_grammar(tools, "", false);
  ASSERT_TRUE(g.ok());
  auto grammar = sampling::grammar::Grammar::parse(*g);
  ASSERT_TRUE(grammar.ok()) << grammar.status().message() << "\n" << *g;
  using sampling::grammar::grammar_accepts;
  const std::string call =
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>";
  EXPECT_TRUE(grammar_accepts(*grammar, call));
  EXPECT_TRUE(
      grammar_accepts(*grammar, "<tool_call>\n{\"name\": \"noop\", \"arguments\": {}}\n</tool_call>"));
  EXPECT_FALSE(grammar_accepts(*grammar, "<tool_call>\n{\"name\": \"rm\", \"arguments\": {}}\n</tool_call>"));
  EXPECT_FALSE(
      grammar_accepts(*grammar, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {}}\n</tool_call>"));
  EXPECT_FALSE(grammar_accepts(*grammar, "hello"));
  EXPECT_FALSE(grammar_accepts(*grammar, call + "\n" + call));  // one call unless parallel
  auto par = sampling::grammar::Grammar::parse(*tool_call_grammar(tools, "", true));
  ASSERT_TRUE(par.ok());
  EXPECT_TRUE(grammar_accepts(*par, call + "\n" + call));
  // What the grammar accepts, the parser turns into a call.
  Split s = run_all_chunkings(call);
  ASSERT_EQ(s.calls.size(), 1u);
  EXPECT_EQ(s.calls[0].name, "get_weather");
}

TEST(ToolGrammar, UnsupportedSchemaKeywordIsNamedWithItsPath) {
  const auto tools = nlohmann::ordered_json::parse(R"([{"type":"function","function":{"name":"f",
      "parameters":{"type":"object","properties":{"n":{"type":"number","multipleOf":3}}}}}])");
  auto g = tool_call_grammar(tools, "", false);
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("multipleOf"), std::string::npos) << g.status().message();
}

TEST(FinishReason, Mapping) {
  EXPECT_EQ(finish_reason("stop", false), "stop");
  EXPECT_EQ(finish_reason("grammar", false), "stop");
  EXPECT_EQ(finish_reason("length", false), "length");
  EXPECT_EQ(finish_reason("stop", true), "tool_calls");
}

}  // namespace
}  // namespace minfer::server
