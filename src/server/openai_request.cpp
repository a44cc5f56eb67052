// Request validation for /v1/chat/completions and /v1/completions (see openai_request.h). Field names
// follow OpenAI; extensions follow llama-server (top_k, min_p, typical_p, repeat_penalty, dry_*, xtc_*,
// mirostat*, grammar, json_schema, chat_template_kwargs, n_predict).
#include "server/openai_request.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string_view>
#include <utility>

#include <fmt/format.h>

#include "sampling/grammar/grammar.h"
#include "sampling/json_schema/to_grammar.h"
#include "server/sse.h"
#include "server/tool_calls.h"

namespace minfer::server {
namespace {

using json = nlohmann::ordered_json;
using Err = std::optional<ApiError>;

// Field readers: absent or null leaves *out unchanged.
Err get_number(const json& body, const char* key, double* out, bool* present = nullptr) {
  auto it = body.find(key);
  if (present != nullptr) *present = false;
  if (it == body.end() || it->is_null()) return {};
  if (!it->is_number()) return wrong_type(key, "a number", *it);
  *out = it->get<double>();
  if (!std::isfinite(*out)) return bad_request(fmt::format("'{}' must be finite", key), key);
  if (present != nullptr) *present = true;
  return {};
}

Err get_float(const json& body, const char* key, float* out) {
  double v = *out;
  if (auto e = get_number(body, key, &v)) return e;
  *out = static_cast<float>(v);
  return {};
}

Err get_int(const json& body, const char* key, int64_t* out, bool* present = nullptr) {
  auto it = body.find(key);
  if (present != nullptr) *present = false;
  if (it == body.end() || it->is_null()) return {};
  if (it->is_number_float()) {
    const double d = it->get<double>();
    if (d != std::floor(d) || std::abs(d) > 9e15) return wrong_type(key, "an integer", *it);
    *out = static_cast<int64_t>(d);
  } else if (it->is_number_integer()) {
    *out = it->get<int64_t>();
  } else if (it->is_number_unsigned()) {
    const uint64_t u = it->get<uint64_t>();
    *out = u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())
               ? std::numeric_limits<int64_t>::max()
               : static_cast<int64_t>(u);
  } else {
    return wrong_type(key, "an integer", *it);
  }
  if (present != nullptr) *present = true;
  return {};
}

Err get_int32(const json& body, const char* key, int32_t* out, int64_t lo, int64_t hi) {
  int64_t v = *out;
  bool present = false;
  if (auto e = get_int(body, key, &v, &present)) return e;
  if (!present) return {};
  if (v < lo || v > hi)
    return bad_request(fmt::format("'{}' must be in [{}, {}], got {}", key, lo, hi, v), key);
  *out = static_cast<int32_t>(v);
  return {};
}

Err get_bool(const json& body, const char* key, bool* out) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null()) return {};
  if (!it->is_boolean()) return wrong_type(key, "a boolean", *it);
  *out = it->get<bool>();
  return {};
}

Err get_string(const json& body, const char* key, std::string* out) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null()) return {};
  if (!it->is_string()) return wrong_type(key, "a string", *it);
  *out = it->get<std::string>();
  return {};
}

Err range(const char* key, double v, double lo, double hi, bool lo_open = false) {
  const bool ok = (lo_open ? v > lo : v >= lo) && v <= hi;
  if (ok) return {};
  return bad_request(fmt::format("'{}' must be in {}{}, {}], got {}", key, lo_open ? "(" : "[", lo, hi, v),
                     key);
}

// SamplerConfig::validate speaks in the CLI's flags ("sampling: --min-p must be in [0, 1], got 5"); a
// request set the value through its own field, so the error names that field (message and param).
ApiError sampling_error(const std::string& message) {
  static constexpr std::pair<std::string_view, const char*> kFields[] = {
      {"--temp", "temperature"},
      {"--top-k", "top_k"},
      {"--top-p", "top_p"},
      {"--min-p", "min_p"},
      {"--typical", "typical_p"},
      {"--repeat-penalty", "repeat_penalty"},
      {"--repeat-last-n", "repeat_last_n"},
      {"--frequency-penalty", "frequency_penalty"},
      {"--presence-penalty", "presence_penalty"},
      {"--dry-multiplier", "dry_multiplier"},
      {"--dry-base", "dry_base"},
      {"--dry-allowed-length", "dry_allowed_length"},
      {"--dry-penalty-last-n", "dry_penalty_last_n"},
      {"--dry-sequence-breakers", "dry_sequence_breakers"},
      {"--xtc-probability", "xtc_probability"},
      {"--xtc-threshold", "xtc_threshold"},
      {"--mirostat-tau", "mirostat_tau"},
      {"--mirostat-eta", "mirostat_eta"},
      {"--mirostat", "mirostat"},
      {"--logit-bias", "logit_bias"},
  };
  std::string text = message;
  if (text.rfind("sampling: ", 0) == 0) text = text.substr(10);
  for (const auto& [flag, field] : kFields) {
    if (text.rfind(flag, 0) != 0) continue;
    const char next = text.size() > flag.size() ? text[flag.size()] : ' ';
    if (next == '-' || (next >= 'a' && next <= 'z')) continue;  // a longer flag (--mirostat-tau)
    return bad_request(fmt::format("'{}'{}", field, text.substr(flag.size())), field);
  }
  return bad_request(message);
}

Err parse_json_body(std::string_view body, json* out) {
  *out = parse_json(body);
  if (out->is_discarded()) return bad_request(invalid_json_message(body));
  if (!out->is_object()) return bad_request("the request body must be a JSON object");
  return {};
}

// Every field of a request is read or refused, as OpenAI answers an unrecognized argument: a misspelt or
// unsupported field ignored would change the answer silently. Three fields that clients send by habit
// change nothing here and are accepted: `user` (an end-user id for abuse monitoring), llama-server's
// `cache_prompt` (a cached prefix is always reused, and an answer does not depend on it) and `store: false`
// (OpenAI's own default; `store: true` asks for a stored completion this server cannot keep).
// clang-format off
constexpr std::string_view kCommonFields[] = {
    "model", "n_predict", "max_tokens", "max_completion_tokens", "temperature", "top_p",
    "presence_penalty", "frequency_penalty", "n", "seed", "stop", "logit_bias", "top_k", "min_p",
    "typical_p", "repeat_penalty", "repeat_last_n", "dry_multiplier", "dry_base", "dry_allowed_length",
    "dry_penalty_last_n", "dry_sequence_breakers", "xtc_probability", "xtc_threshold", "mirostat",
    "mirostat_tau", "mirostat_eta", "grammar", "json_schema", "response_format", "stream",
    "stream_options", "user", "cache_prompt", "store"};
constexpr std::string_view kChatFields[] = {
    "messages", "tools", "tool_choice", "parallel_tool_calls", "logprobs", "top_logprobs",
    "chat_template_kwargs"};
// clang-format on
constexpr std::string_view kCompletionFields[] = {"prompt", "logprobs"};

// Sampling and generation fields shared by both endpoints.
Err parse_common(const json& b, const RequestLimits& limits, OpenAiRequest* r) {
  r->sampling = limits.defaults;
  sampling::SamplerConfig& s = r->sampling;
  if (auto e = get_string(b, "model", &r->model)) return e;

  // Token limits: max_completion_tokens (new name) wins over max_tokens; n_predict is llama-server's.
  for (const char* key : {"n_predict", "max_tokens", "max_completion_tokens"}) {
    int64_t v = 0;
    bool present = false;
    if (auto e = get_int(b, key, &v, &present)) return e;
    if (!present) continue;
    if (std::string_view(key) == "n_predict" && v == -1) {
      r->n_predict = -1;
      continue;
    }
    if (v < 1) return bad_request(fmt::format("'{}' must be at least 1, got {}", key, v), key);
    r->n_predict = static_cast<int32_t>(std::min<int64_t>(v, std::numeric_limits<int32_t>::max()));
  }

  double temp = s.temp;
  bool has = false;
  if (auto e = get_number(b, "temperature", &temp, &has)) return e;
  if (has) {
    if (auto e = range("temperature", temp, 0.0, 2.0)) return e;
    s.temp = static_cast<float>(temp);
  }
  double top_p = s.top_p;
  if (auto e = get_number(b, "top_p", &top_p, &has)) return e;
  if (has) {
    if (auto e = range("top_p", top_p, 0.0, 1.0, /*lo_open=*/true)) return e;
    s.top_p = static_cast<float>(top_p);
  }
  for (auto [key, field] : {std::pair{"presence_penalty", &s.presence_penalty},
                            std::pair{"frequency_penalty", &s.frequency_penalty}}) {
    double v = *field;
    if (auto e = get_number(b, key, &v, &has)) return e;
    if (has) {
      if (auto e = range(key, v, -2.0, 2.0)) return e;
      *field = static_cast<float>(v);
    }
  }
  if (auto e = get_int32(b, "n", &r->n, 1, limits.n_slots)) return e;

  int64_t seed = 0;
  if (auto e = get_int(b, "seed", &seed, &has)) return e;
  if (has) s.seed = static_cast<uint64_t>(seed) & 0xFFFFFFFFull;

  // stop: a string or an array of up to 4 strings.
  if (auto it = b.find("stop"); it != b.end() && !it->is_null()) {
    if (it->is_string()) {
      r->stop = {it->get<std::string>()};
    } else if (it->is_array()) {
      if (it->size() > 4)
        return bad_request(fmt::format("'stop' may hold at most 4 strings, got {}", it->size()), "stop");
      for (const auto& v : *it) {
        if (!v.is_string()) return wrong_type("stop[]", "a string", v);
        r->stop.push_back(v.get<std::string>());
      }
    } else {
      return wrong_type("stop", "a string or an array of strings", *it);
    }
    for (const auto& st : r->stop)
      if (st.empty()) return bad_request("'stop' strings must not be empty", "stop");
  }

  // logit_bias: {"token id": bias} (OpenAI) or [[id, bias], ...] (llama-server).
  if (auto it = b.find("logit_bias"); it != b.end() && !it->is_null()) {
    auto add = [&](int64_t id, const json& bias) -> Err {
      if (id < 0 || id >= limits.n_vocab)
        return bad_request(
            fmt::format("'logit_bias': token id {} is outside the vocabulary [0, {})", id, limits.n_vocab),
            "logit_bias");
      if (!bias.is_number()) return wrong_type("logit_bias", "a map of token ids to numbers", bias);
      const double v = bias.get<double>();
      if (!(v >= -100.0 && v <= 100.0))
        return bad_request(fmt::format("'logit_bias': bias {} for token {} is outside [-100, 100]", v, id),
                           "logit_bias");
      s.logit_bias.push_back({static_cast<int32_t>(id), static_cast<float>(v)});
      return {};
    };
    if (it->is_object()) {
      for (const auto& [key, bias] : it->items()) {
        char* end = nullptr;
        const long long id = std::strtoll(key.c_str(), &end, 10);
        if (key.empty() || *end != '\0')
          return bad_request(fmt::format("'logit_bias': key '{}' is not a token id", key), "logit_bias");
        if (auto e = add(id, bias)) return e;
      }
    } else if (it->is_array()) {
      for (const auto& pair : *it) {
        if (!pair.is_array() || pair.size() != 2 || !pair[0].is_number_integer())
          return wrong_type("logit_bias[]", "an [id, bias] pair", pair);
        if (auto e = add(pair[0].get<int64_t>(), pair[1])) return e;
      }
    } else {
      return wrong_type("logit_bias", "an object", *it);
    }
  }

  // llama-server extensions.
  if (auto e = get_int32(b, "top_k", &s.top_k, 0, std::numeric_limits<int32_t>::max())) return e;
  if (auto e = get_float(b, "min_p", &s.min_p)) return e;
  if (auto e = get_float(b, "typical_p", &s.typical_p)) return e;
  if (auto e = get_float(b, "repeat_penalty", &s.repeat_penalty)) return e;
  if (auto e = get_int32(b, "repeat_last_n", &s.repeat_last_n, -1, std::numeric_limits<int32_t>::max()))
    return e;
  if (auto e = get_float(b, "dry_multiplier", &s.dry_multiplier)) return e;
  if (auto e = get_float(b, "dry_base", &s.dry_base)) return e;
  if (auto e =
          get_int32(b, "dry_allowed_length", &s.dry_allowed_length, 0, std::numeric_limits<int32_t>::max()))
    return e;
  if (auto e =
          get_int32(b, "dry_penalty_last_n", &s.dry_penalty_last_n, -1, std::numeric_limits<int32_t>::max()))
    return e;
  if (auto it = b.find("dry_sequence_breakers"); it != b.end() && !it->is_null()) {
    if (!it->is_array()) return wrong_type("dry_sequence_breakers", "an array of strings", *it);
    s.dry_sequence_breakers.clear();
    for (const auto& v : *it) {
      if (!v.is_string()) return wrong_type("dry_sequence_breakers[]", "a string", v);
      s.dry_sequence_breakers.push_back(v.get<std::string>());
    }
  }
  if (auto e = get_float(b, "xtc_probability", &s.xtc_probability)) return e;
  if (auto e = get_float(b, "xtc_threshold", &s.xtc_threshold)) return e;
  if (auto e = get_int32(b, "mirostat", &s.mirostat, 0, 2)) return e;
  if (auto e = get_float(b, "mirostat_tau", &s.mirostat_tau)) return e;
  if (auto e = get_float(b, "mirostat_eta", &s.mirostat_eta)) return e;

  // One grammar per request: `grammar` (GBNF), `json_schema` (llama-server) or response_format.
  std::string grammar;
  if (auto e = get_string(b, "grammar", &grammar)) return e;
  json schema;
  bool has_schema = false;
  if (auto it = b.find("json_schema"); it != b.end() && !it->is_null()) {
    if (!it->is_object()) return wrong_type("json_schema", "an object", *it);
    schema = *it;
    has_schema = true;
  }
  std::string format_type = "text";
  if (auto it = b.find("response_format"); it != b.end() && !it->is_null()) {
    if (!it->is_object()) return wrong_type("response_format", "an object", *it);
    auto t = it->find("type");
    if (t == it->end() || !t->is_string())
      return bad_request("'response_format.type' must be a string", "response_format");
    format_type = t->get<std::string>();
    if (format_type == "json_object") {
      schema = it->contains("schema") ? (*it)["schema"] : json{{"type", "object"}};
      has_schema = true;
    } else if (format_type == "json_schema") {
      const json* js = nullptr;
      if (it->contains("json_schema") && (*it)["json_schema"].is_object()) {
        const json& inner = (*it)["json_schema"];
        if (inner.contains("schema")) js = &inner["schema"];
      } else if (it->contains("schema")) {
        js = &(*it)["schema"];
      }
      if (js == nullptr || !js->is_object())
        return bad_request("'response_format.json_schema.schema' must be an object", "response_format");
      schema = *js;
      has_schema = true;
    } else if (format_type != "text") {
      return bad_request(
          fmt::format("'response_format.type' must be text, json_object or json_schema, got '{}'",
                      format_type),
          "response_format");
    }
  }
  if (!grammar.empty() && (has_schema || format_type != "text"))
    return bad_request("'grammar' cannot be combined with a non-text response_format or json_schema",
                       "grammar");
  if (has_schema) {
    auto gbnf = sampling::json_schema::to_grammar_from_json(schema);
    if (!gbnf.ok()) return bad_request(gbnf.status().message(), "response_format");
    grammar = *gbnf;
  }
  if (!grammar.empty() && !has_schema) {
    // Checked here so a bad grammar is a 400 naming 'grammar', not a param-less refusal from the batcher.
    auto parsed = sampling::grammar::Grammar::parse(grammar);
    if (!parsed.ok()) return bad_request(parsed.status().message(), "grammar");
  }
  r->has_user_grammar = !grammar.empty();
  s.grammar = grammar;
  s.json_schema.clear();

  bool ignored = false;
  if (auto e = get_bool(b, "cache_prompt", &ignored)) return e;
  bool store = false;
  if (auto e = get_bool(b, "store", &store)) return e;
  if (store) return bad_request("'store': true is not supported: this server keeps no completions", "store");

  if (auto e = get_bool(b, "stream", &r->stream)) return e;
  if (auto it = b.find("stream_options"); it != b.end() && !it->is_null()) {
    if (!it->is_object()) return wrong_type("stream_options", "an object", *it);
    // As OpenAI: the options of a stream are an error on a request that does not stream.
    if (!r->stream)
      return bad_request("'stream_options' is only allowed with 'stream': true", "stream_options");
    for (const auto& [key, value] : it->items()) {
      if (key != "include_usage")
        return bad_request(fmt::format("unknown field 'stream_options.{}' (only include_usage)", key),
                           "stream_options");
    }
    if (auto e = get_bool(*it, "include_usage", &r->include_usage)) return e;
  }

  Status st = s.validate(limits.n_vocab);
  if (!st.ok()) return sampling_error(st.message());
  return {};
}

// content: a string, null, or an array of {"type":"text","text":...} parts (joined).
Err normalise_content(const json& msg, size_t i, json* out) {
  const std::string field = fmt::format("messages[{}].content", i);
  auto it = msg.find("content");
  if (it == msg.end() || it->is_null()) {
    *out = nullptr;
    return {};
  }
  if (it->is_string()) {
    *out = *it;
    return {};
  }
  if (!it->is_array()) return wrong_type(field, "a string or an array of content parts", *it);
  std::string text;
  for (size_t p = 0; p < it->size(); ++p) {
    const json& part = (*it)[p];
    const std::string pf = fmt::format("{}[{}]", field, p);
    if (part.is_string()) {
      text += part.get<std::string>();
      continue;
    }
    if (!part.is_object() || !part.contains("type") || !part["type"].is_string())
      return bad_request(fmt::format("'{}' must be a content part object with a 'type'", pf), field);
    const std::string type = part["type"].get<std::string>();
    if (type != "text")
      return bad_request(fmt::format("'{}': content part type '{}' is not supported (only text)", pf, type),
                         field);
    if (!part.contains("text") || !part["text"].is_string())
      return bad_request(fmt::format("'{}.text' must be a string", pf), field);
    if (!text.empty()) text += "\n";
    text += part["text"].get<std::string>();
  }
  *out = text;
  return {};
}

Err normalise_tool_calls(const json& calls, size_t i, json* out) {
  const std::string field = fmt::format("messages[{}].tool_calls", i);
  if (!calls.is_array()) return wrong_type(field, "an array", calls);
  *out = json::array();
  for (size_t c = 0; c < calls.size(); ++c) {
    const json& call = calls[c];
    const json* fn = call.is_object() && call.contains("function") ? &call["function"] : nullptr;
    if (fn == nullptr || !fn->is_object() || !fn->contains("name") || !(*fn)["name"].is_string())
      return bad_request(fmt::format("'{}[{}].function.name' must be a string", field, c), field);
    json args = fn->contains("arguments") ? (*fn)["arguments"] : json::object();
    if (args.is_string()) {
      // Templates render arguments as an object (Qwen2.5 pipes them through tojson).
      json parsed = parse_json(args.get<std::string>());
      if (!parsed.is_discarded()) args = parsed;
    }
    json item = {{"type", "function"}, {"function", {{"name", (*fn)["name"]}, {"arguments", args}}}};
    if (call.contains("id") && call["id"].is_string()) item["id"] = call["id"];
    out->push_back(std::move(item));
  }
  return {};
}

Err parse_messages(const json& b, OpenAiRequest* r) {
  auto it = b.find("messages");
  if (it == b.end()) return bad_request("'messages' is required", "messages");
  if (!it->is_array()) return wrong_type("messages", "an array", *it);
  if (it->empty()) return bad_request("'messages' must not be empty", "messages");
  for (size_t i = 0; i < it->size(); ++i) {
    const json& m = (*it)[i];
    const std::string field = fmt::format("messages[{}]", i);
    if (!m.is_object()) return wrong_type(field, "an object", m);
    auto role_it = m.find("role");
    if (role_it == m.end()) return bad_request(fmt::format("'{}.role' is required", field), "messages");
    if (!role_it->is_string()) return wrong_type(field + ".role", "a string", *role_it);
    std::string role = role_it->get<std::string>();
    if (role == "developer") role = "system";
    if (role != "system" && role != "user" && role != "assistant" && role != "tool")
      return bad_request(
          fmt::format("'{}.role': unknown role '{}' (use system, user, assistant or tool)", field, role),
          "messages");
    json out = {{"role", role}};
    json content;
    if (auto e = normalise_content(m, i, &content)) return e;
    const bool has_calls = m.contains("tool_calls") && !m["tool_calls"].is_null();
    if (content.is_null() && !(role == "assistant" && has_calls))
      return bad_request(fmt::format("'{}.content' is required", field), "messages");
    out["content"] = content.is_null() ? json("") : content;
    if (has_calls) {
      if (role != "assistant")
        return bad_request(fmt::format("'{}.tool_calls' is only allowed on assistant messages", field),
                           "messages");
      json calls;
      if (auto e = normalise_tool_calls(m["tool_calls"], i, &calls)) return e;
      out["tool_calls"] = std::move(calls);
    }
    for (const char* key : {"tool_call_id", "name", "reasoning_content"}) {
      if (auto f = m.find(key); f != m.end() && !f->is_null()) {
        if (!f->is_string()) return wrong_type(fmt::format("{}.{}", field, key), "a string", *f);
        out[key] = *f;
      }
    }
    r->chat.messages.push_back(std::move(out));
  }
  return {};
}

Err parse_tools(const json& b, OpenAiRequest* r) {
  if (auto it = b.find("tools"); it != b.end() && !it->is_null()) {
    if (!it->is_array()) return wrong_type("tools", "an array", *it);
    for (size_t i = 0; i < it->size(); ++i) {
      const json& t = (*it)[i];
      const std::string field = fmt::format("tools[{}]", i);
      if (!t.is_object()) return wrong_type(field, "an object", t);
      if (t.contains("type") && (!t["type"].is_string() || t["type"] != "function"))
        return bad_request(fmt::format("'{}.type' must be \"function\"", field), "tools");
      if (!t.contains("function") || !t["function"].is_object())
        return bad_request(fmt::format("'{}.function' must be an object", field), "tools");
      const json& fn = t["function"];
      if (!fn.contains("name") || !fn["name"].is_string() || fn["name"].get<std::string>().empty())
        return bad_request(fmt::format("'{}.function.name' must be a non-empty string", field), "tools");
      if (fn.contains("parameters") && !fn["parameters"].is_object())
        return bad_request(fmt::format("'{}.function.parameters' must be an object", field), "tools");
    }
    if (!it->empty()) r->tools = *it;
  }
  if (auto it = b.find("tool_choice"); it != b.end() && !it->is_null()) {
    if (it->is_string()) {
      const std::string v = it->get<std::string>();
      if (v == "auto")
        r->tool_choice.mode = ToolChoice::Mode::kAuto;
      else if (v == "none")
        r->tool_choice.mode = ToolChoice::Mode::kNone;
      else if (v == "required")
        r->tool_choice.mode = ToolChoice::Mode::kRequired;
      else
        return bad_request(
            fmt::format("'tool_choice' must be none, auto, required or a function, got '{}'", v),
            "tool_choice");
    } else if (it->is_object() && it->contains("function") && (*it)["function"].is_object() &&
               (*it)["function"].contains("name") && (*it)["function"]["name"].is_string()) {
      r->tool_choice.mode = ToolChoice::Mode::kNamed;
      r->tool_choice.name = (*it)["function"]["name"].get<std::string>();
    } else {
      return bad_request(
          "'tool_choice' must be a string or {\"type\":\"function\",\"function\":{\"name\":...}}",
          "tool_choice");
    }
    const bool forcing =
        r->tool_choice.mode == ToolChoice::Mode::kRequired || r->tool_choice.mode == ToolChoice::Mode::kNamed;
    if (forcing && r->tools.is_null()) return bad_request("'tool_choice' requires 'tools'", "tool_choice");
  }
  if (auto e = get_bool(b, "parallel_tool_calls", &r->parallel_tool_calls)) return e;
  if (r->tool_choice.mode == ToolChoice::Mode::kNone) r->tools = nullptr;
  const bool forcing =
      r->tool_choice.mode == ToolChoice::Mode::kRequired || r->tool_choice.mode == ToolChoice::Mode::kNamed;
  if (forcing && !r->has_user_grammar) {
    auto gbnf = tool_call_grammar(r->tools, r->tool_choice.name, r->parallel_tool_calls, r->tool_format);
    if (!gbnf.ok()) return bad_request(gbnf.status().message(), "tool_choice");
    r->sampling.grammar = *gbnf;
  }
  return {};
}

}  // namespace

std::optional<ApiError> parse_chat_request(std::string_view body, const RequestLimits& limits,
                                           OpenAiRequest* out) {
  *out = OpenAiRequest();
  out->endpoint = Endpoint::kChat;
  json b;
  if (auto e = parse_json_body(body, &b)) return e;
  if (auto e = unknown_field(b, {kCommonFields, kChatFields}, "/v1/chat/completions")) return e;
  if (auto e = parse_messages(b, out)) return e;
  if (auto e = parse_common(b, limits, out)) return e;
  out->tool_format = limits.tool_format;
  if (auto e = parse_tools(b, out)) return e;
  // logprobs: a boolean plus top_logprobs (0..20).
  bool logprobs = false;
  if (auto e = get_bool(b, "logprobs", &logprobs)) return e;
  int32_t top = 0;
  if (auto e = get_int32(b, "top_logprobs", &top, 0, 20)) return e;
  if (b.contains("top_logprobs") && !b["top_logprobs"].is_null() && !logprobs)
    return bad_request("'top_logprobs' requires 'logprobs': true", "top_logprobs");
  out->n_top_logprobs = logprobs ? top : -1;
  out->chat.tools = out->tools;
  out->chat.add_generation_prompt = true;
  if (auto it = b.find("chat_template_kwargs"); it != b.end() && !it->is_null()) {
    if (!it->is_object()) return wrong_type("chat_template_kwargs", "an object", *it);
    for (const auto& [k, v] : it->items()) {
      // These would silently replace what the request's own fields (validated above) give the template.
      if (k == "messages" || k == "tools" || k == "add_generation_prompt")
        return bad_request(fmt::format("'chat_template_kwargs.{}' would replace the request's {}; send it as "
                                       "the request field instead",
                                       k, k == "add_generation_prompt" ? "generation prompt" : k),
                           "chat_template_kwargs");
      out->chat.extra[k] = v;
    }
  }
  return {};
}

std::optional<ApiError> parse_completion_request(std::string_view body, const RequestLimits& limits,
                                                 OpenAiRequest* out) {
  *out = OpenAiRequest();
  out->endpoint = Endpoint::kCompletion;
  json b;
  if (auto e = parse_json_body(body, &b)) return e;
  if (auto e = unknown_field(b, {kCommonFields, kCompletionFields}, "/v1/completions")) return e;
  auto it = b.find("prompt");
  if (it == b.end() || it->is_null()) return bad_request("'prompt' is required", "prompt");
  if (it->is_string()) {
    out->prompt_text = it->get<std::string>();
    if (out->prompt_text.empty()) return bad_request("'prompt' must not be empty", "prompt");
  } else if (it->is_array()) {
    // A token-id array, or a one-element array holding a string or a token-id array.
    const json* p = &*it;
    if (p->size() == 1 && ((*p)[0].is_string() || (*p)[0].is_array())) p = &(*p)[0];
    // Several prompts in one request (OpenAI answers one choice per prompt) are refused by name.
    if (p->size() > 1 &&
        std::all_of(p->begin(), p->end(), [](const json& v) { return v.is_string() || v.is_array(); }))
      return bad_request(
          fmt::format("'prompt' holds {} prompts; this server takes one prompt per request (send "
                      "one request each)",
                      p->size()),
          "prompt");
    if (p->is_string()) {
      out->prompt_text = p->get<std::string>();
      if (out->prompt_text.empty()) return bad_request("'prompt' must not be empty", "prompt");
    } else {
      if (p->empty()) return bad_request("'prompt' must not be empty", "prompt");
      for (const auto& v : *p) {
        if (!v.is_number_integer())
          return bad_request("'prompt' must be a string or an array of token ids", "prompt");
        const int64_t id = v.get<int64_t>();
        if (id < 0 || id >= limits.n_vocab)
          return bad_request(
              fmt::format("'prompt': token id {} is outside the vocabulary [0, {})", id, limits.n_vocab),
              "prompt");
        out->prompt_tokens.push_back(static_cast<int32_t>(id));
      }
      out->prompt_is_tokens = true;
    }
  } else {
    return wrong_type("prompt", "a string or an array of token ids", *it);
  }
  if (auto e = parse_common(b, limits, out)) return e;
  // Legacy logprobs: an integer 0..5 (we allow up to 20).
  int32_t logprobs = -1;
  if (auto e = get_int32(b, "logprobs", &logprobs, 0, 20)) return e;
  out->n_top_logprobs = logprobs;
  return {};
}

}  // namespace minfer::server
