// Tool-call extraction from Qwen output and the GBNF that forces a call (see tool_calls.h).
#include "server/tool_calls.h"

#include <atomic>
#include <chrono>
#include <random>

#include <fmt/format.h>

#include "sampling/json_schema/to_grammar.h"
#include "server/tag_scan.h"

namespace minfer::server {
namespace {

constexpr std::string_view kOpen = "<tool_call>";
constexpr std::string_view kClose = "</tool_call>";

}  // namespace

std::string make_tool_call_id() {
  static std::atomic<uint64_t> counter{0};
  static const uint64_t base =
      std::random_device{}() ^
      static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  std::mt19937_64 rng(base + counter.fetch_add(1) * 0x9E3779B97F4A7C15ull);
  return fmt::format("call_{:016x}{:08x}", rng(), static_cast<uint32_t>(rng()));
}

bool parse_tool_call_body(std::string_view body, ToolCall* call) {
  auto j = nlohmann::ordered_json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return false;
  auto name = j.find("name");
  if (name == j.end() || !name->is_string() || name->get<std::string>().empty()) return false;
  auto args = j.find("arguments");
  if (args == j.end()) args = j.find("parameters");
  std::string arguments = "{}";
  if (args != j.end()) {
    if (args->is_string()) {
      arguments = args->get<std::string>();
    } else if (args->is_object()) {
      arguments = args->dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
    } else {
      return false;
    }
  }
  call->name = name->get<std::string>();
  call->arguments = std::move(arguments);
  call->id = make_tool_call_id();
  return true;
}

void ToolCallParser::emit_text(std::string_view text, Output* out) {
  size_t end = text.size();
  while (end > 0 && is_space(text[end - 1])) --end;
  if (end == 0) {
    held_space_.append(text);
    return;
  }
  out->content += held_space_;
  held_space_.clear();
  out->content.append(text.substr(0, end));
  held_space_.assign(text.substr(end));
}

ToolCallParser::Output ToolCallParser::push(std::string_view text) {
  Output out;
  buffer_.append(text);
  for (;;) {
    if (state_ == State::kText) {
      const size_t open = buffer_.find(kOpen);
      if (open == std::string::npos) {
        const size_t keep = partial_tag_suffix(buffer_, kOpen);
        emit_text(std::string_view(buffer_).substr(0, buffer_.size() - keep), &out);
        buffer_.erase(0, buffer_.size() - keep);
        return out;
      }
      emit_text(std::string_view(buffer_).substr(0, open), &out);
      call_space_ = std::move(held_space_);  // glue before a call, unless the block turns out not to be one
      held_space_.clear();
      buffer_.erase(0, open + kOpen.size());
      state_ = State::kCall;
    }
    const size_t close = buffer_.find(kClose);
    if (close == std::string::npos) return out;
    const std::string body = buffer_.substr(0, close);
    ToolCall call;
    if (parse_tool_call_body(body, &call)) {
      out.calls.push_back(std::move(call));
      ++n_calls_;
    } else {
      held_space_ = call_space_ + held_space_;
      emit_text(std::string(kOpen) + body + std::string(kClose), &out);
    }
    call_space_.clear();
    buffer_.erase(0, close + kClose.size());
    state_ = State::kText;
  }
}

ToolCallParser::Output ToolCallParser::flush() {
  Output out;
  if (state_ == State::kCall) {
    out.content += call_space_;
    out.content += std::string(kOpen) + buffer_;
    call_space_.clear();
  } else {
    std::string rest = held_space_ + buffer_;
    // Trailing whitespace after a call is glue; text (even whitespace) with no call is kept.
    if (n_calls_ == 0 || rest.find_first_not_of(" \n\r\t") != std::string::npos)
      out.content = std::move(rest);
  }
  held_space_.clear();
  buffer_.clear();
  state_ = State::kText;
  return out;
}

Result<std::string> tool_call_grammar(const nlohmann::ordered_json& tools, const std::string& only,
                                      bool parallel) {
  if (!tools.is_array() || tools.empty()) return invalid_argument("tools: a non-empty array is required");
  nlohmann::ordered_json variants = nlohmann::ordered_json::array();
  for (size_t i = 0; i < tools.size(); ++i) {
    const auto& fn = tools[i].contains("function") ? tools[i]["function"] : tools[i];
    if (!fn.is_object() || !fn.contains("name") || !fn["name"].is_string())
      return invalid_argument("tools[{}].function.name: a string is required", i);
    const std::string name = fn["name"].get<std::string>();
    if (!only.empty() && name != only) continue;
    nlohmann::ordered_json params = {{"type", "object"}};
    if (fn.contains("parameters") && fn["parameters"].is_object() && !fn["parameters"].empty())
      params = fn["parameters"];
    variants.push_back({{"type", "object"},
                        {"properties", {{"name", {{"const", name}}}, {"arguments", params}}},
                        {"required", {"name", "arguments"}},
                        {"additionalProperties", false}});
  }
  if (variants.empty()) return invalid_argument("tool_choice: no tool named '{}'", only);
  nlohmann::ordered_json schema =
      variants.size() == 1 ? variants[0] : nlohmann::ordered_json{{"anyOf", variants}};
  auto gbnf = sampling::json_schema::to_grammar_from_json(schema);
  if (!gbnf.ok()) return gbnf.status().with_context("tools: ");
  // The schema's root becomes `tool-call-json`; our root wraps it in Qwen's tags.
  std::string text = *gbnf;
  const size_t at = text.rfind("root ::=", 0) == 0 ? 0 : text.find("\nroot ::=");
  if (at == std::string::npos) return Status(StatusCode::kInternal, "tools: schema grammar has no root rule");
  text.replace(at == 0 ? 0 : at + 1, 4, "tool-call-json");
  std::string root = "root ::= tool-call-block";
  if (parallel) root += " (\"\\n\" tool-call-block)*";
  return fmt::format("{}\ntool-call-block ::= \"<tool_call>\\n\" tool-call-json \"\\n</tool_call>\"\n{}",
                     root, text);
}

}  // namespace minfer::server
