// ChatTemplate: builds the variables transformers' apply_chat_template passes and renders.
#include "chat/chat_template.h"

#include "chat/jinja/error.h"
#include "core/check.h"

namespace minfer::chat {
namespace {

// Generic ChatML, used only for a model without a template of its own.
constexpr const char* kChatMlSource =
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}";

}  // namespace

Result<ChatTemplate> ChatTemplate::parse(std::string source) {
  MINFER_ASSIGN_OR_RETURN(jinja::Template t, jinja::Template::parse(std::move(source)));
  return ChatTemplate(std::move(t));
}

ChatTemplate ChatTemplate::chatml() {
  auto t = jinja::Template::parse(kChatMlSource);
  MINFER_CHECK(t.ok(), "built-in ChatML template does not parse: {}", t.status().message());
  return ChatTemplate(std::move(t).value());
}

Result<std::string> ChatTemplate::render(const ChatInputs& inputs) const { return render(inputs, jinja::RenderOptions{}); }

Result<std::string> ChatTemplate::render(const ChatInputs& inputs, const jinja::RenderOptions& options) const {
  if (!inputs.messages.is_array()) return invalid_argument("chat: messages must be a JSON array");
  if (!inputs.tools.is_null() && !inputs.tools.is_array()) return invalid_argument("chat: tools must be a JSON array or null");
  if (!inputs.extra.is_object()) return invalid_argument("chat: extra variables must be a JSON object");
  jinja::Value context;
  try {
    std::vector<std::pair<jinja::Value, jinja::Value>> vars;
    vars.emplace_back(jinja::Value("messages"), jinja::Value::from_json(inputs.messages));
    vars.emplace_back(jinja::Value("tools"), jinja::Value::from_json(inputs.tools));
    vars.emplace_back(jinja::Value("documents"), jinja::Value::none());
    vars.emplace_back(jinja::Value("add_generation_prompt"), jinja::Value(inputs.add_generation_prompt));
    for (auto it = inputs.extra.begin(); it != inputs.extra.end(); ++it) {
      jinja::Value key(it.key());
      jinja::Value value = jinja::Value::from_json(it.value());
      bool replaced = false;
      for (auto& [k, v] : vars) {
        if (k.str() == it.key()) {
          v = value;
          replaced = true;
        }
      }
      if (!replaced) vars.emplace_back(std::move(key), std::move(value));
    }
    context = jinja::Value::dict(std::move(vars));
  } catch (const jinja::TemplateError& e) {
    return Status(e.code, fmt::format("chat: {}", e.message));
  }
  return template_.render(context, options);
}

}  // namespace minfer::chat
