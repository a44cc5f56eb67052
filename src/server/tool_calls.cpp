// Tool-call extraction in each family's syntax and the GBNF that forces a call (see tool_calls.h).
#include "server/tool_calls.h"

#include <atomic>
#include <cctype>
#include <chrono>
#include <random>

#include <fmt/format.h>

#include "sampling/json_schema/to_grammar.h"
#include "server/sse.h"
#include "server/tag_scan.h"

namespace minfer::server {
namespace {

constexpr std::string_view kOpen = "<tool_call>";
constexpr std::string_view kClose = "</tool_call>";
constexpr std::string_view kPythonTag = "<|python_tag|>";
constexpr std::string_view kToolCalls = "[TOOL_CALLS]";

uint64_t fresh_random() {
  static std::atomic<uint64_t> counter{0};
  static const uint64_t base =
      std::random_device{}() ^
      static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  std::mt19937_64 rng(base + counter.fetch_add(1) * 0x9E3779B97F4A7C15ull);
  return rng();
}

bool only_keys(const nlohmann::ordered_json& j, std::initializer_list<std::string_view> allowed) {
  for (auto it = j.begin(); it != j.end(); ++it) {
    bool ok = false;
    for (std::string_view a : allowed) ok = ok || it.key() == a;
    if (!ok) return false;
  }
  return true;
}

// Llama 3's bare-JSON call: {"name", "parameters"} (llama.cpp also takes "arguments" and a leading
// "type": "function"); anything else is a JSON answer, not a call.
bool parse_llama3_object(std::string_view text, ToolCall* call) {
  auto j = parse_json(text);
  if (j.is_discarded() || !j.is_object() || !only_keys(j, {"type", "name", "parameters", "arguments"}))
    return false;
  if (!j.contains("parameters") && !j.contains("arguments")) return false;
  if (j.contains("type") && j["type"] != "function") return false;
  return parse_tool_call_body(text, call);
}

// `name.call(key="value", n=3)`: Llama 3.1's built-in tools (brave_search, wolfram_alpha) after <|python_tag|>.
bool parse_builtin_call(std::string_view text, ToolCall* call) {
  auto trim = [](std::string_view s) {
    while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
    while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
    return s;
  };
  auto is_ident = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  text = trim(text);
  const size_t dot = text.find(".call(");
  if (dot == std::string_view::npos || dot == 0 || text.back() != ')') return false;
  const std::string_view name = text.substr(0, dot);
  for (char c : name) {
    if (!is_ident(c)) return false;
  }
  std::string_view args = text.substr(dot + 6, text.size() - dot - 7);
  nlohmann::ordered_json obj = nlohmann::ordered_json::object();
  while (!(args = trim(args)).empty()) {
    size_t k = 0;
    while (k < args.size() && is_ident(args[k])) ++k;
    if (k == 0) return false;
    const std::string key(args.substr(0, k));
    args = trim(args.substr(k));
    if (args.empty() || args.front() != '=') return false;
    args = trim(args.substr(1));
    // The value: a JSON literal (a quoted string, a number, true/false/null) up to the next top-level comma.
    size_t end = 0;
    bool in_str = false, esc = false;
    for (; end < args.size(); ++end) {
      const char c = args[end];
      if (in_str) {
        if (esc) esc = false;
        else if (c == '\\') esc = true;
        else if (c == '"') in_str = false;
      } else if (c == '"') {
        in_str = true;
      } else if (c == ',') {
        break;
      }
    }
    auto value = parse_json(trim(args.substr(0, end)));
    if (value.is_discarded() || value.is_structured()) return false;
    obj[key] = std::move(value);
    args = end < args.size() ? args.substr(end + 1) : std::string_view();
  }
  call->name = std::string(name);
  call->arguments = obj.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
  call->id = make_tool_call_id();
  return true;
}

// Mistral's `[{"name": ..., "arguments": ..., "id"?: ...}, ...]`: every item a call, or none is.
bool parse_mistral_array(std::string_view text, std::vector<ToolCall>* calls) {
  auto j = parse_json(text);
  if (j.is_discarded() || !j.is_array() || j.empty()) return false;
  std::vector<ToolCall> out;
  for (const auto& item : j) {
    ToolCall c;
    if (!item.is_object() || !only_keys(item, {"name", "arguments", "id"}) || !item.contains("arguments") ||
        !parse_tool_call_body(item.dump(), &c))
      return false;
    out.push_back(std::move(c));
  }
  *calls = std::move(out);
  return true;
}

}  // namespace

std::string_view tool_call_format_name(ToolCallFormat format) {
  switch (format) {
    case ToolCallFormat::kNone: return "none";
    case ToolCallFormat::kHermes: return "hermes";
    case ToolCallFormat::kLlama3: return "llama3";
    case ToolCallFormat::kMistral: return "mistral";
  }
  return "?";
}

ToolCallFormat detect_tool_call_format(std::string_view t) {
  if (t.find(kToolCalls) != std::string_view::npos) return ToolCallFormat::kMistral;
  if (t.find(kPythonTag) != std::string_view::npos ||
      (t.find("<|start_header_id|>") != std::string_view::npos && t.find("ipython") != std::string_view::npos))
    return ToolCallFormat::kLlama3;
  if (t.find(kOpen) != std::string_view::npos) return ToolCallFormat::kHermes;
  // A ChatML template without tool markup (the generic one minfer uses for a GGUF without a template, the
  // one `make-model` writes): Hermes is the tool convention of the ChatML family (Qwen, Hermes, QwQ).
  if (t.find("<|im_start|>") != std::string_view::npos) return ToolCallFormat::kHermes;
  return ToolCallFormat::kNone;
}

std::string make_tool_call_id() {
  return fmt::format("call_{:016x}{:08x}", fresh_random(), static_cast<uint32_t>(fresh_random()));
}

std::string make_mistral_tool_call_id() {
  static constexpr char kAlnum[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  uint64_t r = fresh_random();
  std::string id;
  for (int i = 0; i < 9; ++i, r /= 62) id += kAlnum[r % 62];
  return id;
}

bool parse_tool_call_body(std::string_view body, ToolCall* call) {
  auto j = parse_json(body);
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

void ToolCallParser::add_call(ToolCall call, Output* out) {
  if (format_ == ToolCallFormat::kMistral) call.id = make_mistral_tool_call_id();
  out->calls.push_back(std::move(call));
  ++n_calls_;
}

bool ToolCallParser::scan_json_value() {
  for (; scan_ < buffer_.size(); ++scan_) {
    const char c = buffer_[scan_];
    if (in_string_) {
      if (escape_) escape_ = false;
      else if (c == '\\') escape_ = true;
      else if (c == '"') in_string_ = false;
    } else if (c == '"') {
      in_string_ = true;
    } else if (c == '{' || c == '[') {
      ++depth_;
    } else if ((c == '}' || c == ']') && --depth_ == 0) {
      ++scan_;
      return true;
    }
  }
  return false;
}

ToolCallParser::Output ToolCallParser::push(std::string_view text) {
  Output out;
  buffer_.append(text);
  switch (format_) {
    case ToolCallFormat::kNone:
      out.content = std::move(buffer_);
      buffer_.clear();
      break;
    case ToolCallFormat::kHermes: push_hermes(&out); break;
    case ToolCallFormat::kLlama3: push_llama3(&out); break;
    case ToolCallFormat::kMistral: push_mistral(&out); break;
  }
  return out;
}

void ToolCallParser::push_hermes(Output* out) {
  for (;;) {
    if (state_ == State::kText) {
      const size_t open = buffer_.find(kOpen);
      if (open == std::string::npos) {
        const size_t keep = partial_tag_suffix(buffer_, kOpen);
        emit_text(std::string_view(buffer_).substr(0, buffer_.size() - keep), out);
        buffer_.erase(0, buffer_.size() - keep);
        return;
      }
      emit_text(std::string_view(buffer_).substr(0, open), out);
      call_space_ = std::move(held_space_);  // glue before a call, unless the block turns out not to be one
      held_space_.clear();
      buffer_.erase(0, open + kOpen.size());
      state_ = State::kCall;
    }
    const size_t close = buffer_.find(kClose);
    if (close == std::string::npos) return;
    const std::string body = buffer_.substr(0, close);
    ToolCall call;
    if (parse_tool_call_body(body, &call)) {
      add_call(std::move(call), out);
    } else {
      held_space_ = call_space_ + held_space_;
      emit_text(std::string(kOpen) + body + std::string(kClose), out);
    }
    call_space_.clear();
    buffer_.erase(0, close + kClose.size());
    state_ = State::kText;
  }
}

void ToolCallParser::push_llama3(Output* out) {
  if (!started_) {
    started_ = true;
    state_ = State::kStart;
  }
  for (;;) {
    switch (state_) {
      case State::kStart: {
        size_t i = 0;
        while (i < buffer_.size() && is_space(buffer_[i])) ++i;
        if (i == buffer_.size()) return;  // only whitespace so far
        const std::string_view rest = std::string_view(buffer_).substr(i);
        if (rest.starts_with(kPythonTag)) {
          call_space_ = buffer_.substr(0, i);
          buffer_.erase(0, i + kPythonTag.size());
          state_ = State::kPython;
          continue;
        }
        if (kPythonTag.starts_with(rest)) return;  // may still become the tag
        if (rest.front() == '{') {
          call_space_ = buffer_.substr(0, i);
          buffer_.erase(0, i);
          scan_ = 0;
          depth_ = 0;
          in_string_ = escape_ = false;
          state_ = State::kJson;
          continue;
        }
        if (n_calls_ > 0 && rest.front() == ';') {  // separator between calls
          buffer_.erase(0, i + 1);
          continue;
        }
        state_ = State::kText;  // an answer in words: never a call from here on
        continue;
      }
      case State::kJson: {
        if (!scan_json_value()) return;
        ToolCall call;
        if (parse_llama3_object(std::string_view(buffer_).substr(0, scan_), &call)) {
          buffer_.erase(0, scan_);
          call_space_.clear();
          add_call(std::move(call), out);
          state_ = State::kStart;
          continue;
        }
        buffer_.insert(0, call_space_);  // a JSON answer, not a call
        call_space_.clear();
        state_ = State::kText;
        continue;
      }
      case State::kPython:
        return;  // everything up to the end of generation is the call
      default:
        emit_text(buffer_, out);
        buffer_.clear();
        return;
    }
  }
}

void ToolCallParser::push_mistral(Output* out) {
  for (;;) {
    if (state_ == State::kText) {
      const size_t at = buffer_.find(kToolCalls);
      if (at == std::string::npos) {
        const size_t keep = partial_tag_suffix(buffer_, kToolCalls);
        emit_text(std::string_view(buffer_).substr(0, buffer_.size() - keep), out);
        buffer_.erase(0, buffer_.size() - keep);
        return;
      }
      emit_text(std::string_view(buffer_).substr(0, at), out);
      call_space_ = std::move(held_space_);
      held_space_.clear();
      buffer_.erase(0, at + kToolCalls.size());
      state_ = State::kCall;
      start_ = std::string::npos;
    }
    if (start_ == std::string::npos) {
      size_t i = 0;
      while (i < buffer_.size() && is_space(buffer_[i])) ++i;
      if (i == buffer_.size()) return;
      if (buffer_[i] != '[') {  // the marker without an array: plain text
        held_space_ = std::move(call_space_);
        call_space_.clear();
        emit_text(std::string(kToolCalls) + buffer_.substr(0, i), out);
        buffer_.erase(0, i);
        state_ = State::kText;
        continue;
      }
      start_ = scan_ = i;
      depth_ = 0;
      in_string_ = escape_ = false;
    }
    if (!scan_json_value()) return;
    std::vector<ToolCall> calls;
    if (parse_mistral_array(std::string_view(buffer_).substr(start_, scan_ - start_), &calls)) {
      for (auto& c : calls) add_call(std::move(c), out);
      call_space_.clear();
    } else {
      held_space_ = std::move(call_space_);
      call_space_.clear();
      emit_text(std::string(kToolCalls) + buffer_.substr(0, scan_), out);
    }
    buffer_.erase(0, scan_);
    state_ = State::kText;
  }
}

void ToolCallParser::flush_llama3(Output* out) {
  switch (state_) {
    case State::kPython: {
      ToolCall call;
      if (parse_llama3_object(buffer_, &call) || parse_builtin_call(buffer_, &call)) {
        add_call(std::move(call), out);
      } else {  // raw code (code_interpreter) or anything else: kept as text
        out->content += held_space_ + call_space_ + std::string(kPythonTag) + buffer_;
      }
      break;
    }
    case State::kJson:
      out->content += held_space_ + call_space_ + buffer_;
      break;
    default: {
      std::string rest = held_space_ + buffer_;
      if (n_calls_ == 0 || rest.find_first_not_of(" \n\r\t") != std::string::npos) out->content += rest;
    }
  }
}

ToolCallParser::Output ToolCallParser::flush() {
  Output out;
  if (format_ == ToolCallFormat::kLlama3) {
    flush_llama3(&out);
  } else if (state_ == State::kCall) {
    out.content += call_space_;
    out.content += std::string(format_ == ToolCallFormat::kMistral ? kToolCalls : kOpen) + buffer_;
  } else {
    std::string rest = held_space_ + buffer_;
    // Trailing whitespace after a call is glue; text (even whitespace) with no call is kept.
    if (n_calls_ == 0 || rest.find_first_not_of(" \n\r\t") != std::string::npos)
      out.content = std::move(rest);
  }
  call_space_.clear();
  held_space_.clear();
  buffer_.clear();
  state_ = State::kText;
  started_ = false;
  return out;
}

Result<std::string> tool_call_grammar(const nlohmann::ordered_json& tools, const std::string& only, bool parallel,
                                      ToolCallFormat format) {
  if (format == ToolCallFormat::kNone)
    return invalid_argument(
        "tool_choice: this model's chat template has no tool-call syntax (none of <tool_call>, "
        "<|python_tag|>/ipython, [TOOL_CALLS]), so a call cannot be forced");
  if (!tools.is_array() || tools.empty()) return invalid_argument("tools: a non-empty array is required");
  const char* args_key = format == ToolCallFormat::kLlama3 ? "parameters" : "arguments";
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
                        {"properties", {{"name", {{"const", name}}}, {args_key, params}}},
                        {"required", {"name", args_key}},
                        {"additionalProperties", false}});
  }
  if (variants.empty()) return invalid_argument("tool_choice: no tool named '{}'", only);
  nlohmann::ordered_json schema =
      variants.size() == 1 ? variants[0] : nlohmann::ordered_json{{"anyOf", variants}};
  auto gbnf = sampling::json_schema::to_grammar_from_json(schema);
  if (!gbnf.ok()) return gbnf.status().with_context("tools: ");
  // The schema's root becomes `tool-call-json`; our root wraps it in the family's syntax.
  std::string text = *gbnf;
  const size_t at = text.rfind("root ::=", 0) == 0 ? 0 : text.find("\nroot ::=");
  if (at == std::string::npos) return Status(StatusCode::kInternal, "tools: schema grammar has no root rule");
  text.replace(at == 0 ? 0 : at + 1, 4, "tool-call-json");
  switch (format) {
    case ToolCallFormat::kLlama3:  // one bare object: the Llama 3 templates refuse several calls in a turn
      return fmt::format("root ::= tool-call-json\n{}", text);
    case ToolCallFormat::kMistral:
      return fmt::format("root ::= \"[TOOL_CALLS] [\" tool-call-json {}\"]\"\n{}",
                         parallel ? "(\", \" tool-call-json)* " : "", text);
    default: {
      std::string root = "root ::= tool-call-block";
      if (parallel) root += " (\"\\n\" tool-call-block)*";
      return fmt::format("{}\ntool-call-block ::= \"<tool_call>\\n\" tool-call-json \"\\n</tool_call>\"\n{}",
                         root, text);
    }
  }
}

}  // namespace minfer::server
