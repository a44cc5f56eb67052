// OpenAI response shapes: one ChoiceAssembler per choice turns generated text into deltas (reasoning,
// content, tool calls) through the same state machines whether the answer streams or not, so joined
// deltas always equal the non-streamed message. Builders produce chat.completion(.chunk) and
// text_completion JSON, usage and logprobs.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/batcher.h"
#include "server/api_error.h"
#include "server/reasoning.h"
#include "server/tool_calls.h"

namespace minfer::tokenizer {
class Tokenizer;
}

namespace minfer::server {

struct Delta {
  std::string reasoning;
  std::string content;
  std::vector<ToolCall> calls;
  bool empty() const { return reasoning.empty() && content.empty() && calls.empty(); }
};

class ChoiceAssembler {
 public:
  // reasoning: split a leading <think> block; starts_in_think: the prompt opened it; tools: parse calls
  // in `format`, the model's syntax (detect_tool_call_format of its template; kNone parses nothing).
  ChoiceAssembler(bool reasoning, bool starts_in_think, bool tools,
                  ToolCallFormat format = ToolCallFormat::kHermes);
  Delta push(std::string_view text);
  Delta finish();  // end of generation: what was held back

  // Everything produced so far (the non-streamed message).
  const std::string& reasoning() const { return reasoning_; }
  const std::string& content() const { return content_; }
  const std::vector<ToolCall>& calls() const { return calls_; }

 private:
  void absorb(ReasoningSplitter::Output r, bool final, Delta* d);
  ReasoningSplitter splitter_;
  ToolCallParser tools_;
  bool parse_tools_;
  std::string reasoning_, content_;
  std::vector<ToolCall> calls_;
};

// OpenAI finish_reason for a batcher reason: "length" stays, "stop" is "stop", and any parsed tool call
// makes it "tool_calls" ("grammar" never gets here: grammar_dead_end).
std::string finish_reason(const std::string& batcher_reason, bool has_tool_calls);

// A choice the batcher ended because its grammar allowed no further token (reason "grammar"): the answer
// is cut short of what the grammar promised, so every API reports it as a 400 naming the dead end, never
// as a successful answer. nullopt for a kDone with any other reason.
std::optional<ApiError> grammar_dead_end(const engine::BatchEvent& done);

nlohmann::ordered_json usage_json(const engine::BatchUsage& usage);
nlohmann::ordered_json tool_calls_json(const std::vector<ToolCall>& calls, int32_t first_index,
                                       bool with_index);

// One token's chat logprobs entry: {token, logprob, bytes, top_logprobs:[{token, logprob, bytes}]}.
nlohmann::ordered_json chat_logprob_entry(const engine::BatchEvent& ev, const tokenizer::Tokenizer& tok);

// "chatcmpl-<hex>" / "cmpl-<hex>".
std::string make_response_id(const char* prefix);

}  // namespace minfer::server
