#include "viz/viz_app.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>

#include <fmt/format.h>

#include "graph/export.h"
#include "server/sse.h"
#include "tokenizer/stream_decoder.h"
#include "viz/assets.h"

namespace minfer::viz {
namespace {

using nlohmann::ordered_json;
using server::HttpRequest;
using server::HttpResponse;

HttpResponse json_response(int status, const ordered_json& body) {
  HttpResponse r;
  r.status = status;
  r.body = server::dump_json(body);
  return r;
}

HttpResponse error_response(int status, const std::string& message) {
  return json_response(status, {{"error", {{"message", message}, {"code", status}}}});
}

// The k most likely tokens of `logits` with their softmax probabilities, most likely first.
std::vector<std::pair<int32_t, double>> top_k(std::span<const float> logits, size_t k) {
  std::vector<int32_t> ids(logits.size());
  std::iota(ids.begin(), ids.end(), 0);
  k = std::min(k, ids.size());
  std::partial_sort(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(k), ids.end(),
                    [&](int32_t a, int32_t b) {
                      return logits[static_cast<size_t>(a)] > logits[static_cast<size_t>(b)] ||
                             (logits[static_cast<size_t>(a)] == logits[static_cast<size_t>(b)] && a < b);
                    });
  const double top = logits[static_cast<size_t>(ids[0])];
  double sum = 0;
  for (float v : logits) sum += std::exp(static_cast<double>(v) - top);
  std::vector<std::pair<int32_t, double>> out;
  for (size_t i = 0; i < k; ++i) {
    out.emplace_back(ids[i], std::exp(static_cast<double>(logits[static_cast<size_t>(ids[i])]) - top) / sum);
  }
  return out;
}

std::string piece_text(const tokenizer::Tokenizer& tok, int32_t id) {
  if (id >= tok.n_vocab()) return fmt::format("<{}>", id);
  if (tok.is_control(id)) return std::string(tok.token_text(id));
  return tok.token_bytes(id);
}

}  // namespace

Result<std::unique_ptr<VizApp>> VizApp::create(engine::Engine& engine, const VizOptions& options) {
  std::unique_ptr<VizApp> app(new VizApp(engine, options));
  MINFER_ASSIGN_OR_RETURN(ordered_json decode, app->graph_json(1));
  MINFER_ASSIGN_OR_RETURN(ordered_json prefill, app->graph_json(std::max(2, options.prefill_preview)));
  app->decode_graph_ = server::dump_json(decode);
  app->prefill_graph_ = server::dump_json(prefill);
  engine.add_observer(&app->observer_);
  return app;
}

VizApp::~VizApp() {
  shutdown();
  engine_.remove_observer(&observer_);
}

void VizApp::shutdown() {
  std::thread worker;
  {
    std::lock_guard<std::mutex> lock(mu_);
    shut_down_ = true;
    worker = std::move(worker_);
  }
  hub_.close_all();
  if (worker.joinable()) worker.join();
}

Result<ordered_json> VizApp::graph_json(int32_t n_tokens) {
  MINFER_ASSIGN_OR_RETURN(const sched::Plan* plan, engine_.plan_for({n_tokens, 1}));
  ordered_json j = graph::to_json(plan->graph, engine_.backend_names());
  j["phase"] = n_tokens == 1 ? "decode" : "prefill";
  j["n_tokens"] = n_tokens;
  return j;
}

void VizApp::publish(const std::string& event, const ordered_json& payload) {
  hub_.publish("event: " + event + "\n" + server::sse_data(payload));
}

HttpResponse VizApp::handle(const HttpRequest& req, const std::function<bool()>& client_alive) {
  (void)client_alive;
  const std::string& p = req.path;
  if (req.method == "GET") {
    if (const Asset* a = find_asset(p)) {
      HttpResponse r;
      r.content_type = std::string(a->content_type);
      r.body = std::string(a->data);
      return r;
    }
    if (p == "/api/info") {
      const models::HParams& hp = engine_.hparams();
      return json_response(200, {{"arch", hp.arch},
                                 {"n_layer", hp.n_layer},
                                 {"n_embd", hp.n_embd},
                                 {"n_vocab", engine_.n_vocab()},
                                 {"n_ctx", engine_.n_ctx()},
                                 {"n_threads", engine_.n_threads()},
                                 {"backends", engine_.backend_names()},
                                 {"max_predict", options_.max_predict},
                                 {"running", running_.load()}});
    }
    if (p == "/api/graph/decode" || p == "/api/graph/prefill") {
      std::lock_guard<std::mutex> lock(mu_);
      HttpResponse r;
      r.body = p == "/api/graph/decode" ? decode_graph_ : prefill_graph_;
      return r;
    }
    if (p == "/api/events") return events();
    const std::string prefix = "/api/nodes/", suffix = "/stats";
    if (p.rfind(prefix, 0) == 0 && p.size() > prefix.size() + suffix.size() &&
        p.compare(p.size() - suffix.size(), suffix.size(), suffix) == 0) {
      return node_stats(p.substr(prefix.size(), p.size() - prefix.size() - suffix.size()));
    }
    return error_response(404, fmt::format("no page or API at '{}'", p));
  }
  if (req.method == "POST" && p == "/api/run") return start_run(req);
  if (p == "/api/run" || p == "/api/events" || p.rfind("/api/", 0) == 0) {
    return error_response(405, fmt::format("{} is not allowed on '{}'", req.method, p));
  }
  return error_response(404, fmt::format("no page or API at '{}'", p));
}

HttpResponse VizApp::start_run(const HttpRequest& req) {
  // The server's bounded parse: a body of a few hundred kilobytes of '[' must be a 400, not a stack overflow.
  const nlohmann::ordered_json body = server::parse_json(req.body);
  if (body.is_discarded()) return error_response(400, server::invalid_json_message(req.body));
  if (!body.is_object()) return error_response(400, "the body must be a JSON object");
  if (!body.contains("prompt") || !body["prompt"].is_string())
    return error_response(400, "'prompt' must be a string");
  const std::string prompt = body["prompt"].get<std::string>();
  int32_t n_predict = 16;
  if (body.contains("n_predict")) {
    if (!body["n_predict"].is_number_integer()) return error_response(400, "'n_predict' must be an integer");
    const int64_t n = body["n_predict"].get<int64_t>();
    if (n < 1 || n > options_.max_predict) {
      return error_response(400,
                            fmt::format("'n_predict' must be in [1, {}] (got {})", options_.max_predict, n));
    }
    n_predict = static_cast<int32_t>(n);
  }
  const tokenizer::Tokenizer& tok = engine_.tokenizer();
  std::vector<int32_t> ids = tok.encode(prompt, /*add_special=*/true, /*parse_special=*/true);
  if (ids.empty()) return error_response(400, "the prompt is empty");
  if (static_cast<int64_t>(ids.size()) >= engine_.n_ctx()) {
    return error_response(
        400, fmt::format("the prompt has {} tokens; the context holds {}", ids.size(), engine_.n_ctx()));
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (shut_down_) return error_response(503, "the server is shutting down");
  if (running_.load()) {
    return error_response(
        409, fmt::format("run {} is in progress; one run at a time (wait for its 'done' event)", run_id_));
  }
  if (worker_.joinable()) worker_.join();  // the previous run has finished (running_ is false)
  running_ = true;
  const int64_t id = ++run_id_;
  const size_t n_prompt = ids.size();
  worker_ = std::thread(
      [this, id, ids = std::move(ids), n_predict]() mutable { run(id, std::move(ids), n_predict); });
  return json_response(202, {{"run", id}, {"prompt_tokens", n_prompt}, {"n_predict", n_predict}});
}

void VizApp::run(int64_t run_id, std::vector<int32_t> ids, int32_t n_predict) {
  const tokenizer::Tokenizer& tok = engine_.tokenizer();
  ordered_json pieces = ordered_json::array();
  for (int32_t id : ids) pieces.push_back(piece_text(tok, id));
  publish("start",
          {{"run", run_id}, {"prompt_ids", ids}, {"prompt_pieces", pieces}, {"n_predict", n_predict}});
  engine_.kv().clear();  // the page owns this engine: every run starts from an empty cache

  tokenizer::StreamDecoder detok(tok);
  std::string text;
  std::string stop_reason = "length";
  std::string error;
  engine::Batch batch;
  for (size_t i = 0; i < ids.size(); ++i) batch.add(ids[i], static_cast<int32_t>(i), 0, i + 1 == ids.size());
  auto pos = static_cast<int32_t>(ids.size());
  int32_t n_generated = 0;
  for (int32_t step = 0;; ++step) {
    const auto t0 = std::chrono::steady_clock::now();
    auto logits = engine_.decode(batch);
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (!logits.ok()) {
      error = logits.status().message();
      break;
    }
    const auto top = top_k(*logits, 5);
    const int32_t next = top[0].first;  // greedy
    const std::string piece = detok.push(next);
    text += piece;
    ++n_generated;
    ordered_json top5 = ordered_json::array();
    for (const auto& [id, p] : top) top5.push_back({{"id", id}, {"text", piece_text(tok, id)}, {"p", p}});
    ordered_json times = ordered_json::array();
    for (const auto& [node, us] : observer_.last_step_times())
      times.push_back({node, std::round(us * 10) / 10});
    const bool eog = tok.is_eog(next);
    publish("step",
            {{"run", run_id},
             {"step", step},
             {"phase", step == 0 ? "prefill" : "decode"},
             {"n_tokens", batch.size()},
             {"ms", ms},
             {"token", {{"id", next}, {"text", piece}, {"piece", piece_text(tok, next)}, {"eog", eog}}},
             {"top5", std::move(top5)},
             {"node_times", std::move(times)}});
    if (eog) {
      stop_reason = "eog";
      break;
    }
    if (n_generated >= n_predict) break;
    if (pos + 1 >= engine_.n_ctx()) {
      stop_reason = "context";
      break;
    }
    batch.clear();
    batch.add(next, pos++, 0, true);
  }
  text += detok.finish();
  // The prefill graph the page shows is now this prompt's (same topology, the run's shapes).
  auto prefill = graph_json(std::max<int32_t>(2, static_cast<int32_t>(ids.size())));
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (prefill.ok()) prefill_graph_ = server::dump_json(*prefill);
  }
  // Not running before the last event: a page that starts the next run on "done" is not refused. The next
  // run's worker starts only after this thread has been joined, so its events follow these.
  running_ = false;
  if (!error.empty()) {
    publish("error", {{"run", run_id}, {"message", error}});
  } else {
    publish("done",
            {{"run", run_id}, {"text", text}, {"n_generated", n_generated}, {"stop_reason", stop_reason}});
  }
}

HttpResponse VizApp::events() {
  HttpResponse r;
  r.content_type = "text/event-stream";
  r.headers.emplace_back("Cache-Control", "no-cache");
  r.stream = [this](server::ResponseStream& out) {
    const int64_t id = hub_.subscribe();
    // The hello event says the subscription is live: a client that waits for it sees every later run.
    const std::string hello =
        "event: hello\n" + server::sse_data({{"running", running_.load()}, {"steps", observer_.steps()}});
    bool ok = out.write(hello);
    while (ok) {
      bool closed = false;
      auto frame = hub_.next(id, std::chrono::milliseconds(1000), &closed);
      if (closed) break;
      ok = out.write(frame ? *frame : std::string(": ping\n\n"));
    }
    hub_.unsubscribe(id);
  };
  return r;
}

HttpResponse VizApp::node_stats(const std::string& id_text) {
  char* end = nullptr;
  const long id = std::strtol(id_text.c_str(), &end, 10);
  if (id_text.empty() || end != id_text.c_str() + id_text.size() || id < 0) {
    return error_response(400, fmt::format("'{}' is not a node id", id_text));
  }
  auto s = observer_.snapshot(static_cast<graph::NodeId>(id));
  if (!s) {
    return error_response(404,
                          fmt::format("node {} has no statistics yet (run a prompt first; KV stores, weights "
                                      "and unknown ids have none)",
                                      id));
  }
  ordered_json heat = {{"rows", s->heatmap.rows},
                       {"cols", s->heatmap.cols},
                       {"src_rows", s->heatmap.src_rows},
                       {"src_cols", s->heatmap.src_cols}};
  ordered_json cells = ordered_json::array();
  for (float v : s->heatmap.cells) {
    if (std::isfinite(v)) {
      cells.push_back(v);
    } else {
      cells.push_back(nullptr);
    }
  }
  heat["cells"] = std::move(cells);
  return json_response(200,
                       {{"id", id},
                        {"step", s->step},
                        {"n_tokens", s->n_tokens},
                        {"shape", s->shape},
                        {"micros", s->micros},
                        {"stats", inspect::to_json(s->stats)},
                        {"histogram", {{"lo", s->stats.min}, {"hi", s->stats.max}, {"counts", s->histogram}}},
                        {"heatmap", std::move(heat)}});
}

}  // namespace minfer::viz
