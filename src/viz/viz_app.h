// `minfer viz`: the routes behind the page, independent of the HTTP library (server/http.h carries them).
//   GET  /, /app.js, ...            the embedded page (web/)
//   GET  /api/info                   model and run state
//   GET  /api/graph/decode|prefill   the plan's graph (the --dump-graph-json format)
//   POST /api/run {"prompt", "n_predict"}   202, or 409 while another run is in progress
//   GET  /api/events                 server-sent events: start, step (token, top-5, per-node times), done,
//   error GET  /api/nodes/<id>/stats       the node's statistics, histogram and heatmap for the latest step
// One run at a time on a worker thread, greedy (the page explains the model; it does not sample). The
// statistics observer only reads tensors, so a run's tokens equal `minfer run --temp 0` on the same prompt
// with the raw (untemplated) text.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "engine/engine.h"
#include "server/server.h"
#include "viz/event_hub.h"
#include "viz/node_stats_observer.h"

namespace minfer::viz {

struct VizOptions {
  int32_t max_predict = 512;    // largest n_predict a run may ask for
  int32_t prefill_preview = 8;  // tokens of the prefill graph shown before the first run
};

class VizApp {
 public:
  // Builds the decode and prefill plans once (their graphs are served as JSON) and attaches the observer.
  static Result<std::unique_ptr<VizApp>> create(engine::Engine& engine, const VizOptions& options);
  ~VizApp();  // shutdown()

  server::HttpResponse handle(const server::HttpRequest& request, const std::function<bool()>& client_alive);
  // Closes every event stream and waits for a run in progress to finish. Idempotent.
  void shutdown();

  bool running() const { return running_.load(); }

 private:
  VizApp(engine::Engine& engine, const VizOptions& options) : engine_(engine), options_(options) {}
  server::HttpResponse start_run(const server::HttpRequest& request);
  server::HttpResponse events();
  server::HttpResponse node_stats(const std::string& id_text);
  void run(int64_t run_id, std::vector<int32_t> prompt_ids, int32_t n_predict);
  Result<nlohmann::ordered_json> graph_json(int32_t n_tokens);
  void publish(const std::string& event, const nlohmann::ordered_json& payload);

  engine::Engine& engine_;
  VizOptions options_;
  NodeStatsObserver observer_;
  EventHub hub_;
  std::mutex mu_;                             // guards the fields below
  std::string decode_graph_, prefill_graph_;  // JSON text
  std::thread worker_;
  int64_t run_id_ = 0;
  std::atomic<bool> running_{false};
  bool shut_down_ = false;
};

}  // namespace minfer::viz
