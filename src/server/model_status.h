// What the router reports of one served model (server/model_router.h fills it), read by /v1/models and
// rendered by /metrics (server/metrics.h): one struct, so the two cannot drift.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "engine/batcher.h"

namespace minfer::server {

// A snapshot of one model for /v1/models and /metrics.
struct ModelStatus {
  std::string id;
  std::string path;
  std::string state;      // "loaded", "loading", "unloading", "unloaded"
  bool loaded() const { return state == "loaded"; }
  int64_t in_flight = 0;  // leases now
  int64_t waiting = 0;    // requests waiting for this model to load (or for room to load it)
  int64_t loads = 0;      // completed loads
  int64_t load_failures = 0;
  int64_t unloads = 0;
  double last_load_seconds = 0;  // duration of the latest completed load
  int64_t resident_bytes = 0;    // the estimate used against --memory-budget
  // Loaded models only: the batcher's counters (they start again at 0 after a reload) and engine facts.
  std::optional<engine::BatcherStats> stats;
  int64_t n_vocab = 0, n_ctx = 0, n_ctx_train = 0, n_embd = 0;
};

}  // namespace minfer::server
