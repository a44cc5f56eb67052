// Prometheus text exposition (format 0.0.4) of the server's state from a BatcherStats snapshot plus the
// HTTP layer's own counters. Rendering only formats numbers it is given: it never waits on the model.
#pragma once

#include <cstdint>
#include <string>

#include "engine/batcher.h"

namespace minfer::server {

struct HttpCounters {
  int64_t rejected = 0;   // refused by the HTTP layer before reaching the batcher (draining)
  int64_t in_flight = 0;  // accepted by the batcher, response not finished
  int64_t errors_4xx = 0;
  int64_t errors_5xx = 0;
  bool ready = false;
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

inline constexpr const char* kMetricsContentType = "text/plain; version=0.0.4; charset=utf-8";

}  // namespace minfer::server
