// Chat prompt rendering: a model's own Jinja chat template applied to messages the way Hugging Face
// transformers' apply_chat_template does (trim_blocks + lstrip_blocks), byte for byte.
// Does not tokenize and does not read GGUF; callers pass the template source and special tokens.
#pragma once

#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "chat/jinja/template.h"
#include "core/status.h"

namespace minfer::chat {

// What a template sees: `messages`, `tools`, `add_generation_prompt`, `documents` (None), plus every
// key of `extra` as a top-level variable (bos_token, eos_token, enable_thinking, --var ...).
struct ChatInputs {
  // [{role, content (string or list of parts), reasoning_content?, tool_calls?, tool_call_id?, name?}]
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  nlohmann::ordered_json tools;  // null when absent (the template sees None)
  bool add_generation_prompt = false;
  nlohmann::ordered_json extra = nlohmann::ordered_json::object();
};

// A parsed, validated chat template. Copies share one immutable AST; render() is thread-safe.
//
//   MINFER_ASSIGN_OR_RETURN(auto tmpl, chat::ChatTemplate::parse(source));   // at model load
//   chat::ChatInputs in;
//   in.messages = {{{"role", "user"}, {"content", "Hi"}}};
//   in.add_generation_prompt = true;
//   MINFER_ASSIGN_OR_RETURN(std::string prompt, tmpl.render(in));
class ChatTemplate {
 public:
  // Parses and validates once: a syntax error or an unsupported construct (tag, filter, test, method)
  // is kInvalidArgument / kUnsupported naming the construct and its template line. Cost: linear in the source.
  static Result<ChatTemplate> parse(std::string source);
  // Generic ChatML (<|im_start|>role\ncontent<|im_end|>\n), only for a GGUF without a template.
  static ChatTemplate chatml();

  // Renders with the default bounds (jinja::RenderOptions). Fails with the template's error
  // (raise_exception, undefined access, type errors) or kOutOfRange when a bound is hit.
  Result<std::string> render(const ChatInputs& inputs) const;
  Result<std::string> render(const ChatInputs& inputs, const jinja::RenderOptions& options) const;

  const std::string& source() const { return template_.source(); }

 private:
  explicit ChatTemplate(jinja::Template t) : template_(std::move(t)) {}
  jinja::Template template_;
};

}  // namespace minfer::chat
