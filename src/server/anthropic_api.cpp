// The Anthropic Messages API (see anthropic_api.h). Field names and shapes follow Anthropic's API
// reference; minfer accepts a few llama-server sampling extensions (grammar, seed, logit_bias, min_p).
#include "server/anthropic_api.h"

#include <cctype>
#include <chrono>
#include <memory>
#include <set>

#include <fmt/format.h>

#include "server/openai_response.h"
#include "server/sse.h"
#include "tokenizer/tokenizer.h"

namespace minfer::server {
namespace {

using json = nlohmann::ordered_json;
using Err = std::optional<ApiError>;
using std::chrono::milliseconds;

constexpr milliseconds kPoll{100};
constexpr int kPingEveryPolls = 10;  // a `ping` event after about a second without output

// Every key of `obj` must be in `allowed`; the first other one is a 400 naming it.
Err only_keys(const json& obj, const std::string& where, std::initializer_list<const char*> allowed) {
  for (const auto& [key, value] : obj.items()) {
    bool ok = false;
    for (const char* a : allowed) ok = ok || key == a;
    if (!ok) {
      const std::string field = where.empty() ? key : where + "." + key;
      return bad_request(fmt::format("'{}' is not supported by this server", field), field);
    }
  }
  return {};
}

// `field` as a string (required).
Err string_field(const json& obj, const char* key, const std::string& where, std::string* out) {
  const std::string field = where + "." + key;
  auto it = obj.find(key);
  if (it == obj.end()) return bad_request(fmt::format("'{}' is required", field), field);
  if (!it->is_string()) return wrong_type(field, "a string", *it);
  *out = it->get<std::string>();
  return {};
}

// tool_result content: a string, or text blocks (joined by newlines).
Err tool_result_text(const json& block, const std::string& where, std::string* out) {
  auto it = block.find("content");
  if (it == block.end() || it->is_null()) return {};
  if (it->is_string()) {
    *out = it->get<std::string>();
    return {};
  }
  if (!it->is_array()) return wrong_type(where + ".content", "a string or an array of text blocks", *it);
  for (size_t k = 0; k < it->size(); ++k) {
    const json& part = (*it)[k];
    const std::string pf = fmt::format("{}.content[{}]", where, k);
    if (!part.is_object() || !part.contains("type") || !part["type"].is_string())
      return bad_request(fmt::format("'{}' must be a content block with a 'type'", pf), pf);
    if (part["type"] != "text")
      return bad_request(fmt::format("'{}': block type '{}' is not supported in a tool_result (only text)",
                                     pf, part["type"].get<std::string>()),
                         pf);
    if (auto e = only_keys(part, pf, {"type", "text", "cache_control", "citations"})) return e;
    std::string text;
    if (auto e = string_field(part, "text", pf, &text)) return e;
    if (!out->empty()) *out += "\n";
    *out += text;
  }
  return {};
}

// One Anthropic message -> OpenAI chat messages (a user turn's tool_result blocks become tool messages).
// The call id a tool_use id stands for in the chat messages: tool_use_id() below prefixes "toolu_" to our
// calls' ids, and a Mistral model's template accepts its calls back only with their 9-character id, so
// "toolu_" + 9 alphanumerics goes back to those 9 (other ids pass unchanged; no other template reads them).
std::string call_id_of_tool_use(const std::string& id) {
  if (id.size() != 15 || id.rfind("toolu_", 0) != 0) return id;
  for (size_t k = 6; k < id.size(); ++k) {
    if (!std::isalnum(static_cast<unsigned char>(id[k]))) return id;
  }
  return id.substr(6);
}

Err translate_message(const json& m, size_t i, json* out) {
  const std::string where = fmt::format("messages[{}]", i);
  if (!m.is_object()) return wrong_type(where, "an object", m);
  if (auto e = only_keys(m, where, {"role", "content"})) return e;
  std::string role;
  if (auto e = string_field(m, "role", where, &role)) return e;
  if (role != "user" && role != "assistant")
    return bad_request(
        fmt::format("'{}.role': unknown role '{}' (use user or assistant; the system prompt is "
                    "the top-level 'system')",
                    where, role),
        where + ".role");
  auto content = m.find("content");
  if (content == m.end())
    return bad_request(fmt::format("'{}.content' is required", where), where + ".content");
  if (content->is_string()) {
    out->push_back({{"role", role}, {"content", *content}});
    return {};
  }
  if (!content->is_array())
    return wrong_type(where + ".content", "a string or an array of content blocks", *content);
  if (content->empty())
    return bad_request(fmt::format("'{}.content' must not be empty", where), where + ".content");
  std::string text, thinking;
  json calls = json::array();
  json results = json::array();
  for (size_t j = 0; j < content->size(); ++j) {
    const json& b = (*content)[j];
    const std::string bf = fmt::format("{}.content[{}]", where, j);
    if (!b.is_object() || !b.contains("type") || !b["type"].is_string())
      return bad_request(fmt::format("'{}' must be a content block object with a 'type'", bf), bf);
    const std::string type = b["type"].get<std::string>();
    if (type == "text") {
      if (auto e = only_keys(b, bf, {"type", "text", "cache_control", "citations"})) return e;
      std::string t;
      if (auto e = string_field(b, "text", bf, &t)) return e;
      if (!text.empty()) text += "\n";
      text += t;
    } else if (type == "tool_use" && role == "assistant") {
      if (auto e = only_keys(b, bf, {"type", "id", "name", "input", "cache_control"})) return e;
      std::string id, name;
      if (auto e = string_field(b, "id", bf, &id)) return e;
      if (auto e = string_field(b, "name", bf, &name)) return e;
      auto input = b.find("input");
      if (input == b.end() || !input->is_object())
        return bad_request(fmt::format("'{}.input' must be an object", bf), bf + ".input");
      calls.push_back({{"id", call_id_of_tool_use(id)},
                       {"type", "function"},
                       {"function", {{"name", name}, {"arguments", *input}}}});
    } else if (type == "thinking" && role == "assistant") {
      if (auto e = only_keys(b, bf, {"type", "thinking", "signature"})) return e;
      std::string t;
      if (auto e = string_field(b, "thinking", bf, &t)) return e;
      thinking += t;
    } else if (type == "tool_result" && role == "user") {
      if (auto e = only_keys(b, bf, {"type", "tool_use_id", "content", "is_error", "cache_control"}))
        return e;
      std::string id, result;
      if (auto e = string_field(b, "tool_use_id", bf, &id)) return e;
      if (auto e = tool_result_text(b, bf, &result)) return e;
      if (auto err = b.find("is_error"); err != b.end() && !err->is_null()) {
        if (!err->is_boolean()) return wrong_type(bf + ".is_error", "a boolean", *err);
        if (err->get<bool>()) result = "Error: " + result;
      }
      results.push_back({{"role", "tool"}, {"tool_call_id", call_id_of_tool_use(id)}, {"content", result}});
    } else {
      return bad_request(
          fmt::format("'{}': content block type '{}' is not supported in a{} {} message (use "
                      "{})",
                      bf, type, role == "assistant" ? "n" : "", role,
                      role == "assistant" ? "text, thinking or tool_use" : "text or tool_result"),
          bf);
    }
  }
  for (auto& r : results) out->push_back(std::move(r));
  if (role == "user") {
    if (!text.empty() || results.empty()) out->push_back({{"role", "user"}, {"content", text}});
    return {};
  }
  json msg = {{"role", "assistant"}, {"content", text}};
  if (!calls.empty()) msg["tool_calls"] = std::move(calls);
  if (!thinking.empty()) msg["reasoning_content"] = thinking;
  out->push_back(std::move(msg));
  return {};
}

Err translate_tools(const json& tools, json* out) {
  if (!tools.is_array()) return wrong_type("tools", "an array", tools);
  *out = json::array();
  for (size_t i = 0; i < tools.size(); ++i) {
    const json& t = tools[i];
    const std::string where = fmt::format("tools[{}]", i);
    if (!t.is_object()) return wrong_type(where, "an object", t);
    if (auto type = t.find("type"); type != t.end() && !type->is_null() && *type != "custom")
      return bad_request(fmt::format("'{}.type': tool type {} is not supported (only custom tools with an "
                                     "input_schema)",
                                     where, type->dump()),
                         where + ".type");
    if (auto e = only_keys(t, where, {"type", "name", "description", "input_schema", "cache_control"}))
      return e;
    std::string name;
    if (auto e = string_field(t, "name", where, &name)) return e;
    if (name.empty()) return bad_request(fmt::format("'{}.name' must not be empty", where), where + ".name");
    auto schema = t.find("input_schema");
    if (schema == t.end() || !schema->is_object())
      return bad_request(fmt::format("'{}.input_schema' must be an object", where), where + ".input_schema");
    json fn = {{"name", name}};
    if (auto d = t.find("description"); d != t.end() && !d->is_null()) {
      if (!d->is_string()) return wrong_type(where + ".description", "a string", *d);
      fn["description"] = *d;
    }
    fn["parameters"] = *schema;
    out->push_back({{"type", "function"}, {"function", std::move(fn)}});
  }
  return {};
}

// tool_choice {type: auto|any|tool|none, name, disable_parallel_tool_use} -> the OpenAI fields.
Err translate_tool_choice(const json& tc, json* oa) {
  if (!tc.is_object() || !tc.contains("type") || !tc["type"].is_string())
    return bad_request("'tool_choice' must be an object with a 'type' (auto, any, tool or none)",
                       "tool_choice");
  if (auto e = only_keys(tc, "tool_choice", {"type", "name", "disable_parallel_tool_use"})) return e;
  const std::string type = tc["type"].get<std::string>();
  bool parallel = true;
  if (auto d = tc.find("disable_parallel_tool_use"); d != tc.end() && !d->is_null()) {
    if (!d->is_boolean()) return wrong_type("tool_choice.disable_parallel_tool_use", "a boolean", *d);
    parallel = !d->get<bool>();
  }
  if (type == "auto") {
    (*oa)["tool_choice"] = "auto";
  } else if (type == "any") {
    (*oa)["tool_choice"] = "required";
  } else if (type == "none") {
    (*oa)["tool_choice"] = "none";
  } else if (type == "tool") {
    std::string name;
    if (auto e = string_field(tc, "name", "tool_choice", &name)) return e;
    (*oa)["tool_choice"] = {{"type", "function"}, {"function", {{"name", name}}}};
  } else {
    return bad_request(fmt::format("'tool_choice.type' must be auto, any, tool or none, got '{}'", type),
                       "tool_choice.type");
  }
  (*oa)["parallel_tool_calls"] = parallel;
  return {};
}

// HTTP status of an ApiError on these routes: Anthropic answers "overloaded" with 529.
int anthropic_status(int status) {
  return status == 503 ? 529 : status;
}

HttpResponse error_reply(const ApiError& e) {
  HttpResponse r;
  r.status = anthropic_status(e.status);
  r.body = dump_json(anthropic_error_json(r.status, e.message));
  if (r.status == 529) r.headers.emplace_back("Retry-After", "1");
  return r;
}

std::string sse_event(const json& payload) {
  return fmt::format("event: {}\ndata: {}\n\n", payload["type"].get<std::string>(), dump_json(payload));
}

json usage_of(const engine::BatchUsage& u) {
  return {{"input_tokens", u.prompt_tokens - u.cached_tokens},
          {"cache_creation_input_tokens", 0},
          {"cache_read_input_tokens", u.cached_tokens},
          {"output_tokens", u.completion_tokens}};
}

std::string tool_use_id(const std::string& call_id) {
  return "toolu_" + (call_id.rfind("call_", 0) == 0 ? call_id.substr(5) : call_id);
}

// Assembler deltas -> Anthropic content blocks: the streamed events (when `events` is set) and the
// final content array, from the same steps, so a joined stream equals the non-streamed message.
class BlockWriter {
 public:
  explicit BlockWriter(std::vector<json>* events) : events_(events) {}

  void add(const Delta& d) {
    if (!d.reasoning.empty()) append(Open::kThinking, d.reasoning);
    if (!d.content.empty()) append(Open::kText, d.content);
    for (const ToolCall& c : d.calls) tool_use(c);
  }
  void close() {
    if (open_ == Open::kNone) return;
    emit({{"type", "content_block_stop"}, {"index", index()}});
    open_ = Open::kNone;
  }
  const json& content() const { return content_; }

 private:
  enum class Open { kNone, kThinking, kText };
  int index() const { return static_cast<int>(content_.size()) - 1; }
  void emit(json event) {
    if (events_ != nullptr) events_->push_back(std::move(event));
  }
  void append(Open kind, const std::string& text) {
    const bool thinking = kind == Open::kThinking;
    const char* key = thinking ? "thinking" : "text";
    if (open_ != kind) {
      close();
      json block = thinking ? json{{"type", "thinking"}, {"thinking", ""}, {"signature", ""}}
                            : json{{"type", "text"}, {"text", ""}};
      content_.push_back(block);
      open_ = kind;
      emit({{"type", "content_block_start"}, {"index", index()}, {"content_block", std::move(block)}});
    }
    content_.back()[key].get_ref<std::string&>() += text;
    emit({{"type", "content_block_delta"},
          {"index", index()},
          {"delta", {{"type", thinking ? "thinking_delta" : "text_delta"}, {key, text}}}});
  }
  void tool_use(const ToolCall& c) {
    close();
    json input = parse_json(c.arguments);
    if (input.is_discarded() || !input.is_object()) input = json::object();
    const std::string id = tool_use_id(c.id);
    content_.push_back({{"type", "tool_use"}, {"id", id}, {"name", c.name}, {"input", input}});
    emit(
        {{"type", "content_block_start"},
         {"index", index()},
         {"content_block", {{"type", "tool_use"}, {"id", id}, {"name", c.name}, {"input", json::object()}}}});
    emit({{"type", "content_block_delta"},
          {"index", index()},
          {"delta", {{"type", "input_json_delta"}, {"partial_json", dump_json(input)}}}});
    emit({{"type", "content_block_stop"}, {"index", index()}});
  }

  std::vector<json>* events_;
  json content_ = json::array();
  Open open_ = Open::kNone;
};

// What one generation produced, and the Anthropic stop_reason / stop_sequence it ends with.
struct Generation {
  ChoiceAssembler assembler;
  BlockWriter blocks;
  std::vector<int32_t> tokens;
  std::string emitted;  // the text the batcher delivered (stop strings never included)
  std::string finish;
  Generation(bool reasoning, bool think, bool tools, ToolCallFormat format, std::vector<json>* events)
      : assembler(reasoning, think, tools, format), blocks(events) {}

  void token(const engine::BatchEvent& ev) {
    tokens.push_back(ev.token);
    emitted += ev.text;
    blocks.add(assembler.push(ev.text));
  }
  // Text the server put in the model's output itself (the end of a thinking block cut at its budget).
  void forced(const std::string& text, const std::vector<int32_t>& ids) {
    tokens.insert(tokens.end(), ids.begin(), ids.end());
    emitted += text;
    blocks.add(assembler.push(text));
  }
  void done(const engine::BatchEvent& ev) {
    emitted += ev.text;
    if (!ev.text.empty()) blocks.add(assembler.push(ev.text));
    blocks.add(assembler.finish());
    blocks.close();
    finish = ev.finish_reason;
  }
  // end_turn / max_tokens / stop_sequence / tool_use; *sequence: the stop sequence that matched.
  std::string stop_reason(const tokenizer::Tokenizer& tok, const std::vector<std::string>& stops,
                          json* sequence) const {
    *sequence = nullptr;
    if (!assembler.calls().empty()) return "tool_use";
    if (finish == "length") return "max_tokens";
    if (finish == "stop" && !stops.empty()) {
      // The delivered text never holds a whole stop string, so one found in the decoded tokens is the
      // one that ended generation (an end-of-generation token is never among the tokens).
      const std::string full = tok.decode(tokens);
      size_t best = std::string::npos;
      for (const std::string& s : stops) {
        const size_t at = full.find(s);
        if (at != std::string::npos && at < best) {
          best = at;
          *sequence = s;
        }
      }
      if (best != std::string::npos) return "stop_sequence";
    }
    return "end_turn";
  }
};

// thinking.budget_tokens, honoured: once the model has generated `budget` tokens and is still inside its
// leading <think> block, the request is cancelled and continued as a second batcher request whose prompt is
// the original prompt, the tokens so far and "\n</think>\n\n", so the block ends at the budget and the
// answer follows (the continuation's prompt is the cancelled slot's prefix, which the batcher may reuse).
// The closing text counts as output tokens; max_tokens still bounds the whole answer.
struct ThinkingBudget {
  int32_t budget = 0;  // 0: none
  bool reasoning = false, starts_in_think = false;
  engine::BatchRequest original;  // its prompt, sampling, stop strings and n_predict
  bool spent = false;
  int32_t extra_completion = 0;  // tokens of the cancelled part plus the closing text

  bool due(const Generation& g) const {
    if (budget <= 0 || spent || !reasoning || static_cast<int32_t>(g.tokens.size()) < budget) return false;
    // A grammar (the request's, a forced tool choice, a schema) would start again from its root in the
    // continuation, so a constrained answer is bounded by max_tokens only.
    if (!original.sampling.grammar.empty() || !original.sampling.json_schema.empty()) return false;
    const size_t first = g.emitted.find_first_not_of(" \t\r\n");
    const bool opened =
        starts_in_think || (first != std::string::npos && g.emitted.compare(first, 7, "<think>") == 0);
    return opened && g.emitted.find("</think>") == std::string::npos;
  }
  // Closes the block in `g` and continues into *handle. Returns false when max_tokens leaves no room after
  // the closing text (the answer then ends there, as max_tokens); an error when the continuation is refused.
  Result<bool> close(Generation& g, engine::Batcher& batcher, const tokenizer::Tokenizer& tok,
                     std::shared_ptr<engine::RequestHandle>* handle) {
    (*handle)->cancel();
    spent = true;
    static constexpr char kClose[] = "\n</think>\n\n";
    const std::vector<int32_t> ids = tok.encode(kClose, /*add_special=*/false, /*parse_special=*/true);
    const int32_t generated = static_cast<int32_t>(g.tokens.size());
    g.forced(kClose, ids);
    extra_completion = generated + static_cast<int32_t>(ids.size());
    engine::BatchRequest r = original;
    r.prompt.insert(r.prompt.end(), g.tokens.begin(), g.tokens.end());
    if (r.n_predict >= 0) {
      r.n_predict -= extra_completion;
      if (r.n_predict < 1) return false;
    }
    MINFER_ASSIGN_OR_RETURN(*handle, batcher.submit(std::move(r)));
    return true;
  }
  // The usage of the whole answer from the continuation's (prompt: the original one; cached: what the
  // continuation reused, at most the original prompt).
  engine::BatchUsage usage(engine::BatchUsage u) const {
    if (!spent) return u;
    const int32_t n_prompt = static_cast<int32_t>(original.prompt.size());
    u.prompt_tokens = n_prompt;
    u.cached_tokens = std::min(u.cached_tokens, n_prompt);
    u.completion_tokens += extra_completion;
    return u;
  }
};

}  // namespace

std::string anthropic_error_type(int status) {
  switch (status) {
    case 401:
      return "authentication_error";
    case 403:
      return "permission_error";
    case 404:
      return "not_found_error";
    case 413:
      return "request_too_large";
    case 429:
      return "rate_limit_error";
    case 503:
    case 529:
      return "overloaded_error";
    default:
      return status >= 500 ? "api_error" : "invalid_request_error";
  }
}

json anthropic_error_json(int status, const std::string& message) {
  return {{"type", "error"}, {"error", {{"type", anthropic_error_type(status)}, {"message", message}}}};
}

std::optional<ApiError> parse_anthropic_request(std::string_view body, const RequestLimits& limits,
                                                bool count_tokens, AnthropicRequest* out) {
  *out = AnthropicRequest();
  json b = parse_json(body);
  if (b.is_discarded()) return bad_request(invalid_json_message(body));
  if (!b.is_object()) return bad_request("the request body must be a JSON object");
  if (count_tokens) {
    if (auto e = only_keys(b, "", {"model", "messages", "system", "tools", "tool_choice", "thinking"}))
      return e;
  } else if (auto e = only_keys(b, "",
                                {"model", "max_tokens", "messages", "system", "tools", "tool_choice",
                                 "stop_sequences", "temperature", "top_p", "top_k", "stream", "metadata",
                                 "thinking", "grammar", "seed", "logit_bias", "min_p"})) {
    return e;
  }
  json oa = json::object();
  auto model = b.find("model");
  if (model == b.end() || !model->is_string()) return bad_request("'model' is required (a string)", "model");
  oa["model"] = *model;

  int64_t max_tokens = 0;
  if (!count_tokens) {
    auto mt = b.find("max_tokens");
    if (mt == b.end() || mt->is_null()) return bad_request("'max_tokens' is required", "max_tokens");
    if (!mt->is_number_integer()) return wrong_type("max_tokens", "an integer", *mt);
    max_tokens = mt->get<int64_t>();
    if (max_tokens < 1)
      return bad_request(fmt::format("'max_tokens' must be at least 1, got {}", max_tokens), "max_tokens");
    oa["max_tokens"] = max_tokens;
  }

  // system, then the messages.
  json messages = json::array();
  if (auto sys = b.find("system"); sys != b.end() && !sys->is_null()) {
    std::string text;
    if (sys->is_string()) {
      text = sys->get<std::string>();
    } else if (sys->is_array()) {
      for (size_t k = 0; k < sys->size(); ++k) {
        const json& part = (*sys)[k];
        const std::string pf = fmt::format("system[{}]", k);
        if (!part.is_object() || part.value("type", "") != "text")
          return bad_request(fmt::format("'{}' must be a text block", pf), pf);
        if (auto e = only_keys(part, pf, {"type", "text", "cache_control", "citations"})) return e;
        std::string t;
        if (auto e = string_field(part, "text", pf, &t)) return e;
        if (!text.empty()) text += "\n";
        text += t;
      }
    } else {
      return wrong_type("system", "a string or an array of text blocks", *sys);
    }
    messages.push_back({{"role", "system"}, {"content", text}});
  }
  auto msgs = b.find("messages");
  if (msgs == b.end()) return bad_request("'messages' is required", "messages");
  if (!msgs->is_array()) return wrong_type("messages", "an array", *msgs);
  if (msgs->empty()) return bad_request("'messages' must not be empty", "messages");
  for (size_t i = 0; i < msgs->size(); ++i)
    if (auto e = translate_message((*msgs)[i], i, &messages)) return e;
  if (msgs->back().is_object() && msgs->back().value("role", "") == "assistant")
    return bad_request(
        fmt::format("'messages[{}]': a final assistant message (prefill) is not supported; end with a user "
                    "message",
                    msgs->size() - 1),
        "messages");
  oa["messages"] = std::move(messages);

  if (auto t = b.find("tools"); t != b.end() && !t->is_null()) {
    json tools;
    if (auto e = translate_tools(*t, &tools)) return e;
    oa["tools"] = std::move(tools);
  }
  if (auto tc = b.find("tool_choice"); tc != b.end() && !tc->is_null())
    if (auto e = translate_tool_choice(*tc, &oa)) return e;

  // thinking -> the template's reasoning switch (Qwen3's enable_thinking).
  if (auto th = b.find("thinking"); th != b.end() && !th->is_null()) {
    if (!th->is_object() || !th->contains("type") || !(*th)["type"].is_string())
      return bad_request(
          "'thinking' must be {\"type\":\"enabled\",\"budget_tokens\":N} or {\"type\":\"disabled\"}",
          "thinking");
    const std::string type = (*th)["type"].get<std::string>();
    if (type == "enabled") {
      if (auto e = only_keys(*th, "thinking", {"type", "budget_tokens"})) return e;
      auto budget = th->find("budget_tokens");
      if (budget == th->end() || !budget->is_number_integer())
        return bad_request("'thinking.budget_tokens' is required (an integer)", "thinking.budget_tokens");
      const int64_t n = budget->get<int64_t>();
      if (n < 1024)
        return bad_request(fmt::format("'thinking.budget_tokens' must be at least 1024, got {}", n),
                           "thinking.budget_tokens");
      if (!count_tokens && n >= max_tokens)
        return bad_request(
            fmt::format("'thinking.budget_tokens' ({}) must be less than 'max_tokens' ({})", n, max_tokens),
            "thinking.budget_tokens");
      out->thinking = true;
      out->budget_tokens = static_cast<int32_t>(std::min<int64_t>(n, INT32_MAX));
    } else if (type == "disabled") {
      if (auto e = only_keys(*th, "thinking", {"type"})) return e;
    } else {
      return bad_request(fmt::format("'thinking.type' must be enabled or disabled, got '{}'", type),
                         "thinking.type");
    }
    oa["chat_template_kwargs"] = {{"enable_thinking", out->thinking}};
  }

  if (!count_tokens) {
    if (auto t = b.find("temperature"); t != b.end() && !t->is_null()) {
      if (!t->is_number()) return wrong_type("temperature", "a number", *t);
      const double v = t->get<double>();
      if (!(v >= 0.0 && v <= 1.0))
        return bad_request(fmt::format("'temperature' must be in [0, 1], got {}", v), "temperature");
    }
    for (const char* key :
         {"temperature", "top_p", "top_k", "stream", "grammar", "seed", "logit_bias", "min_p"})
      if (b.contains(key)) oa[key] = b[key];
    if (auto m = b.find("metadata"); m != b.end() && !m->is_null()) {
      if (!m->is_object()) return wrong_type("metadata", "an object", *m);
      if (auto e = only_keys(*m, "metadata", {"user_id"})) return e;
      if (m->contains("user_id") && !(*m)["user_id"].is_null() && !(*m)["user_id"].is_string())
        return wrong_type("metadata.user_id", "a string", (*m)["user_id"]);
    }
    if (auto s = b.find("stop_sequences"); s != b.end() && !s->is_null()) {
      if (!s->is_array()) return wrong_type("stop_sequences", "an array of strings", *s);
      for (size_t k = 0; k < s->size(); ++k) {
        const json& v = (*s)[k];
        const std::string field = fmt::format("stop_sequences[{}]", k);
        if (!v.is_string()) return wrong_type(field, "a string", v);
        if (v.get<std::string>().empty())
          return bad_request(fmt::format("'{}' must not be empty", field), field);
        out->stop_sequences.push_back(v.get<std::string>());
      }
    }
  }

  if (auto e = parse_chat_request(dump_json(oa), limits, &out->chat)) return e;
  out->chat.stop = out->stop_sequences;
  return {};
}

HttpResponse anthropic_messages(Server& server, const HttpRequest& req,
                                const std::function<bool()>& client_alive) {
  const bool count = req.path == "/v1/messages/count_tokens";
  if (req.method != "POST") {
    HttpResponse r = error_reply(
        {405, fmt::format("method {} is not allowed on {} (use POST)", req.method, req.path), "", {}});
    r.headers.emplace_back("Allow", "POST");
    return r;
  }
  if (!server.authorized(req, /*accept_x_api_key=*/true))
    return error_reply({401, "invalid or missing API key (send x-api-key or Authorization: Bearer)", "", {}});
  if (server.draining()) {
    server.add_rejected();
    return error_reply({529, "the server is draining", "", {}});
  }
  if (!server.ready()) return error_reply({529, "the model is loading", "", {}});
  if (req.body.empty()) return error_reply(bad_request("the request body is empty: send a JSON object"));

  // The model first (it may have to load): its vocabulary and slots bound the request's fields. A body
  // without a model string is parsed against the default model, and parsing refuses it.
  ApiError lease_error;
  std::shared_ptr<ModelLease> lease = server.lease_for(req.body, client_alive, &lease_error);
  if (!lease) return error_reply(lease_error);
  const engine::Engine& engine = lease->engine();
  engine::Batcher& batcher = lease->batcher();
  const tokenizer::Tokenizer& tok = engine.tokenizer();
  RequestLimits limits;
  limits.n_vocab = engine.n_vocab();
  limits.n_slots = batcher.options().n_slots;
  limits.defaults = server.options().sampling;
  limits.tool_format = detect_tool_call_format(lease->chat_template().source());
  AnthropicRequest a;
  if (auto err = parse_anthropic_request(req.body, limits, count, &a)) return error_reply(*err);
  const std::string model = lease->id();

  std::vector<int32_t> prompt;
  bool starts_in_think = false;
  if (auto err = server.render_chat_prompt(*lease, a.chat.chat, "messages", &prompt, &starts_in_think))
    return error_reply(*err);
  if (count) {
    HttpResponse r;
    r.body = dump_json(json{{"input_tokens", prompt.size()}});
    return r;
  }
  if (static_cast<int64_t>(prompt.size()) >= engine.n_ctx())
    return error_reply(
        bad_request(fmt::format("prompt is too long: {} tokens > {} maximum (the context holds {})",
                                prompt.size(), engine.n_ctx() - 1, engine.n_ctx()),
                    "messages"));

  engine::BatchRequest br;
  br.prompt = std::move(prompt);
  const int64_t n_prompt = static_cast<int64_t>(br.prompt.size());
  br.n_predict = a.chat.n_predict;
  br.stop = a.chat.stop;
  br.sampling = a.chat.sampling;
  const bool reasoning = server.options().reasoning;
  auto budget = std::make_shared<ThinkingBudget>();
  if (a.thinking) {
    budget->budget = a.budget_tokens;
    budget->reasoning = reasoning;
    budget->starts_in_think = starts_in_think;
    budget->original = br;
  }
  auto submitted = batcher.submit(std::move(br));
  if (!submitted.ok()) return error_reply(api_error_from_status(submitted.status()));
  std::shared_ptr<engine::RequestHandle> handle = std::move(*submitted);
  server.add_in_flight(1);

  const bool tools = !a.chat.tools.is_null();
  const ToolCallFormat tool_format = a.chat.tool_format;
  const std::string id = "msg_" + make_response_id("x").substr(2);
  auto failure = [](const Status& error) {
    ApiError e = api_error_from_status(error);
    if (e.status < 500) e = {500, error.message(), "server_error", {}};
    return e;
  };

  if (!a.chat.stream) {
    Generation g(reasoning, starts_in_think, tools, tool_format, nullptr);
    engine::BatchUsage usage;
    Status error;
    std::optional<ApiError> dead_end;
    bool finished = false;
    auto last_check = std::chrono::steady_clock::now();
    while (!finished) {
      auto ev = handle->next(kPoll);
      const auto now = std::chrono::steady_clock::now();
      if (!ev || now - last_check >= kPoll) {
        last_check = now;
        if (client_alive && !client_alive()) {
          handle->cancel();
          server.add_in_flight(-1);
          return error_reply({499, "client closed the connection", "", {}});
        }
      }
      if (!ev) continue;
      switch (ev->kind) {
        case engine::BatchEvent::Kind::kToken:
          g.token(*ev);
          if (budget->due(g)) {
            auto continued = budget->close(g, batcher, tok, &handle);
            if (!continued.ok()) {
              error = continued.status();
              finished = true;
            } else if (!*continued) {  // max_tokens reached by the closing text
              engine::BatchEvent end;
              end.finish_reason = "length";
              g.done(end);
              finished = true;
            }
          }
          break;
        case engine::BatchEvent::Kind::kDone:
          if (!dead_end) dead_end = grammar_dead_end(*ev);
          g.done(*ev);
          break;
        case engine::BatchEvent::Kind::kError:
          error = ev->error;
          break;
        case engine::BatchEvent::Kind::kFinished:
          usage = ev->usage;
          finished = true;
          break;
      }
    }
    server.add_in_flight(-1);
    if (!error.ok()) return error_reply(failure(error));
    if (dead_end) return error_reply(*dead_end);
    usage = budget->usage(usage);
    json sequence;
    const std::string stop_reason = g.stop_reason(tok, a.stop_sequences, &sequence);
    json body = {{"id", id},
                 {"type", "message"},
                 {"role", "assistant"},
                 {"model", model},
                 {"content", g.blocks.content()},
                 {"stop_reason", stop_reason},
                 {"stop_sequence", sequence},
                 {"usage", usage_of(usage)}};
    HttpResponse r;
    r.body = dump_json(body);
    return r;
  }

  // Streaming: from here on a failure is an `error` event.
  HttpResponse res;
  res.content_type = "text/event-stream";
  res.headers.emplace_back("Cache-Control", "no-cache");
  res.headers.emplace_back("X-Accel-Buffering", "no");
  struct StreamGuard {  // holds the model's lease until the stream is over
    Server* server;
    std::shared_ptr<engine::RequestHandle> handle;
    std::shared_ptr<ModelLease> lease;
    bool completed = false;
    ~StreamGuard() {
      if (!completed) handle->cancel();
      server->add_in_flight(-1);
    }
  };
  // Built in place: a temporary's destructor would cancel the request.
  std::shared_ptr<StreamGuard> guard(new StreamGuard{&server, handle, lease});
  const std::vector<std::string> stops = a.stop_sequences;
  // The stream reads guard->handle: a thinking budget replaces it with the continuation's.
  engine::Batcher* batcher_ptr = &batcher;
  res.stream = [guard, budget, batcher_ptr, id, model, n_prompt, reasoning, starts_in_think, tools, tool_format, stops,
                &tok, failure](ResponseStream& out) {
    std::shared_ptr<engine::RequestHandle>& current = guard->handle;
    bool ok = true;
    auto send = [&](const json& event) {
      if (ok && !out.write(sse_event(event))) ok = false;
    };
    // message_start waits for the first event: its usage then has the prompt tokens the KV cache
    // supplied, so a client that keeps message_start's input counts (as the SDKs do) reports the same
    // usage as the non-streamed answer.
    bool started = false;
    auto start = [&](const engine::BatchEvent* first) {
      if (started) return;
      started = true;
      engine::BatchUsage u;
      u.prompt_tokens = static_cast<int32_t>(n_prompt);
      if (first != nullptr && first->kind != engine::BatchEvent::Kind::kError)
        u.cached_tokens = first->usage.cached_tokens;
      json usage = usage_of(u);
      usage["output_tokens"] = 0;
      send({{"type", "message_start"},
            {"message",
             {{"id", id},
              {"type", "message"},
              {"role", "assistant"},
              {"model", model},
              {"content", json::array()},
              {"stop_reason", nullptr},
              {"stop_sequence", nullptr},
              {"usage", std::move(usage)}}}});
      send({{"type", "ping"}});
    };
    std::vector<json> events;
    Generation g(reasoning, starts_in_think, tools, tool_format, &events);
    engine::BatchUsage usage;
    bool finished = false, failed = false;
    int idle_polls = 0;
    while (!finished && ok) {
      auto ev = current->next(kPoll);
      if (!ev) {
        if (!out.alive()) ok = false;
        if (++idle_polls >= kPingEveryPolls) {
          idle_polls = 0;
          send({{"type", "ping"}});  // also before message_start, while queued: the SDKs skip pings
        }
        continue;
      }
      idle_polls = 0;
      start(&*ev);
      switch (ev->kind) {
        case engine::BatchEvent::Kind::kToken:
          g.token(*ev);
          if (budget->due(g)) {
            auto continued = budget->close(g, *batcher_ptr, tok, &current);
            if (!continued.ok()) {
              const ApiError e = failure(continued.status());
              send(anthropic_error_json(e.status, e.message));
              failed = true;
            } else if (!*continued) {  // max_tokens reached by the closing text
              engine::BatchEvent end;
              end.finish_reason = "length";
              g.done(end);
              finished = true;
            }
          }
          break;
        case engine::BatchEvent::Kind::kDone:
          if (auto e = grammar_dead_end(*ev)) {
            send(anthropic_error_json(e->status, e->message));
            failed = true;
            break;
          }
          g.done(*ev);
          break;
        case engine::BatchEvent::Kind::kError: {
          const ApiError e = failure(ev->error);
          send(anthropic_error_json(e.status, e.message));
          failed = true;
          break;
        }
        case engine::BatchEvent::Kind::kFinished:
          usage = ev->usage;
          finished = true;
          break;
      }
      if (!failed) {
        for (const json& e : events) send(e);
      }
      events.clear();
      if (failed) break;
    }
    if (!ok) {
      current->cancel();
      return;
    }
    if (failed) {
      // The batcher always ends a failed request with kFinished; the stream ends at the error event.
      guard->completed = true;
      return;
    }
    json sequence;
    const std::string stop_reason = g.stop_reason(tok, stops, &sequence);
    send({{"type", "message_delta"},
          {"delta", {{"stop_reason", stop_reason}, {"stop_sequence", sequence}}},
          {"usage", usage_of(budget->usage(usage))}});
    send({{"type", "message_stop"}});
    guard->completed = true;
  };
  return res;
}

}  // namespace minfer::server
