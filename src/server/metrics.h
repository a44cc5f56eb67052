// Prometheus text exposition (format 0.0.4) of the server's state from a BatcherStats snapshot plus the
// HTTP layer's own counters. Rendering only formats numbers it is given: it never waits on the model.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/batcher.h"
#include "server/model_status.h"

namespace minfer::server {

struct HttpCounters {
  int64_t rejected = 0;   // refused by the HTTP layer before reaching the batcher (draining)
  int64_t in_flight = 0;  // accepted by the batcher, response not finished
  int64_t errors_4xx = 0;
  int64_t errors_5xx = 0;
  bool ready = false;
  bool draining = false;  // the server's drain (a model's batcher may report its own)
};

// What the process itself uses, read at scrape time (never from the worker).
struct ProcessStats {
  int64_t rss_bytes = -1;  // resident set size; -1 when unknown (the family is then omitted, never 0)
};
// Reads /proc/self/statm; rss_bytes stays -1 where that is not available.
ProcessStats read_process_stats();

// The `minfer_` families: requests, queue depth, pending jobs, running, tokens, tokens/s, drain, the
// worker's stall count, KV cells, sequences and shared cells, memory (weights, KV, activations, RSS) and,
// when stats.op_times is filled (MINFER_OP_TIMING), per-op seconds and calls labelled by op.
std::string render_metrics(const engine::BatcherStats& stats, const HttpCounters& http,
                           const ProcessStats& process = {});

// One served model's part of the exposition: its router counters and, while it is loaded, its batcher's.
// Every family above plus the router's (minfer_model_loaded, _requests_waiting, _loads_total,
// _load_failures_total, _unloads_total, _load_seconds, _resident_bytes, _requests_in_flight), one sample
// per model. `labelled`: each per-model sample carries model="ID" (several models); otherwise the samples
// are unlabelled, exactly as render_metrics(stats, ...) writes them for one model. Process-wide families
// (ready, HTTP counters, RSS, draining) are never labelled; in labelled mode the HTTP layer's own
// rejections (draining) are an unlabelled minfer_requests_rejected_total sample next to the models'.
std::string render_metrics(const std::vector<ModelStatus>& models, bool labelled, const HttpCounters& http,
                           const ProcessStats& process = {});

inline constexpr const char* kMetricsContentType = "text/plain; version=0.0.4; charset=utf-8";

}  // namespace minfer::server
