// Qwen tool calls: the model writes `<tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>` and the
// server turns each block into an OpenAI tool call. ToolCallParser works on streamed text (a marker split
// across tokens is held back, never emitted as content); a block that does not parse stays in the content,
// so text is never lost. tool_call_grammar() builds the GBNF that forces a well-formed call for
// tool_choice "required" or a named function, from the tools' parameter schemas.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace minfer::server {

struct ToolCall {
  std::string id;  // "call_<hex>", unique per response
  std::string name;
  std::string arguments;  // a JSON object as text (OpenAI sends arguments as a string)
};

// Feeds content text, splits it into plain content and complete tool calls. Whitespace next to a call is
// dropped (it is template glue); every other byte ends up in content or in a call.
class ToolCallParser {
 public:
  struct Output {
    std::string content;
    std::vector<ToolCall> calls;
  };
  Output push(std::string_view text);
  // End of generation: releases what was held (an unterminated block becomes content).
  Output flush();
  int32_t n_calls() const { return n_calls_; }

 private:
  void emit_text(std::string_view text, Output* out);
  enum class State { kText, kCall };
  State state_ = State::kText;
  std::string buffer_;      // kText: a possible partial "<tool_call>"; kCall: the block's body so far
  std::string held_space_;  // trailing whitespace of the content, released when more content follows
  std::string call_space_;  // kCall: the whitespace that preceded the open tag
  int32_t n_calls_ = 0;
};

// Parses one block body ({"name": ..., "arguments": ...}); false when it is not a call.
bool parse_tool_call_body(std::string_view body, ToolCall* call);

// A fresh "call_" id (random, 24 hex digits).
std::string make_tool_call_id();

// GBNF forcing `<tool_call>\n{"name": "<one of names>", "arguments": <that tool's parameters>}\n</tool_call>`
// (one block, or several separated by newlines when `parallel`). `only` limits it to one function name.
// Errors: a tool without a name, an unknown `only`, an unsupported schema keyword (named with its path).
Result<std::string> tool_call_grammar(const nlohmann::ordered_json& tools, const std::string& only,
                                      bool parallel);

}  // namespace minfer::server
