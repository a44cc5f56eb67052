// The models one server serves, and the only place a route asks for "the engine and batcher of model X".
// Each model has a state (unloaded, loading, loaded, unloading); a loaded model owns its Engine, Batcher
// (slots, KV pool), chat template and, with --embeddings, its Embedder. The router loads a model on the
// first request that names it (on that request's thread, so the other models keep serving), unloads the
// least recently used idle model when --max-loaded or --memory-budget leaves no room, and unloads models
// idle for longer than --keep-alive. It does not parse requests or build answers.
//
//   ModelRouter router({{"a", "/m/a.gguf"}, {"b", "/m/b.gguf"}}, loader, {.max_loaded = 1});
//   ApiError err;
//   std::shared_ptr<ModelLease> lease = router.acquire("b", client_alive, &err);   // may load "b"
//   if (!lease) return error_response(err);    // 404 unknown, 503 busy/draining, 499 gone, 500 load failed
//   lease->batcher().submit(...);              // "b" stays loaded while `lease` (or a copy) lives
//
// Rules:
//   - A model is never unloaded while a lease on it exists (a request or stream in flight).
//   - A request for a model that is not loaded waits (counted per model in status().waiting) for its load,
//     or for room when every resident model is busy. At most RouterOptions::max_waiting requests wait at
//     once over all models; one more is refused with 503 (Retry-After). A wait longer than wait_timeout is a
//     503 naming the busy models; a client that disconnects while waiting stops waiting (499).
//   - A failed load answers every request that waited for it with a 500 naming the model and the cause;
//     the next request tries again.
//   - A model whose resident size estimate alone exceeds the memory budget is refused with a 500 naming
//     --memory-budget (it could never fit). The estimate is the GGUF file size until the model has been
//     loaded once, then its measured weights + KV + activations.
//
// Threading: every public method may be called from any thread. Loads and unloads run outside the lock.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "chat/chat_template.h"
#include "core/status.h"
#include "engine/batcher.h"
#include "engine/engine.h"
#include "server/api_error.h"
#include "server/model_status.h"

namespace minfer::server {

class Embedder;  // server/embeddings.h

// One resident model. The owned parts are declared so that the batcher (whose worker runs on the engines)
// is destroyed first. A model made by Server::set_model owns nothing: only the pointers are set.
struct LoadedModel {
  std::unique_ptr<engine::Engine> owned_engine;
  std::unique_ptr<engine::Engine> owned_draft;  // speculative decoding's draft model
  std::unique_ptr<Embedder> owned_embedder;
  std::shared_ptr<void> attachments;  // whatever else must live as long as the engine (observers)
  std::unique_ptr<engine::Batcher> owned_batcher;

  engine::Engine* engine = nullptr;
  engine::Batcher* batcher = nullptr;
  Embedder* embedder = nullptr;  // null: /v1/embeddings answers 400 naming --embeddings
  std::optional<chat::ChatTemplate> chat_template;

  LoadedModel();
  ~LoadedModel();
  LoadedModel(const LoadedModel&) = delete;
  LoadedModel& operator=(const LoadedModel&) = delete;
};

struct ModelSpec {
  std::string id;                    // what requests name and /v1/models lists
  std::string path;                  // the GGUF (the first part of a split set)
  std::vector<std::string> aliases;  // other names that select it (the command-line argument as given)
};

// Makes a loaded model from its spec (engine, template, batcher...). Called without the router's lock.
using ModelLoader = std::function<Result<std::unique_ptr<LoadedModel>>(const ModelSpec&)>;

struct RouterOptions {
  int32_t max_loaded = 0;                    // models resident at once; 0: no bound
  int64_t memory_budget = 0;                 // bytes of resident models (estimates); 0: no bound
  std::chrono::milliseconds keep_alive{-1};  // idle time before a model is unloaded; negative: never
  int32_t max_waiting = 64;                  // requests waiting for loads at once, over all models
  std::chrono::milliseconds wait_timeout{std::chrono::minutes(5)};  // one request's longest wait
};

class ModelRouter;

// A request's hold on a loaded model; the model stays loaded while it lives. Cheap to copy around as a
// shared_ptr (a stream's closure keeps one).
class ModelLease {
 public:
  ~ModelLease();
  ModelLease(const ModelLease&) = delete;
  ModelLease& operator=(const ModelLease&) = delete;
  const std::string& id() const { return id_; }
  engine::Engine& engine() const { return *model_->engine; }
  engine::Batcher& batcher() const { return *model_->batcher; }
  Embedder* embedder() const { return model_->embedder; }
  const chat::ChatTemplate& chat_template() const { return *model_->chat_template; }

 private:
  friend class ModelRouter;
  ModelLease(ModelRouter* router, size_t index, std::string id, std::shared_ptr<LoadedModel> model)
      : router_(router), index_(index), id_(std::move(id)), model_(std::move(model)) {}
  ModelRouter* router_;
  size_t index_;
  std::string id_;
  std::shared_ptr<LoadedModel> model_;
};

class ModelRouter {
 public:
  // `specs` in the order given (the first is the default for requests that name no model). The ids and
  // aliases must be distinct (checked by the caller; a duplicate here aborts). `loader` may be null when
  // every model is adopted (then a model is never unloaded: there is no way to load it again).
  ModelRouter(std::vector<ModelSpec> specs, ModelLoader loader, RouterOptions options);
  ~ModelRouter();  // stops the keep-alive thread and unloads every model (their batchers stop first)
  ModelRouter(const ModelRouter&) = delete;
  ModelRouter& operator=(const ModelRouter&) = delete;

  // Installs an already loaded model (startup preloading, or a caller-owned model). kNotFound for an id
  // that is not a spec's.
  Status adopt(const std::string& id, std::unique_ptr<LoadedModel> model);

  // The model `name` selects ("" = the default), loaded first when it is not; see the rules above. On
  // failure returns null and fills *error (OpenAI shape; the Anthropic route converts it).
  std::shared_ptr<ModelLease> acquire(const std::string& name, const std::function<bool()>& client_alive,
                                      ApiError* error);
  // Whether `name` selects a model, without loading anything.
  bool knows(const std::string& name) const;
  // "'a', 'b'" for error messages.
  std::string known_list() const;
  const std::string& default_id() const { return entries_.front().spec.id; }
  size_t size() const { return entries_.size(); }

  std::vector<ModelStatus> status() const;

  // Stops loading (acquire answers 503 "draining"), lets every loaded batcher finish its accepted requests
  // until `deadline` (shared), and returns the requests abandoned at the deadline.
  int64_t drain(std::chrono::milliseconds deadline);

 private:
  friend class ModelLease;
  enum class State { kUnloaded, kLoading, kLoaded, kUnloading };
  struct Entry {
    ModelSpec spec;
    State state = State::kUnloaded;
    std::shared_ptr<LoadedModel> model;
    int64_t leases = 0;
    int64_t waiting = 0;
    std::chrono::steady_clock::time_point last_used{};
    int64_t load_epoch = 0;  // completed load attempts (success or failure)
    Status last_load_error;
    int64_t loads = 0, load_failures = 0, unloads = 0;
    double last_load_seconds = 0;
    int64_t estimate_bytes = 0;  // file size until measured after a load
  };

  void release(size_t index);
  std::optional<size_t> find(const std::string& name) const;
  // Under the lock: the idle loaded models to unload (least recently used first) so that `want` fits, or
  // nullopt when it cannot fit now. *never: it cannot fit even with every other model unloaded.
  std::optional<std::vector<size_t>> plan_room(size_t want, bool* never) const;
  // Unloads the entries (already marked kUnloading) outside the lock, then marks them unloaded.
  void unload(std::unique_lock<std::mutex>& lock, const std::vector<size_t>& victims);
  void keep_alive_loop();
  static int64_t measured_bytes(const LoadedModel& model);

  std::vector<Entry> entries_;
  ModelLoader loader_;
  RouterOptions options_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  int64_t total_waiting_ = 0;
  bool draining_ = false;
  bool stopping_ = false;
  std::thread keep_alive_thread_;
};

// Ollama's keep_alive forms: "5m", "30s", "1h30m", "250ms", a bare number of seconds, "0" (unload when idle)
// and any negative value ("-1", "-1m": never). kInvalidArgument names the text.
Result<std::chrono::milliseconds> parse_keep_alive(const std::string& text);

}  // namespace minfer::server
