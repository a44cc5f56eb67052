// The OpenAI Responses API (see responses_api.h): request translation, the bounded store, output items and
// streamed events, and the Server's two routes. Generation is the chat-completions path: the same
// parse_chat_request, chat template, Batcher and ChoiceAssembler.
#include "server/responses_api.h"

#include <chrono>
#include <ctime>
#include <functional>
#include <memory>
#include <utility>

#include <fmt/format.h>

#include "server/openai_request.h"
#include "server/openai_response.h"
#include "server/server.h"
#include "server/sse.h"
#include "tokenizer/tokenizer.h"

namespace minfer::server {
namespace {

using json = nlohmann::ordered_json;
using Err = std::optional<ApiError>;
using std::chrono::milliseconds;

constexpr milliseconds kPoll{100};
constexpr size_t kMaxMetadataKeys = 16;

// "resp_<hex>", "msg_<hex>", ...: make_response_id's random part with OpenAI's underscore.
std::string make_id(const char* prefix) {
  std::string id = make_response_id(prefix);
  id[id.find('-')] = '_';
  return id;
}

// One content part's text: input_text / output_text (or a bare string).
Err part_text(const json& part, const std::string& field, std::string* out) {
  if (part.is_string()) {
    *out = part.get<std::string>();
    return {};
  }
  if (!part.is_object() || !part.contains("type") || !part["type"].is_string())
    return bad_request(fmt::format("'{}' must be a content part with a 'type'", field), field);
  const std::string type = part["type"].get<std::string>();
  if (type != "input_text" && type != "output_text" && type != "text")
    return bad_request(
        fmt::format("'{}.type': content part type '{}' is not supported (only input_text and output_text)",
                    field, type),
        field + ".type");
  if (!part.contains("text") || !part["text"].is_string())
    return bad_request(fmt::format("'{}.text' must be a string", field), field + ".text");
  *out = part["text"].get<std::string>();
  return {};
}

// input items -> chat messages appended to *messages.
Err translate_input(const json& input, json* messages) {
  if (input.is_string()) {
    messages->push_back({{"role", "user"}, {"content", input}});
    return {};
  }
  if (!input.is_array()) return wrong_type("input", "a string or an array of input items", input);
  std::string pending_reasoning;
  // The assistant message that consecutive function_call items extend (index into *messages), or -1.
  int64_t open_calls = -1;
  for (size_t i = 0; i < input.size(); ++i) {
    const json& item = input[i];
    const std::string field = fmt::format("input[{}]", i);
    if (!item.is_object()) return wrong_type(field, "an object", item);
    std::string type = "message";
    if (auto t = item.find("type"); t != item.end()) {
      if (!t->is_string()) return wrong_type(field + ".type", "a string", *t);
      type = t->get<std::string>();
    }
    if (type == "message") {
      auto role_it = item.find("role");
      if (role_it == item.end() || !role_it->is_string())
        return bad_request(fmt::format("'{}.role' must be a string", field), field + ".role");
      std::string role = role_it->get<std::string>();
      if (role == "developer") role = "system";
      if (role != "user" && role != "system" && role != "assistant")
        return bad_request(
            fmt::format("'{}.role': unknown role '{}' (use user, system, developer or assistant)", field, role),
            field + ".role");
      auto c = item.find("content");
      if (c == item.end()) return bad_request(fmt::format("'{}.content' is required", field), field + ".content");
      std::string text;
      if (c->is_string()) {
        text = c->get<std::string>();
      } else if (c->is_array()) {
        for (size_t p = 0; p < c->size(); ++p) {
          std::string piece;
          if (auto e = part_text((*c)[p], fmt::format("{}.content[{}]", field, p), &piece)) return e;
          if (p > 0) text += "\n";
          text += piece;
        }
      } else {
        return wrong_type(field + ".content", "a string or an array of content parts", *c);
      }
      for (const auto& [k, v] : item.items()) {
        if (k != "type" && k != "role" && k != "content" && k != "id" && k != "status")
          return bad_request(fmt::format("'{}.{}' is not supported", field, k), field + "." + k);
      }
      json m = {{"role", role}, {"content", text}};
      if (role == "assistant" && !pending_reasoning.empty()) {
        m["reasoning_content"] = pending_reasoning;
        pending_reasoning.clear();
      }
      messages->push_back(std::move(m));
      open_calls = role == "assistant" ? static_cast<int64_t>(messages->size()) - 1 : -1;
    } else if (type == "function_call") {
      for (const char* key : {"call_id", "name", "arguments"}) {
        if (!item.contains(key) || !item[key].is_string())
          return bad_request(fmt::format("'{}.{}' must be a string", field, key), fmt::format("{}.{}", field, key));
      }
      json call = {{"id", item["call_id"]},
                   {"type", "function"},
                   {"function", {{"name", item["name"]}, {"arguments", item["arguments"]}}}};
      if (open_calls < 0) {
        json m = {{"role", "assistant"}, {"content", ""}, {"tool_calls", json::array()}};
        if (!pending_reasoning.empty()) {
          m["reasoning_content"] = pending_reasoning;
          pending_reasoning.clear();
        }
        messages->push_back(std::move(m));
        open_calls = static_cast<int64_t>(messages->size()) - 1;
      }
      json& m = (*messages)[static_cast<size_t>(open_calls)];
      if (!m.contains("tool_calls")) m["tool_calls"] = json::array();
      m["tool_calls"].push_back(std::move(call));
    } else if (type == "function_call_output") {
      if (!item.contains("call_id") || !item["call_id"].is_string())
        return bad_request(fmt::format("'{}.call_id' must be a string", field), field + ".call_id");
      auto out = item.find("output");
      std::string text;
      if (out != item.end() && out->is_string()) {
        text = out->get<std::string>();
      } else if (out != item.end() && out->is_array()) {
        for (size_t p = 0; p < out->size(); ++p) {
          std::string piece;
          if (auto e = part_text((*out)[p], fmt::format("{}.output[{}]", field, p), &piece)) return e;
          text += piece;
        }
      } else {
        return bad_request(fmt::format("'{}.output' must be a string", field), field + ".output");
      }
      messages->push_back({{"role", "tool"}, {"tool_call_id", item["call_id"]}, {"content", text}});
      open_calls = -1;
    } else if (type == "reasoning") {
      // Earlier reasoning goes back to the template as the next assistant turn's reasoning_content.
      std::string text;
      for (const char* key : {"content", "summary"}) {
        if (auto c = item.find(key); c != item.end() && c->is_array()) {
          for (const auto& p : *c)
            if (p.is_object() && p.contains("text") && p["text"].is_string()) text += p["text"].get<std::string>();
          if (!text.empty()) break;
        }
      }
      pending_reasoning += text;
    } else {
      return bad_request(
          fmt::format("'{}.type': input item type '{}' is not supported (use message, function_call, "
                      "function_call_output or reasoning)",
                      field, type),
          field + ".type");
    }
  }
  return {};
}

// Responses function tools ({type, name, description, parameters, strict}) -> chat tools.
Err translate_tools(const json& tools, json* out) {
  if (!tools.is_array()) return wrong_type("tools", "an array", tools);
  *out = json::array();
  for (size_t i = 0; i < tools.size(); ++i) {
    const json& t = tools[i];
    const std::string field = fmt::format("tools[{}]", i);
    if (!t.is_object()) return wrong_type(field, "an object", t);
    const std::string type = t.contains("type") && t["type"].is_string() ? t["type"].get<std::string>() : "";
    if (type != "function")
      return bad_request(fmt::format("'{}.type': tool type '{}' is not supported (only function)", field, type),
                         field + ".type");
    if (!t.contains("name") || !t["name"].is_string() || t["name"].get<std::string>().empty())
      return bad_request(fmt::format("'{}.name' must be a non-empty string", field), field + ".name");
    json fn = {{"name", t["name"]}};
    for (const auto& [k, v] : t.items()) {
      if (k == "type" || k == "name" || k == "strict") continue;
      if (k == "description") {
        if (!v.is_string() && !v.is_null()) return wrong_type(field + ".description", "a string", v);
        if (v.is_string()) fn["description"] = v;
      } else if (k == "parameters") {
        if (!v.is_object() && !v.is_null()) return wrong_type(field + ".parameters", "an object", v);
        if (v.is_object()) fn["parameters"] = v;
      } else {
        return bad_request(fmt::format("'{}.{}' is not supported", field, k), field + "." + k);
      }
    }
    out->push_back({{"type", "function"}, {"function", std::move(fn)}});
  }
  return {};
}

Err translate_tool_choice(const json& v, json* out) {
  if (v.is_string()) {
    const std::string s = v.get<std::string>();
    if (s != "auto" && s != "none" && s != "required")
      return bad_request(fmt::format("'tool_choice' must be auto, none, required or a function, got '{}'", s),
                         "tool_choice");
    *out = v;
    return {};
  }
  if (v.is_object() && v.value("type", "") == "function" && v.contains("name") && v["name"].is_string()) {
    *out = {{"type", "function"}, {"function", {{"name", v["name"]}}}};
    return {};
  }
  return bad_request(
      "'tool_choice' must be auto, none, required or {\"type\":\"function\",\"name\":...} (other tool "
      "types are not supported)",
      "tool_choice");
}

// text: {format: {type: text | json_object | json_schema (name, schema, strict, description)}}.
Err translate_text(const json& text, json* response_format) {
  if (!text.is_object()) return wrong_type("text", "an object", text);
  for (const auto& [k, v] : text.items()) {
    if (k != "format") return bad_request(fmt::format("'text.{}' is not supported", k), "text." + k);
  }
  auto f = text.find("format");
  if (f == text.end() || f->is_null()) return {};
  if (!f->is_object() || !f->contains("type") || !(*f)["type"].is_string())
    return bad_request("'text.format' must be an object with a 'type'", "text.format");
  const std::string type = (*f)["type"].get<std::string>();
  if (type == "text") return {};
  if (type == "json_object") {
    *response_format = {{"type", "json_object"}};
    return {};
  }
  if (type == "json_schema") {
    if (!f->contains("schema") || !(*f)["schema"].is_object())
      return bad_request("'text.format.schema' must be an object", "text.format.schema");
    for (const auto& [k, v] : f->items()) {
      if (k != "type" && k != "name" && k != "schema" && k != "strict" && k != "description")
        return bad_request(fmt::format("'text.format.{}' is not supported", k), "text.format." + k);
    }
    *response_format = {{"type", "json_schema"}, {"json_schema", {{"schema", (*f)["schema"]}}}};
    return {};
  }
  return bad_request(
      fmt::format("'text.format.type' must be text, json_object or json_schema, got '{}'", type),
      "text.format.type");
}

// The Responses usage object.
json usage_object(const engine::BatchUsage& u, int64_t reasoning_tokens) {
  return {{"input_tokens", u.prompt_tokens},
          {"input_tokens_details", {{"cached_tokens", u.cached_tokens}}},
          {"output_tokens", u.completion_tokens},
          {"output_tokens_details", {{"reasoning_tokens", reasoning_tokens}}},
          {"total_tokens", u.prompt_tokens + u.completion_tokens}};
}

// Turns assembled deltas into output items, in order: reasoning, message (output_text), function_call.
// With `emit` set, every step is also a streamed event (without its sequence_number).
class OutputBuilder {
 public:
  using Emit = std::function<void(json event)>;
  explicit OutputBuilder(Emit emit) : emit_(std::move(emit)) {}

  void push(const Delta& d) {
    if (!d.reasoning.empty()) {
      if (open_ != Open::kReasoning) {
        close();
        open(Open::kReasoning);
      }
      text_ += d.reasoning;
      all_reasoning_ += d.reasoning;
      event({{"type", "response.reasoning_text.delta"},
             {"item_id", item_["id"]},
             {"output_index", index()},
             {"content_index", 0},
             {"delta", d.reasoning}});
    }
    if (!d.content.empty()) {
      if (open_ != Open::kMessage) {
        close();
        open(Open::kMessage);
      }
      text_ += d.content;
      all_text_ += d.content;
      event({{"type", "response.output_text.delta"},
             {"item_id", item_["id"]},
             {"output_index", index()},
             {"content_index", 0},
             {"delta", d.content},
             {"logprobs", json::array()}});
    }
    for (const ToolCall& c : d.calls) {
      close();
      json item = {{"id", make_id("fc")},          {"type", "function_call"}, {"status", "in_progress"},
                   {"arguments", ""},              {"call_id", c.id},         {"name", c.name}};
      event({{"type", "response.output_item.added"}, {"output_index", index()}, {"item", item}});
      event({{"type", "response.function_call_arguments.delta"},
             {"item_id", item["id"]},
             {"output_index", index()},
             {"delta", c.arguments}});
      event({{"type", "response.function_call_arguments.done"},
             {"item_id", item["id"]},
             {"output_index", index()},
             {"name", c.name},
             {"arguments", c.arguments}});
      item["status"] = "completed";
      item["arguments"] = c.arguments;
      event({{"type", "response.output_item.done"}, {"output_index", index()}, {"item", item}});
      output_.push_back(std::move(item));
      calls_.push_back(c);
    }
  }

  // End of generation: closes the open item; an answer with neither text nor calls still has a message.
  void finish(bool incomplete) {
    incomplete_ = incomplete;
    if (open_ == Open::kNone && calls_.empty() && all_text_.empty()) open(Open::kMessage);
    close();
  }

  const json& output() const { return output_; }
  bool has_calls() const { return !calls_.empty(); }

  // The answer as one chat message, for the stored conversation.
  json assistant_message() const {
    json m = {{"role", "assistant"}, {"content", all_text_}};
    if (!all_reasoning_.empty()) m["reasoning_content"] = all_reasoning_;
    if (!calls_.empty()) m["tool_calls"] = tool_calls_json(calls_, 0, false);
    return m;
  }

 private:
  enum class Open { kNone, kReasoning, kMessage };
  int64_t index() const { return static_cast<int64_t>(output_.size()); }
  void event(json e) {
    if (emit_) emit_(std::move(e));
  }
  json part(const std::string& text) const {
    if (open_ == Open::kReasoning) return {{"type", "reasoning_text"}, {"text", text}};
    return {{"type", "output_text"}, {"text", text}, {"annotations", json::array()}};
  }
  void open(Open what) {
    open_ = what;
    text_.clear();
    if (what == Open::kReasoning) {
      item_ = {{"id", make_id("rs")}, {"type", "reasoning"}, {"summary", json::array()}, {"content", json::array()}};
    } else {
      item_ = {{"id", make_id("msg")},
               {"type", "message"},
               {"status", "in_progress"},
               {"role", "assistant"},
               {"content", json::array()}};
    }
    event({{"type", "response.output_item.added"}, {"output_index", index()}, {"item", item_}});
    event({{"type", "response.content_part.added"},
           {"item_id", item_["id"]},
           {"output_index", index()},
           {"content_index", 0},
           {"part", part("")}});
  }
  void close() {
    if (open_ == Open::kNone) return;
    const char* done = open_ == Open::kReasoning ? "response.reasoning_text.done" : "response.output_text.done";
    json d = {{"type", done}, {"item_id", item_["id"]}, {"output_index", index()}, {"content_index", 0},
              {"text", text_}};
    if (open_ == Open::kMessage) d["logprobs"] = json::array();
    event(std::move(d));
    json p = part(text_);
    event({{"type", "response.content_part.done"},
           {"item_id", item_["id"]},
           {"output_index", index()},
           {"content_index", 0},
           {"part", p}});
    item_["content"] = json::array({std::move(p)});
    if (open_ == Open::kMessage) item_["status"] = incomplete_ ? "incomplete" : "completed";
    event({{"type", "response.output_item.done"}, {"output_index", index()}, {"item", item_}});
    output_.push_back(std::move(item_));
    item_ = json();
    open_ = Open::kNone;
  }

  Emit emit_;
  Open open_ = Open::kNone;
  json item_;
  std::string text_;
  json output_ = json::array();
  std::string all_text_, all_reasoning_;
  std::vector<ToolCall> calls_;
  bool incomplete_ = false;
};

// What one generation ended with.
struct Outcome {
  engine::BatchUsage usage;
  Status error;
  std::optional<ApiError> dead_end;  // the grammar allowed no further token (a 400)
  std::string finish;
  bool cancelled = false;
  int64_t reasoning_tokens = 0;
};

// Drains the request's events into the assembler and builder (the one loop of both paths). `alive` is
// polled at least every kPoll; false cancels the request, as does `*broken` (a failed write) after any event.
Outcome pump(engine::RequestHandle& handle, ChoiceAssembler& assembler, OutputBuilder& builder,
             const std::function<bool()>& alive, const bool* broken = nullptr) {
  Outcome o;
  auto last_check = std::chrono::steady_clock::now();
  for (;;) {
    auto ev = handle.next(kPoll);
    const auto now = std::chrono::steady_clock::now();
    if (!ev || now - last_check >= kPoll) {
      last_check = now;
      if (alive && !alive()) {
        handle.cancel();
        o.cancelled = true;
        return o;
      }
    }
    if (!ev) continue;
    switch (ev->kind) {
      case engine::BatchEvent::Kind::kToken: {
        Delta d = assembler.push(ev->text);
        if (!d.reasoning.empty() && d.content.empty()) ++o.reasoning_tokens;
        builder.push(d);
        break;
      }
      case engine::BatchEvent::Kind::kDone:
        if (!ev->text.empty()) builder.push(assembler.push(ev->text));
        builder.push(assembler.finish());
        o.finish = ev->finish_reason;
        if (!o.dead_end) o.dead_end = grammar_dead_end(*ev);
        break;
      case engine::BatchEvent::Kind::kError:
        o.error = ev->error;
        break;
      case engine::BatchEvent::Kind::kFinished:
        o.usage = ev->usage;
        return o;
    }
    if (broken != nullptr && *broken) {
      handle.cancel();
      o.cancelled = true;
      return o;
    }
  }
}

}  // namespace

void ResponsesStore::put(const std::string& id, Entry entry) {
  if (capacity_ <= 0) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (entries_.count(id) == 0) order_.push_back(id);
  entries_[id] = std::move(entry);
  while (static_cast<int64_t>(order_.size()) > capacity_) {
    entries_.erase(order_.front());
    order_.pop_front();
  }
}

std::optional<ResponsesStore::Entry> ResponsesStore::get(const std::string& id) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(id);
  if (it == entries_.end()) return std::nullopt;
  return it->second;
}

size_t ResponsesStore::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return entries_.size();
}

std::optional<ApiError> translate_responses_request(std::string_view body, const ResponsesStore& store,
                                                    ResponsesRequest* out) {
  *out = ResponsesRequest();
  json b = parse_json(body);
  if (b.is_discarded()) return bad_request(invalid_json_message(body));
  if (!b.is_object()) return bad_request("the request body must be a JSON object");

  // Every field is known or refused: OpenAI's fields this server implements, plus the llama-server
  // sampling extensions the chat route takes.
  static const char* const kPassThrough[] = {"temperature", "top_p",          "seed",        "top_k",
                                             "min_p",       "repeat_penalty", "logit_bias",  "grammar",
                                             "presence_penalty", "frequency_penalty", "parallel_tool_calls"};
  static const char* const kHandled[] = {"model", "input",    "instructions",         "tools",     "tool_choice",
                                         "max_output_tokens", "text",                 "reasoning", "stream",
                                         "metadata",          "store",                "previous_response_id",
                                         "user",              "truncation",           "include"};
  json chat = json::object();
  for (const auto& [k, v] : b.items()) {
    bool known = false;
    for (const char* p : kPassThrough) {
      if (k == p) {
        known = true;
        if (!v.is_null()) chat[k] = v;
      }
    }
    for (const char* h : kHandled) known = known || k == h;
    if (!known)
      return bad_request(fmt::format("'{}' is not supported by /v1/responses on this server", k), k);
  }
  json& echo = out->echo;

  if (auto it = b.find("model"); it != b.end() && !it->is_null()) {
    if (!it->is_string()) return wrong_type("model", "a string", *it);
    out->model = it->get<std::string>();
    chat["model"] = *it;
  }
  if (auto it = b.find("stream"); it != b.end() && !it->is_null()) {
    if (!it->is_boolean()) return wrong_type("stream", "a boolean", *it);
    out->stream = it->get<bool>();
  }
  if (auto it = b.find("store"); it != b.end() && !it->is_null()) {
    if (!it->is_boolean()) return wrong_type("store", "a boolean", *it);
    out->store = it->get<bool>();
    if (out->store && store.capacity() <= 0)
      return bad_request("'store': the response store is disabled on this server (start it with "
                         "--responses-store N)",
                         "store");
  }
  if (auto it = b.find("truncation"); it != b.end() && !it->is_null()) {
    if (!it->is_string() || *it != "disabled")
      return bad_request("'truncation' must be \"disabled\" (the input is never truncated)", "truncation");
  }
  if (auto it = b.find("include"); it != b.end() && !it->is_null()) {
    if (!it->is_array()) return wrong_type("include", "an array", *it);
    if (!it->empty())
      return bad_request(fmt::format("'include': {} is not supported", (*it)[0].dump()), "include");
  }
  echo["user"] = nullptr;
  if (auto it = b.find("user"); it != b.end() && !it->is_null()) {
    if (!it->is_string()) return wrong_type("user", "a string", *it);
    echo["user"] = *it;
  }
  echo["metadata"] = json::object();
  if (auto it = b.find("metadata"); it != b.end() && !it->is_null()) {
    if (!it->is_object()) return wrong_type("metadata", "an object of strings", *it);
    if (it->size() > kMaxMetadataKeys)
      return bad_request(fmt::format("'metadata' may hold at most {} keys, got {}", kMaxMetadataKeys, it->size()),
                         "metadata");
    for (const auto& [k, v] : it->items()) {
      if (k.size() > 64) return bad_request("'metadata' keys must be at most 64 characters", "metadata");
      if (!v.is_string() || v.get<std::string>().size() > 512)
        return bad_request(fmt::format("'metadata.{}' must be a string of at most 512 characters", k), "metadata");
    }
    echo["metadata"] = *it;
  }

  // The conversation: instructions, the stored one (previous_response_id), then the input.
  json messages = json::array();
  echo["instructions"] = nullptr;
  if (auto it = b.find("instructions"); it != b.end() && !it->is_null()) {
    if (!it->is_string()) return wrong_type("instructions", "a string", *it);
    echo["instructions"] = *it;
    messages.push_back({{"role", "system"}, {"content", *it}});
    out->n_instruction_messages = 1;
  }
  if (auto it = b.find("previous_response_id"); it != b.end() && !it->is_null()) {
    if (!it->is_string()) return wrong_type("previous_response_id", "a string", *it);
    out->previous_response_id = it->get<std::string>();
    auto prev = store.get(out->previous_response_id);
    if (!prev)
      return ApiError{404,
                      fmt::format("Previous response with id '{}' not found (never stored with store: true, "
                                  "or evicted from the --responses-store of {})",
                                  out->previous_response_id, store.capacity()),
                      "invalid_request_error", "previous_response_id"};
    for (const auto& m : prev->messages) messages.push_back(m);
  }
  auto input = b.find("input");
  if (input == b.end() || input->is_null()) return bad_request("'input' is required", "input");
  const size_t before = messages.size();
  if (auto e = translate_input(*input, &messages)) return e;
  if (messages.size() == before) return bad_request("'input' must not be empty", "input");
  chat["messages"] = std::move(messages);

  echo["max_output_tokens"] = nullptr;
  if (auto it = b.find("max_output_tokens"); it != b.end() && !it->is_null()) {
    if (!it->is_number_integer() || it->get<int64_t>() < 1)
      return bad_request(fmt::format("'max_output_tokens' must be an integer of at least 1, got {}", it->dump()),
                         "max_output_tokens");
    chat["max_tokens"] = *it;
    echo["max_output_tokens"] = *it;
  }
  echo["tools"] = json::array();
  if (auto it = b.find("tools"); it != b.end() && !it->is_null()) {
    json tools;
    if (auto e = translate_tools(*it, &tools)) return e;
    if (!tools.empty()) chat["tools"] = std::move(tools);
    echo["tools"] = *it;
  }
  echo["tool_choice"] = "auto";
  if (auto it = b.find("tool_choice"); it != b.end() && !it->is_null()) {
    json choice;
    if (auto e = translate_tool_choice(*it, &choice)) return e;
    chat["tool_choice"] = std::move(choice);
    echo["tool_choice"] = *it;
  }
  echo["text"] = {{"format", {{"type", "text"}}}};
  if (auto it = b.find("text"); it != b.end() && !it->is_null()) {
    json format;
    if (auto e = translate_text(*it, &format)) return e;
    if (!format.is_null()) chat["response_format"] = std::move(format);
    if (it->contains("format") && !(*it)["format"].is_null()) echo["text"] = {{"format", (*it)["format"]}};
  }
  // reasoning: effort none/minimal turns the template's thinking switch off, low/medium/high on; the <think>
  // text comes back whole as a reasoning item (summary is accepted, there is no summariser).
  echo["reasoning"] = {{"effort", nullptr}, {"summary", nullptr}};
  if (auto it = b.find("reasoning"); it != b.end() && !it->is_null()) {
    if (!it->is_object()) return wrong_type("reasoning", "an object", *it);
    for (const auto& [k, v] : it->items()) {
      if (k == "effort") {
        if (v.is_null()) continue;
        const std::string e = v.is_string() ? v.get<std::string>() : "";
        if (e != "none" && e != "minimal" && e != "low" && e != "medium" && e != "high")
          return bad_request("'reasoning.effort' must be none, minimal, low, medium or high", "reasoning.effort");
        chat["chat_template_kwargs"] = {{"enable_thinking", e != "none" && e != "minimal"}};
        echo["reasoning"]["effort"] = v;
      } else if (k == "summary" || k == "generate_summary") {
        if (v.is_null()) continue;
        const std::string s = v.is_string() ? v.get<std::string>() : "";
        if (s != "auto" && s != "concise" && s != "detailed")
          return bad_request(fmt::format("'reasoning.{}' must be auto, concise or detailed", k),
                             "reasoning." + k);
        echo["reasoning"]["summary"] = v;
      } else {
        return bad_request(fmt::format("'reasoning.{}' is not supported", k), "reasoning." + k);
      }
    }
  }
  echo["temperature"] = b.contains("temperature") ? b["temperature"] : json(nullptr);
  echo["top_p"] = b.contains("top_p") ? b["top_p"] : json(nullptr);
  echo["parallel_tool_calls"] = b.contains("parallel_tool_calls") ? b["parallel_tool_calls"] : json(false);
  out->chat_body = std::move(chat);
  return {};
}

// ---- The Server's routes ----

namespace {

// The response object around `output` (status in_progress / completed / incomplete / failed).
json response_object(const std::string& id, int64_t created, const std::string& model, const ResponsesRequest& rr,
                     const std::string& status, json output, json usage, json error = nullptr) {
  json r = {{"id", id}, {"object", "response"}, {"created_at", created}, {"status", status}};
  r["error"] = std::move(error);
  r["incomplete_details"] =
      status == "incomplete" ? json{{"reason", "max_output_tokens"}} : json(nullptr);
  r["instructions"] = rr.echo["instructions"];
  r["max_output_tokens"] = rr.echo["max_output_tokens"];
  r["model"] = model;
  r["output"] = std::move(output);
  r["parallel_tool_calls"] = rr.echo["parallel_tool_calls"];
  r["previous_response_id"] = rr.previous_response_id.empty() ? json(nullptr) : json(rr.previous_response_id);
  r["reasoning"] = rr.echo["reasoning"];
  r["store"] = rr.store;
  r["temperature"] = rr.echo["temperature"];
  r["text"] = rr.echo["text"];
  r["tool_choice"] = rr.echo["tool_choice"];
  r["tools"] = rr.echo["tools"];
  r["top_p"] = rr.echo["top_p"];
  r["truncation"] = "disabled";
  r["usage"] = std::move(usage);
  r["user"] = rr.echo["user"];
  r["metadata"] = rr.echo["metadata"];
  return r;
}

// A chat-route error renamed to the Responses field it came from.
ApiError rename_param(ApiError e) {
  if (e.param == "messages") e.param = "input";
  if (e.param == "max_tokens") e.param = "max_output_tokens";
  if (e.param == "response_format") e.param = "text.format";
  return e;
}

}  // namespace

HttpResponse Server::responses_get(const std::string& id) {
  auto entry = responses_store_->get(id);
  if (!entry)
    return error_response({404,
                           fmt::format("Response with id '{}' not found (never stored with store: true, or "
                                       "evicted from the --responses-store of {})",
                                       id, responses_store_->capacity()),
                           "invalid_request_error",
                           {}});
  HttpResponse r;
  r.body = dump_json(entry->response);
  return r;
}

HttpResponse Server::responses_create(const HttpRequest& req, const std::function<bool()>& client_alive) {
  ResponsesRequest rr;
  if (auto err = translate_responses_request(req.body, *responses_store_, &rr)) return error_response(*err);
  ApiError lease_error;
  std::shared_ptr<ModelLease> lease = router().acquire(rr.model, client_alive, &lease_error);
  if (!lease) return error_response(lease_error);
  const engine::Engine& engine = lease->engine();
  RequestLimits limits;
  limits.n_vocab = engine.n_vocab();
  limits.n_slots = lease->batcher().options().n_slots;
  limits.defaults = options_.sampling;
  limits.tool_format = detect_tool_call_format(lease->chat_template().source());
  OpenAiRequest r;
  if (auto err = parse_chat_request(rr.chat_body.dump(), limits, &r)) return error_response(rename_param(*err));

  // The prompt, exactly as the chat route renders it.
  const tokenizer::Tokenizer& tok = engine.tokenizer();
  chat::ChatInputs in = r.chat;
  if (!in.extra.contains("bos_token")) in.extra["bos_token"] = tok.bos_text();
  if (!in.extra.contains("eos_token")) in.extra["eos_token"] = tok.eos_text();
  auto text = lease->chat_template().render(in);
  if (!text.ok()) return error_response(bad_request("chat template: " + text.status().message(), "input"));
  const bool starts_in_think = options_.reasoning && prompt_opens_think(*text);
  std::vector<int32_t> prompt = tok.encode_chat(*text);
  if (static_cast<int64_t>(prompt.size()) >= engine.n_ctx())
    return error_response(
        bad_request(fmt::format("the input has {} tokens but the context holds {} (at most {} for an input "
                                "that leaves room for one generated token)",
                                prompt.size(), engine.n_ctx(), engine.n_ctx() - 1),
                    "input"));

  engine::BatchRequest br;
  br.prompt = std::move(prompt);
  br.n_predict = r.n_predict;
  br.n_choices = 1;
  br.stop = r.stop;
  br.sampling = r.sampling;
  auto submitted = lease->batcher().submit(std::move(br));
  if (!submitted.ok()) return error_response(api_error_from_status(submitted.status()));
  std::shared_ptr<engine::RequestHandle> handle = std::move(*submitted);
  in_flight_.fetch_add(1);

  const std::string id = make_id("resp");
  const std::string model = lease->id();
  const int64_t created = static_cast<int64_t>(std::time(nullptr));
  const bool tools = !r.tools.is_null();
  const ToolCallFormat tool_format = r.tool_format;
  const bool reasoning = options_.reasoning;
  std::shared_ptr<ResponsesStore> store = responses_store_;
  // The final response object (and the stored conversation when store: true).
  auto conclude = [id, created, model, store](const ResponsesRequest& fields, const OutputBuilder& builder,
                                              const Outcome& o) {
    const bool incomplete = o.finish == "length" && !builder.has_calls();
    json response = response_object(id, created, model, fields, incomplete ? "incomplete" : "completed",
                                    builder.output(), usage_object(o.usage, o.reasoning_tokens));
    if (fields.store) {
      ResponsesStore::Entry entry;
      entry.response = response;
      entry.messages = json::array();
      const json& msgs = fields.chat_body["messages"];
      for (size_t i = fields.n_instruction_messages; i < msgs.size(); ++i) entry.messages.push_back(msgs[i]);
      entry.messages.push_back(builder.assistant_message());
      store->put(id, std::move(entry));
    }
    return response;
  };

  if (!rr.stream) {
    ChoiceAssembler assembler(reasoning, starts_in_think, tools, tool_format);
    OutputBuilder builder(nullptr);
    Outcome o = pump(*handle, assembler, builder, client_alive);
    in_flight_.fetch_sub(1);
    if (o.cancelled) return error_response({499, "client closed the connection", "invalid_request_error", {}});
    if (!o.error.ok()) {
      ApiError e = api_error_from_status(o.error);
      if (e.status < 500) e = {500, o.error.message(), "server_error", {}};
      return error_response(e);
    }
    if (o.dead_end) return error_response(*o.dead_end);
    builder.finish(o.finish == "length");
    HttpResponse res;
    res.body = dump_json(conclude(rr, builder, o));
    return res;
  }

  // Streaming: `event: <type>` + `data: <json>` frames, each with a sequence_number; the terminal event is
  // response.completed / response.incomplete, or response.failed then error. No [DONE].
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
      server->in_flight_.fetch_sub(1);
    }
  };
  std::shared_ptr<StreamGuard> guard(new StreamGuard{this, handle, lease});
  auto shared_rr = std::make_shared<ResponsesRequest>(std::move(rr));
  res.stream = [guard, handle, shared_rr, id, created, model, reasoning, starts_in_think, tools, tool_format,
                conclude](ResponseStream& out) {
    const ResponsesRequest& fields = *shared_rr;
    int64_t sequence = 0;
    bool ok = true, broken = false;
    auto emit = [&](json e) {
      const std::string type = e["type"].get<std::string>();
      e["sequence_number"] = sequence++;
      if (ok && !out.write("event: " + type + "\n" + sse_data(e))) ok = false;
      broken = !ok;
    };
    json initial = response_object(id, created, model, fields, "in_progress", json::array(), nullptr);
    emit({{"type", "response.created"}, {"response", initial}});
    emit({{"type", "response.in_progress"}, {"response", initial}});
    ChoiceAssembler assembler(reasoning, starts_in_think, tools, tool_format);
    OutputBuilder builder(emit);
    Outcome o = pump(*handle, assembler, builder, [&] { return ok && out.alive(); }, &broken);
    if (o.cancelled || !ok) {
      handle->cancel();
      return;
    }
    if (!o.error.ok() || o.dead_end) {
      ApiError e = o.dead_end ? *o.dead_end : api_error_from_status(o.error);
      if (!o.dead_end && e.status < 500) e = {500, o.error.message(), "server_error", {}};
      builder.finish(false);
      json failed = response_object(id, created, model, fields, "failed", builder.output(),
                                    usage_object(o.usage, o.reasoning_tokens),
                                    {{"code", e.type}, {"message", e.message}});
      emit({{"type", "response.failed"}, {"response", std::move(failed)}});
      emit({{"type", "error"}, {"code", e.type}, {"message", e.message}, {"param", nullptr}});
      guard->completed = true;
      return;
    }
    builder.finish(o.finish == "length");
    json final_response = conclude(fields, builder, o);
    const std::string type =
        final_response["status"] == "incomplete" ? "response.incomplete" : "response.completed";
    emit({{"type", type}, {"response", std::move(final_response)}});
    guard->completed = true;
  };
  return res;
}

}  // namespace minfer::server
