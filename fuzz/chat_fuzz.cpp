// libFuzzer target: chat template parse + render on arbitrary bytes must return a Status or a
// rendering within the bounds, never crash, hang past the bounds or leak.
#include <cstddef>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "chat/jinja/template.h"

namespace {

// A conversation exercising what chat templates look at: roles, tool calls, tool results, tools.
const minfer::chat::jinja::Value& context() {
  static const minfer::chat::jinja::Value ctx = minfer::chat::jinja::Value::from_json(nlohmann::ordered_json::parse(R"({
    "messages": [
      {"role": "system", "content": "You are helpful."},
      {"role": "user", "content": "Weather in Paris? <think>x</think>"},
      {"role": "assistant", "content": "", "reasoning_content": "r",
       "tool_calls": [{"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
      {"role": "tool", "content": "{\"t\": 18}", "tool_call_id": "c1"},
      {"role": "assistant", "content": "<think>\nhmm\n</think>\n\nIt is 18\u00b0C."},
      {"role": "user", "content": [{"type": "text", "text": "thanks"}]}
    ],
    "tools": [{"type": "function", "function": {"name": "get_weather", "description": "d",
               "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}],
    "add_generation_prompt": true, "enable_thinking": false, "documents": null,
    "bos_token": "<s>", "eos_token": "</s>"
  })"));
  return ctx;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > (size_t{1} << 16)) return 0;
  auto tmpl = minfer::chat::jinja::Template::parse(std::string(reinterpret_cast<const char*>(data), size));
  if (!tmpl.ok()) return 0;
  minfer::chat::jinja::RenderOptions options;
  options.max_output_bytes = size_t{1} << 16;  // small bounds keep each input fast
  options.max_loop_iterations = 20000;
  options.max_macro_depth = 16;
  options.max_nesting = 200;
  options.now_unix = 0;
  auto rendered = tmpl->render(context(), options);
  if (rendered.ok() && rendered->size() > options.max_output_bytes) __builtin_trap();
  return 0;
}
