// The OpenAI-compatible server's routes, independent of the HTTP library: a request (method, path,
// headers, body) becomes a response, or a stream the HTTP layer pumps as server-sent events. It
// translates JSON to engine::BatchRequest, submits to the Batcher and turns BatchEvents back into OpenAI
// shapes (reasoning split, tool calls, logprobs, usage). Auth, drain and loading states live here too.
// Which model (engine, batcher, template) a request runs on is the ModelRouter's answer
// (server/model_router.h): every route takes a lease on the model its `model` field names.
//
//   Server server(options);                         // /health answers 503 "loading" from now on
//   server.set_model(engine.get(), batcher.get(), std::move(tmpl));   // ready: one caller-owned model
//   // or: server.set_router(std::make_unique<ModelRouter>(specs, loader, router_options));   // several
//   HttpResponse res = server.handle(req, [&] { return client_still_connected(); });
//
// Threading: handle() is called concurrently by the HTTP layer's threads; everything it touches is
// immutable after set_model()/set_router(), atomic, the router or the Batcher (both thread-safe). A
// /metrics scrape reads atomics and the router's state only.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "chat/chat_template.h"
#include "engine/batcher.h"
#include "engine/engine.h"
#include "sampling/config.h"
#include "server/api_error.h"
#include "server/metrics.h"
#include "server/model_router.h"

namespace minfer::server {

struct HttpRequest {
  std::string method;                          // "GET", "POST", ...
  std::string path;                            // without the query string
  std::map<std::string, std::string> headers;  // names lower-cased
  std::string body;
  std::string header(const std::string& lower_name) const {
    auto it = headers.find(lower_name);
    return it == headers.end() ? std::string() : it->second;
  }
};

// Where a streamed body goes. write() returns false once the client is gone.
class ResponseStream {
 public:
  virtual ~ResponseStream() = default;
  virtual bool write(std::string_view data) = 0;
  virtual bool alive() = 0;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
  // When set, the body is produced by this call (text/event-stream, chunked) after the headers are sent.
  std::function<void(ResponseStream&)> stream;
};

class Embedder;  // server/embeddings.h

struct ServerOptions {
  std::string model_id;              // what /v1/models lists and responses name
  std::string api_key;               // "" = no auth
  bool reasoning = true;             // false: --reasoning-format none (a <think> block stays in content)
  sampling::SamplerConfig sampling;  // defaults for every request
  int32_t responses_store = 100;     // --responses-store: stored /v1/responses kept (0: store: true refused)
};

class ResponsesStore;

class Server {
 public:
  explicit Server(ServerOptions options);
  ~Server();

  // Makes the server ready with one caller-owned model named options.model_id, never unloaded. `engine`
  // and `batcher` must outlive the server's last handle() call.
  void set_model(engine::Engine* engine, engine::Batcher* batcher, chat::ChatTemplate tmpl);
  // Makes the server ready with the router's models (`minfer serve` always uses this). With more than one
  // model /metrics labels every per-model family with model="ID".
  void set_router(std::unique_ptr<ModelRouter> router);
  bool ready() const { return ready_.load(std::memory_order_acquire); }
  // Enables POST /v1/embeddings (server/embeddings.h) for set_model's model; call before set_model. Not
  // owned.
  void set_embedder(Embedder* embedder) { embedder_ = embedder; }
  // Valid once ready().
  ModelRouter& router() const { return *router_; }
  // After the HTTP layer has stopped: hands the models back (dropping the router unloads them).
  std::unique_ptr<ModelRouter> take_router() { return std::move(router_); }

  // From now on every route but /metrics answers 503 and /health reports draining.
  void begin_drain() { draining_.store(true); }
  bool draining() const { return draining_.load(); }

  // `client_alive` is polled while a non-streamed answer is computed; false cancels the request.
  HttpResponse handle(const HttpRequest& request, const std::function<bool()>& client_alive);

  // Error response in the OpenAI shape (503 adds Retry-After).
  static HttpResponse error_response(const ApiError& error);
  const ServerOptions& options() const { return options_; }

  // Shared with the API front ends kept in their own files (anthropic_api.cpp); valid once ready().
  // The model a request body names (its "model" string; "" when absent or not a string: the default
  // model), leased through the router (which may load it first). Null with *error set on failure.
  std::shared_ptr<ModelLease> lease_for(const std::string& body, const std::function<bool()>& client_alive,
                                        ApiError* error) const;
  // The model's chat template applied to `inputs` (bos/eos filled in) as prompt tokens, BOS added when the
  // model wants one; *starts_in_think when reasoning is on and the rendered prompt opens a <think>.
  // A template failure is a 400 naming `field`. No context-length check here.
  std::optional<ApiError> render_chat_prompt(const ModelLease& model, const chat::ChatInputs& inputs,
                                             const std::string& field, std::vector<int32_t>* prompt,
                                             bool* starts_in_think) const;
  // --api-key: `Authorization: Bearer KEY`; with accept_x_api_key also `x-api-key: KEY` (Anthropic).
  bool authorized(const HttpRequest& request, bool accept_x_api_key = false) const;
  // Request accounting for /metrics, for routes outside this file.
  void add_in_flight(int64_t delta) { in_flight_.fetch_add(delta); }
  void add_rejected() { rejected_.fetch_add(1); }
  // An error status the HTTP layer answered itself (413, 415, malformed HTTP), for /metrics.
  void count_error(int status) { (status >= 500 ? errors_5xx_ : errors_4xx_).fetch_add(1); }
  // The /metrics text (never waits on the model).
  std::string metrics_text() const;

 private:
  HttpResponse route(const HttpRequest& request, const std::function<bool()>& client_alive);
  HttpResponse completions(const HttpRequest& request, bool chat, const std::function<bool()>& client_alive);
  HttpResponse tokenize(const HttpRequest& request, const std::function<bool()>& client_alive);
  HttpResponse detokenize(const HttpRequest& request, const std::function<bool()>& client_alive);
  HttpResponse models(const std::string& id);
  HttpResponse embeddings(const HttpRequest& request, const std::function<bool()>& client_alive);
  // POST /v1/responses and GET /v1/responses/{id} (responses_api.cpp).
  HttpResponse responses_create(const HttpRequest& request, const std::function<bool()>& client_alive);
  HttpResponse responses_get(const std::string& id);

  ServerOptions options_;
  int64_t created_ = 0;
  std::atomic<bool> ready_{false};
  std::atomic<bool> draining_{false};
  std::unique_ptr<ModelRouter> router_;
  Embedder* embedder_ = nullptr;  // set_embedder, handed to set_model's model
  std::shared_ptr<ResponsesStore> responses_store_;
  std::atomic<int64_t> rejected_{0}, in_flight_{0}, errors_4xx_{0}, errors_5xx_{0};
};

}  // namespace minfer::server
