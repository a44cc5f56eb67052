// Routes of the OpenAI-compatible server (see server.h). Every failure is an OpenAI error object; a
// request is validated completely (JSON, fields, template, prompt length, grammar) before it may start
// a stream, so a refusal is always a proper HTTP status, never a broken stream.
#include "server/server.h"

#include <cctype>
#include <chrono>
#include <ctime>
#include <optional>
#include <string_view>

#include <fmt/format.h>

#include "core/check.h"
#include "core/log.h"
#include "server/anthropic_api.h"
#include "server/embeddings.h"
#include "server/openai_request.h"
#include "server/openai_response.h"
#include "server/responses_api.h"
#include "server/sse.h"

namespace minfer::server {
namespace {

using json = nlohmann::ordered_json;
using std::chrono::milliseconds;

constexpr milliseconds kPoll{100};

HttpResponse json_response(int status, const json& body) {
  HttpResponse r;
  r.status = status;
  r.body = dump_json(body);
  return r;
}

bool constant_time_equal(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

constexpr std::string_view kTokenizeFields[] = {"content", "add_special", "with_pieces", "parse_special",
                                                "model"};
constexpr std::string_view kDetokenizeFields[] = {"tokens", "model"};

std::string token_text_or_empty(const tokenizer::Tokenizer& tok, int32_t id) {
  return id >= 0 && id < tok.n_vocab() ? std::string(tok.token_bytes(id)) : std::string();
}

// Per-choice state of one response, shared by the streaming and non-streaming paths.
struct ChoiceState {
  ChoiceAssembler assembler;
  std::string text;  // completions: the raw text
  std::string finish;
  bool done = false;
  json logprobs = json::array();  // chat: entries
  json tokens = json::array(), token_logprobs = json::array(), top = json::array(),
       offsets = json::array();  // legacy
  int32_t n_streamed_calls = 0;
  ChoiceState(bool reasoning, bool think, bool tools, ToolCallFormat format)
      : assembler(reasoning, think, tools, format) {}
};

}  // namespace

Server::Server(ServerOptions options) : options_(std::move(options)) {
  responses_store_ = std::make_shared<ResponsesStore>(options_.responses_store);
  created_ = static_cast<int64_t>(std::time(nullptr));
}
Server::~Server() = default;

void Server::set_model(engine::Engine* engine, engine::Batcher* batcher, chat::ChatTemplate tmpl) {
  auto model = std::make_unique<LoadedModel>();
  model->engine = engine;
  model->batcher = batcher;
  model->embedder = embedder_;
  model->chat_template = std::move(tmpl);
  // No loader: the caller's model is never unloaded.
  auto router = std::make_unique<ModelRouter>(std::vector<ModelSpec>{{options_.model_id, "", {}}}, nullptr,
                                              RouterOptions{});
  MINFER_CHECK(router->adopt(options_.model_id, std::move(model)).ok(), "Server::set_model");
  set_router(std::move(router));
}

void Server::set_router(std::unique_ptr<ModelRouter> router) {
  router_ = std::move(router);
  ready_.store(true, std::memory_order_release);
}

std::shared_ptr<ModelLease> Server::lease_for(const std::string& body,
                                              const std::function<bool()>& client_alive,
                                              ApiError* error) const {
  const json b = parse_json(body);
  std::string name;
  if (b.is_object() && b.contains("model") && b["model"].is_string()) name = b["model"].get<std::string>();
  return router_->acquire(name, client_alive, error);
}

HttpResponse Server::error_response(const ApiError& error) {
  HttpResponse r = json_response(error.status, error.to_json());
  if (error.status == 503) r.headers.emplace_back("Retry-After", "1");
  if (error.status == 401) r.headers.emplace_back("WWW-Authenticate", "Bearer");
  return r;
}

bool Server::authorized(const HttpRequest& req, bool accept_x_api_key) const {
  if (options_.api_key.empty()) return true;
  if (accept_x_api_key) {
    const std::string key = req.header("x-api-key");
    if (!key.empty()) return constant_time_equal(key, options_.api_key);
  }
  // The scheme is case-insensitive (RFC 7235 §2.1): "bearer KEY" is the same credential.
  const std::string auth = req.header("authorization");
  constexpr std::string_view kScheme = "bearer";
  if (auth.size() <= kScheme.size() + 1) return false;
  for (size_t i = 0; i < kScheme.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(auth[i])) != kScheme[i]) return false;
  }
  size_t at = kScheme.size();
  if (auth[at] != ' ') return false;
  while (at < auth.size() && auth[at] == ' ') ++at;
  return constant_time_equal(auth.substr(at), options_.api_key);
}

std::string Server::metrics_text() const {
  HttpCounters h;
  h.rejected = rejected_.load();
  h.in_flight = in_flight_.load();
  h.errors_4xx = errors_4xx_.load();
  h.errors_5xx = errors_5xx_.load();
  h.ready = ready() && !draining();
  h.draining = draining();
  std::vector<ModelStatus> models;
  if (ready()) models = router_->status();
  // One model: unlabelled samples, as a single-model server has always written them.
  return render_metrics(models, /*labelled=*/models.size() > 1, h, read_process_stats());
}

HttpResponse Server::handle(const HttpRequest& req, const std::function<bool()>& client_alive) {
  HttpResponse res = route(req, client_alive);
  if (res.status >= 500) {
    errors_5xx_.fetch_add(1);
  } else if (res.status >= 400) {
    errors_4xx_.fetch_add(1);
  }
  return res;
}

HttpResponse Server::route(const HttpRequest& req, const std::function<bool()>& client_alive) {
  const std::string& p = req.path;
  const std::string& m = req.method;
  // The Anthropic Messages API answers in its own error shape from the first check on (anthropic_api.cpp).
  if (p == "/v1/messages" || p == "/v1/messages/count_tokens") return anthropic_messages(*this, req, client_alive);
  // Route table: path -> allowed method.
  struct Route {
    const char* path;
    const char* method;
    bool prefix;
  };
  static constexpr Route kRoutes[] = {
      {"/health", "GET", false},
      {"/metrics", "GET", false},
      {"/v1/models", "GET", false},
      {"/v1/models/", "GET", true},
      {"/v1/chat/completions", "POST", false},
      {"/chat/completions", "POST", false},
      {"/v1/completions", "POST", false},
      {"/completions", "POST", false},
      {"/v1/responses", "POST", false},
      {"/v1/responses/", "GET", true},
      {"/tokenize", "POST", false},
      {"/detokenize", "POST", false},
      {"/v1/embeddings", "POST", false},
  };
  const Route* found = nullptr;
  for (const Route& r : kRoutes) {
    if (r.prefix ? (p.size() > std::string_view(r.path).size() && p.rfind(r.path, 0) == 0) : p == r.path) {
      found = &r;
      break;
    }
  }
  if (found == nullptr)
    return error_response({404, fmt::format("no route for {} {}", m, p), "not_found_error", {}});
  const bool method_ok = m == found->method || (m == "HEAD" && std::string_view(found->method) == "GET");
  if (!method_ok) {
    HttpResponse r =
        error_response({405,
                        fmt::format("method {} is not allowed on {} (use {})", m, p, found->method),
                        "invalid_request_error",
                        {}});
    r.headers.emplace_back("Allow", found->method);
    return r;
  }
  const std::string_view path = found->path;
  if (path == "/health") {
    if (draining()) return error_response({503, "draining", "unavailable_error", {}});
    if (!ready()) return error_response({503, "loading model", "unavailable_error", {}});
    return json_response(200, {{"status", "ok"}});
  }
  if (!authorized(req))
    return error_response({401, "invalid or missing API key", "authentication_error", {}});
  if (path == "/metrics") {
    HttpResponse r;
    r.content_type = kMetricsContentType;
    r.body = metrics_text();
    return r;
  }
  if (draining()) {
    rejected_.fetch_add(1);
    return error_response({503, "draining", "unavailable_error", {}});
  }
  if (!ready()) return error_response({503, "loading model", "unavailable_error", {}});
  if (m == "POST" && req.body.empty())
    return error_response(bad_request("the request body is empty: send a JSON object"));
  if (path == "/v1/models") return models("");
  if (path == "/v1/models/") return models(p.substr(path.size()));
  if (path == "/v1/chat/completions" || path == "/chat/completions")
    return completions(req, true, client_alive);
  if (path == "/v1/completions" || path == "/completions") return completions(req, false, client_alive);
  if (path == "/v1/responses") return responses_create(req, client_alive);
  if (path == "/v1/responses/") return responses_get(p.substr(path.size()));
  if (path == "/tokenize") return tokenize(req, client_alive);
  if (path == "/v1/embeddings") return embeddings(req, client_alive);
  return detokenize(req, client_alive);
}

HttpResponse Server::embeddings(const HttpRequest& req, const std::function<bool()>& client_alive) {
  ApiError error;
  auto model = lease_for(req.body, client_alive, &error);
  if (!model) return error_response(error);
  return embeddings_response(req, model->embedder(), model->id(), client_alive);
}

std::optional<ApiError> Server::render_chat_prompt(const ModelLease& model, const chat::ChatInputs& inputs,
                                                   const std::string& field, std::vector<int32_t>* prompt,
                                                   bool* starts_in_think) const {
  const tokenizer::Tokenizer& tok = model.engine().tokenizer();
  chat::ChatInputs in = inputs;
  if (!in.extra.contains("bos_token")) in.extra["bos_token"] = tok.bos_text();
  if (!in.extra.contains("eos_token")) in.extra["eos_token"] = tok.eos_text();
  auto text = model.chat_template().render(in);
  if (!text.ok()) return bad_request("chat template: " + text.status().message(), field);
  *starts_in_think = options_.reasoning && prompt_opens_think(*text);
  *prompt = tok.encode_chat(*text);
  return {};
}

HttpResponse Server::models(const std::string& id) {
  // OpenAI's model object, plus whether it is loaded (llama-server's router answers status.value) and, for
  // a loaded model, its engine's facts.
  json data = json::array();
  for (const ModelStatus& st : router_->status()) {
    json model = {{"id", st.id}, {"object", "model"}, {"created", created_}, {"owned_by", "minfer"}};
    model["loaded"] = st.loaded();
    model["status"] = {{"value", st.state}};
    if (st.stats) {
      model["meta"] = {{"n_vocab", st.n_vocab},
                       {"n_ctx", st.n_ctx},
                       {"n_ctx_train", st.n_ctx_train},
                       {"n_embd", st.n_embd},
                       {"n_slots", st.stats->n_slots}};
    }
    data.push_back(std::move(model));
  }
  if (id.empty()) return json_response(200, {{"object", "list"}, {"data", std::move(data)}});
  for (json& m : data) {
    if (m["id"] == id) return json_response(200, m);
  }
  return error_response(
      {404, fmt::format("model '{}' does not exist (this server serves {})", id, router_->known_list()),
       "invalid_request_error", "model"});
}

HttpResponse Server::tokenize(const HttpRequest& req, const std::function<bool()>& client_alive) {
  json b = parse_json(req.body);
  if (b.is_discarded()) return error_response(bad_request(invalid_json_message(req.body)));
  if (!b.is_object()) return error_response(bad_request("the request body must be a JSON object"));
  if (auto e = unknown_field(b, {kTokenizeFields}, "/tokenize")) return error_response(*e);
  if (!b.contains("content") || !b["content"].is_string())
    return error_response(bad_request("'content' must be a string", "content"));
  bool add_special = false, with_pieces = false, parse_special = true;
  for (auto [key, out] : {std::pair{"add_special", &add_special}, std::pair{"with_pieces", &with_pieces},
                          std::pair{"parse_special", &parse_special}}) {
    if (b.contains(key) && !b[key].is_null()) {
      if (!b[key].is_boolean())
        return error_response(bad_request(fmt::format("'{}' must be a boolean", key), key));
      *out = b[key].get<bool>();
    }
  }
  ApiError error;
  auto model = lease_for(req.body, client_alive, &error);
  if (!model) return error_response(error);
  const tokenizer::Tokenizer& tok = model->engine().tokenizer();
  std::vector<int32_t> ids = tok.encode(b["content"].get<std::string>(), add_special, parse_special);
  json tokens = json::array();
  for (int32_t id : ids) {
    if (with_pieces) {
      tokens.push_back({{"id", id}, {"piece", tok.token_bytes(id)}});
    } else {
      tokens.push_back(id);
    }
  }
  return json_response(200, {{"tokens", std::move(tokens)}});
}

HttpResponse Server::detokenize(const HttpRequest& req, const std::function<bool()>& client_alive) {
  json b = parse_json(req.body);
  if (b.is_discarded()) return error_response(bad_request(invalid_json_message(req.body)));
  if (!b.is_object()) return error_response(bad_request("the request body must be a JSON object"));
  if (auto e = unknown_field(b, {kDetokenizeFields}, "/detokenize")) return error_response(*e);
  if (!b.contains("tokens") || !b["tokens"].is_array())
    return error_response(bad_request("'tokens' must be an array of token ids", "tokens"));
  ApiError error;
  auto model = lease_for(req.body, client_alive, &error);
  if (!model) return error_response(error);
  const tokenizer::Tokenizer& tok = model->engine().tokenizer();
  std::vector<int32_t> ids;
  for (const auto& v : b["tokens"]) {
    if (!v.is_number_integer())
      return error_response(bad_request("'tokens' must be an array of token ids", "tokens"));
    const int64_t id = v.get<int64_t>();
    if (id < 0 || id >= tok.n_vocab())
      return error_response(bad_request(
          fmt::format("'tokens': id {} is outside the vocabulary [0, {})", id, tok.n_vocab()), "tokens"));
    ids.push_back(static_cast<int32_t>(id));
  }
  return json_response(200, {{"content", tok.decode(ids)}});
}

HttpResponse Server::completions(const HttpRequest& req, bool chat,
                                 const std::function<bool()>& client_alive) {
  // The model first (it may have to load): its vocabulary and slots bound the request's fields.
  ApiError lease_error;
  std::shared_ptr<ModelLease> lease = lease_for(req.body, client_alive, &lease_error);
  if (!lease) return error_response(lease_error);
  const engine::Engine& engine = lease->engine();
  const tokenizer::Tokenizer& tok = engine.tokenizer();
  RequestLimits limits;
  limits.n_vocab = engine.n_vocab();
  limits.n_slots = lease->batcher().options().n_slots;
  limits.defaults = options_.sampling;
  limits.tool_format = detect_tool_call_format(lease->chat_template().source());
  OpenAiRequest r;
  if (auto err =
          chat ? parse_chat_request(req.body, limits, &r) : parse_completion_request(req.body, limits, &r))
    return error_response(*err);

  // The prompt as tokens.
  std::vector<int32_t> prompt;
  bool starts_in_think = false;
  if (chat) {
    if (auto err = render_chat_prompt(*lease, r.chat, "messages", &prompt, &starts_in_think))
      return error_response(*err);
  } else if (r.prompt_is_tokens) {
    prompt = r.prompt_tokens;
  } else {
    prompt = tok.encode(r.prompt_text, /*add_special=*/true, /*parse_special=*/true);
  }
  if (prompt.empty()) return error_response(bad_request("the prompt is empty", chat ? "messages" : "prompt"));
  if (static_cast<int64_t>(prompt.size()) >= engine.n_ctx())
    return error_response(
        bad_request(fmt::format("the prompt has {} tokens but the context holds {} (at most {} for a "
                                "prompt that leaves room for one generated token)",
                                prompt.size(), engine.n_ctx(), engine.n_ctx() - 1),
                    chat ? "messages" : "prompt"));

  engine::BatchRequest br;
  br.prompt = std::move(prompt);
  br.n_predict = r.n_predict;
  br.n_choices = r.n;
  br.stop = r.stop;
  br.sampling = r.sampling;
  br.n_top_logprobs = r.n_top_logprobs;
  auto submitted = lease->batcher().submit(std::move(br));
  if (!submitted.ok()) return error_response(api_error_from_status(submitted.status()));
  std::shared_ptr<engine::RequestHandle> handle = std::move(*submitted);
  in_flight_.fetch_add(1);

  const bool tools = chat && !r.tools.is_null();
  const bool reasoning = chat && options_.reasoning;
  auto choices = std::make_shared<std::vector<ChoiceState>>();
  for (int32_t i = 0; i < r.n; ++i) choices->emplace_back(reasoning, starts_in_think, tools, r.tool_format);
  const std::string id = make_response_id(chat ? "chatcmpl" : "cmpl");
  const std::string model = lease->id();
  const int64_t created = static_cast<int64_t>(std::time(nullptr));
  const bool want_logprobs = r.n_top_logprobs >= 0;

  // Applies one token event to its choice; returns the delta it produced (chat) or its text (completions).
  auto apply_token = [&tok, chat, want_logprobs](ChoiceState& c, const engine::BatchEvent& ev, Delta* delta) {
    if (chat) {
      *delta = c.assembler.push(ev.text);
      if (want_logprobs) c.logprobs.push_back(chat_logprob_entry(ev, tok));
    } else {
      delta->content = ev.text;
      if (want_logprobs) {
        c.offsets.push_back(c.text.size());
        c.tokens.push_back(token_text_or_empty(tok, ev.token));
        c.token_logprobs.push_back(ev.logprob);
        json top = json::object();
        for (const auto& t : ev.top) top[token_text_or_empty(tok, t.token)] = t.logprob;
        c.top.push_back(std::move(top));
      }
      c.text += ev.text;
    }
  };

  if (!r.stream) {
    engine::BatchUsage usage;
    Status error;
    std::optional<ApiError> dead_end;
    bool finished = false;
    auto last_check = std::chrono::steady_clock::now();
    while (!finished) {
      auto ev = handle->next(kPoll);
      // The client is checked at least every kPoll, also while events keep coming.
      const auto now = std::chrono::steady_clock::now();
      if (!ev || now - last_check >= kPoll) {
        last_check = now;
        if (client_alive && !client_alive()) {
          handle->cancel();
          in_flight_.fetch_sub(1);
          return error_response({499, "client closed the connection", "invalid_request_error", {}});
        }
      }
      if (!ev) continue;
      if (ev->choice < 0 || ev->choice >= r.n) ev->choice = 0;
      ChoiceState& c = (*choices)[ev->choice];
      switch (ev->kind) {
        case engine::BatchEvent::Kind::kToken: {
          Delta d;
          apply_token(c, *ev, &d);
          break;
        }
        case engine::BatchEvent::Kind::kDone:
          if (!dead_end) dead_end = grammar_dead_end(*ev);
          // Text held back until the end (a partial stop-string match) comes with kDone.
          if (chat) {
            if (!ev->text.empty()) c.assembler.push(ev->text);
            c.assembler.finish();
          } else {
            c.text += ev->text;
          }
          c.finish = ev->finish_reason;
          c.done = true;
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
    in_flight_.fetch_sub(1);
    if (!error.ok()) {
      ApiError e = api_error_from_status(error);
      if (e.status < 500) e = {500, error.message(), "server_error", {}};
      return error_response(e);
    }
    if (dead_end) return error_response(*dead_end);
    json out_choices = json::array();
    for (int32_t i = 0; i < r.n; ++i) {
      ChoiceState& c = (*choices)[i];
      if (!c.done && chat) c.assembler.finish();
      if (chat) {
        const auto& a = c.assembler;
        json message = {{"role", "assistant"}};
        message["content"] = a.content().empty() && !a.calls().empty() ? json(nullptr) : json(a.content());
        if (!a.reasoning().empty()) message["reasoning_content"] = a.reasoning();
        if (!a.calls().empty()) message["tool_calls"] = tool_calls_json(a.calls(), 0, false);
        json choice = {{"index", i}, {"message", std::move(message)}};
        choice["logprobs"] = want_logprobs ? json{{"content", c.logprobs}} : json(nullptr);
        choice["finish_reason"] = finish_reason(c.finish, !a.calls().empty());
        out_choices.push_back(std::move(choice));
      } else {
        json choice = {{"text", c.text}, {"index", i}};
        choice["logprobs"] = want_logprobs ? json{{"tokens", c.tokens},
                                                  {"token_logprobs", c.token_logprobs},
                                                  {"top_logprobs", c.top},
                                                  {"text_offset", c.offsets}}
                                           : json(nullptr);
        choice["finish_reason"] = finish_reason(c.finish, false);
        out_choices.push_back(std::move(choice));
      }
    }
    json body = {{"id", id},
                 {"object", chat ? "chat.completion" : "text_completion"},
                 {"created", created},
                 {"model", model},
                 {"choices", std::move(out_choices)},
                 {"usage", usage_json(usage)}};
    return json_response(200, body);
  }

  // Streaming: the request is accepted, so from here on errors travel as `data: {"error":...}` frames.
  HttpResponse res;
  res.content_type = "text/event-stream";
  res.headers.emplace_back("Cache-Control", "no-cache");
  res.headers.emplace_back("X-Accel-Buffering", "no");
  const bool include_usage = r.include_usage;
  const int32_t n = r.n;
  // Cancels the request and closes the books if the stream is dropped before it completes (the HTTP
  // layer never called it, or the client went away).
  // It holds the model's lease too: the model stays loaded until the stream is over.
  struct StreamGuard {
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
  res.stream = [guard, handle, choices, id, model, created, chat, include_usage, n, want_logprobs,
                apply_token](ResponseStream& out) {
    auto chunk = [&](json choice_list) {
      json j = {{"id", id},
                {"object", chat ? "chat.completion.chunk" : "text_completion"},
                {"created", created},
                {"model", model},
                {"choices", std::move(choice_list)}};
      if (include_usage) j["usage"] = nullptr;
      return j;
    };
    bool ok = true;
    auto send = [&](const std::string& frame) {
      if (ok && !out.write(frame)) ok = false;
      return ok;
    };
    if (chat) {
      for (int32_t i = 0; i < n; ++i) {
        send(sse_data(chunk(json::array({{{"index", i},
                                          {"delta", {{"role", "assistant"}, {"content", ""}}},
                                          {"logprobs", nullptr},
                                          {"finish_reason", nullptr}}}))));
      }
    }
    auto delta_frame = [&](int32_t index, ChoiceState& c, const Delta& d, const json* logprob) {
      if (chat) {
        json delta = json::object();
        if (!d.reasoning.empty()) delta["reasoning_content"] = d.reasoning;
        if (!d.content.empty()) delta["content"] = d.content;
        if (!d.calls.empty()) {
          delta["tool_calls"] = tool_calls_json(d.calls, c.n_streamed_calls, true);
          c.n_streamed_calls += static_cast<int32_t>(d.calls.size());
        }
        if (delta.empty() && logprob == nullptr) return;
        json choice = {{"index", index}, {"delta", std::move(delta)}};
        choice["logprobs"] = logprob != nullptr ? json{{"content", json::array({*logprob})}} : json(nullptr);
        choice["finish_reason"] = nullptr;
        send(sse_data(chunk(json::array({std::move(choice)}))));
      } else {
        if (d.content.empty() && logprob == nullptr) return;
        json choice = {{"text", d.content}, {"index", index}};
        choice["logprobs"] = logprob != nullptr ? *logprob : json(nullptr);
        choice["finish_reason"] = nullptr;
        send(sse_data(chunk(json::array({std::move(choice)}))));
      }
    };
    engine::BatchUsage usage;
    bool finished = false;
    bool failed = false;
    while (!finished) {
      auto ev = handle->next(kPoll);
      if (!ev) {
        if (!out.alive()) ok = false;
        if (!ok) break;
        continue;
      }
      if (ev->choice < 0 || ev->choice >= n) ev->choice = 0;
      ChoiceState& c = (*choices)[ev->choice];
      if (failed && ev->kind != engine::BatchEvent::Kind::kFinished) continue;  // the error frame was the end
      if (auto e = grammar_dead_end(*ev)) {
        send(sse_data(e->to_json()));
        failed = true;
        continue;
      }
      switch (ev->kind) {
        case engine::BatchEvent::Kind::kToken: {
          Delta d;
          const size_t before = c.text.size();
          apply_token(c, *ev, &d);
          if (want_logprobs) {
            json lp;
            if (chat) {
              lp = c.logprobs.back();
            } else {
              lp = {{"tokens", json::array({c.tokens.back()})},
                    {"token_logprobs", json::array({c.token_logprobs.back()})},
                    {"top_logprobs", json::array({c.top.back()})},
                    {"text_offset", json::array({before})}};
            }
            delta_frame(ev->choice, c, d, &lp);
          } else {
            delta_frame(ev->choice, c, d, nullptr);
          }
          break;
        }
        case engine::BatchEvent::Kind::kDone: {
          bool has_calls = false;
          if (!ev->text.empty()) {  // text held back until the end (a partial stop-string match)
            Delta held;
            if (chat) {
              held = c.assembler.push(ev->text);
            } else {
              held.content = ev->text;
              c.text += ev->text;
            }
            delta_frame(ev->choice, c, held, nullptr);
          }
          if (chat) {
            Delta d = c.assembler.finish();
            delta_frame(ev->choice, c, d, nullptr);
            has_calls = !c.assembler.calls().empty();
          }
          c.done = true;
          json choice = chat ? json{{"index", ev->choice}, {"delta", json::object()}}
                             : json{{"text", ""}, {"index", ev->choice}};
          choice["logprobs"] = nullptr;
          choice["finish_reason"] = finish_reason(ev->finish_reason, has_calls);
          send(sse_data(chunk(json::array({std::move(choice)}))));
          break;
        }
        case engine::BatchEvent::Kind::kError: {
          ApiError e = api_error_from_status(ev->error);
          if (e.status < 500) e = {500, ev->error.message(), "server_error", {}};
          send(sse_data(e.to_json()));
          failed = true;
          break;
        }
        case engine::BatchEvent::Kind::kFinished:
          usage = ev->usage;
          finished = true;
          break;
      }
      if (!ok) break;
    }
    if (!ok) {
      handle->cancel();
      return;
    }
    if (include_usage && !failed) {
      json j = {{"id", id},
                {"object", chat ? "chat.completion.chunk" : "text_completion"},
                {"created", created},
                {"model", model},
                {"choices", json::array()},
                {"usage", usage_json(usage)}};
      send(sse_data(j));
    }
    send(sse_done());
    guard->completed = true;
  };
  return res;
}

}  // namespace minfer::server
