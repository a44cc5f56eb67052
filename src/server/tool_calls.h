// Tool calls in model output, in the syntax of the model's family, turned into OpenAI tool calls:
//   kHermes  (Qwen2.5/Qwen3, Hermes): `<tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>` blocks,
//            anywhere in the answer, any number;
//   kLlama3  (Llama 3.1/3.2/3.3): the answer IS the call: `{"name": ..., "parameters": {...}}` (several may
//            follow, separated by whitespace or `;`), or `<|python_tag|>` then such an object or a built-in
//            tool call `brave_search.call(query="...")`;
//   kMistral (Mistral v0.3, Nemo): `[TOOL_CALLS] [{"name": ..., "arguments": {...}}, ...]` after optional
//            content; ids are 9 alphanumerics, the only ids the Mistral template accepts back.
// The format comes from the model's chat template (detect_tool_call_format), never from the request.
// ToolCallParser works on streamed text (a marker split across tokens is held back, never emitted as
// content); a call that does not parse stays in the content, so text is never lost. tool_call_grammar()
// builds the GBNF that forces a well-formed call for tool_choice "required" or a named function.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace minfer::server {

enum class ToolCallFormat {
  kNone,     // the template shows no tool-call syntax: output is never parsed, forcing a call is refused
  kHermes,   // <tool_call> blocks (Qwen)
  kLlama3,   // bare JSON / <|python_tag|> (Llama 3.x)
  kMistral,  // [TOOL_CALLS] JSON array (Mistral)
};

// "none", "hermes", "llama3", "mistral".
std::string_view tool_call_format_name(ToolCallFormat format);

// The syntax a chat template teaches its model, from the template text: `[TOOL_CALLS]` → Mistral;
// `<|python_tag|>` or an `ipython` header → Llama 3; `<tool_call>`, or else ChatML turns (`<|im_start|>`,
// the Hermes family's format) → Hermes; otherwise kNone (Gemma 3, DeepSeek R1's own tool syntax).
ToolCallFormat detect_tool_call_format(std::string_view chat_template);

struct ToolCall {
  std::string id;  // "call_<hex>" (Mistral: 9 alphanumerics), unique per response
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
  explicit ToolCallParser(ToolCallFormat format = ToolCallFormat::kHermes) : format_(format) {}
  Output push(std::string_view text);
  // End of generation: releases what was held (an unterminated call becomes content).
  Output flush();
  int32_t n_calls() const { return n_calls_; }

 private:
  enum class State {
    kText,    // plain content (Hermes / Mistral: scanning for the marker)
    kCall,    // Hermes: inside <tool_call>; Mistral: after [TOOL_CALLS], inside the array
    kStart,   // Llama 3: nothing but whitespace seen yet (or after a call)
    kJson,    // Llama 3: inside a bare JSON object
    kPython,  // Llama 3: after <|python_tag|>, up to the end
  };
  void emit_text(std::string_view text, Output* out);
  void push_hermes(Output* out);
  void push_llama3(Output* out);
  void push_mistral(Output* out);
  void flush_llama3(Output* out);
  void add_call(ToolCall call, Output* out);
  // Llama 3 / Mistral: scans buffer_ from scan_ for the end of the JSON value that starts at buffer_[start_];
  // true when it closed (its end is then scan_).
  bool scan_json_value();

  ToolCallFormat format_;
  State state_ = State::kText;
  bool started_ = false;    // Llama 3: state_ initialised to kStart
  std::string buffer_;      // text not decided yet (a partial marker, a call being collected)
  std::string held_space_;  // trailing whitespace of the content, released when more content follows
  std::string call_space_;  // the whitespace that preceded a call's marker
  size_t start_ = 0, scan_ = 0;  // JSON scanning state over buffer_
  int depth_ = 0;
  bool in_string_ = false, escape_ = false;
  int32_t n_calls_ = 0;
};

// Parses one call object ({"name": ..., "arguments"|"parameters": ...}); false when it is not a call.
bool parse_tool_call_body(std::string_view body, ToolCall* call);

// A fresh "call_" id (random, 24 hex digits).
std::string make_tool_call_id();
// A fresh Mistral id: 9 characters of [a-zA-Z0-9].
std::string make_mistral_tool_call_id();

// GBNF forcing one call (or several when `parallel`, where the family has a syntax for several) in the
// model's syntax, from the tools' parameter schemas. `only` limits it to one function name.
//   kHermes:  `<tool_call>\n{"name": ..., "arguments": ...}\n</tool_call>` (blocks joined by "\n")
//   kLlama3:  `{"name": ..., "parameters": ...}` (always one: the Llama 3 templates refuse several)
//   kMistral: `[TOOL_CALLS] [{"name": ..., "arguments": ...}, ...]`
// Errors: a tool without a name, an unknown `only`, an unsupported schema keyword (named with its path),
// kNone (the model's template has no tool-call syntax to force).
Result<std::string> tool_call_grammar(const nlohmann::ordered_json& tools, const std::string& only, bool parallel,
                                      ToolCallFormat format = ToolCallFormat::kHermes);

}  // namespace minfer::server
