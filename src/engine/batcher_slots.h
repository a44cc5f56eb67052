// The batcher's worker-side records (internal to engine/): an accepted request (Job) and one sequence of
// the KV cache (Slot). Shared by the batcher_*.cpp files (see batcher_worker.h) and the per-slot
// speculation in batch_drafter.cpp.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "engine/batcher.h"
#include "engine/depth_planner.h"
#include "engine/generate.h"
#include "engine/speculative.h"
#include "sampling/sampler.h"
#include "tokenizer/stream_decoder.h"

namespace minfer::engine::batching {

using Clock = std::chrono::steady_clock;

// An accepted request.
struct Job {
  std::shared_ptr<RequestHandle> handle;
  BatchRequest req;
  std::vector<sampling::Sampler> samplers;        // one per choice
  std::vector<sampling::Sampler> draft_samplers;  // one per choice with a draft model
  BatchUsage usage;
  SpecStats spec;              // over every choice
  std::vector<int32_t> slots;  // slot index per choice, once admitted
  int32_t choices_open = 0;
  Clock::time_point submitted{};                 // accepted by submit()
  std::optional<Clock::time_point> first_token;  // its first token was delivered (time to first token)
};

// A slot's speculation state.
struct SlotSpec {
  std::vector<int32_t> cached;  // draft model: tokens whose rows sit in the draft cache, positions 0..n-1
  DepthPlanner planner{kMaxDraftDepth};
  Draft draft;  // this step's proposals, verified after the target's forward
  double draft_ms = 0.0;
  size_t synced = 0;  // tokens of the sequence the choice's draft sampler has taken (a mark follows them)
};

// One sequence of the KV cache. `tokens` are exactly the tokens whose rows sit at positions 0..n-1.
struct Slot {
  kv::SeqId seq = 0;
  std::vector<int32_t> tokens;
  Clock::time_point last_used{};
  std::shared_ptr<Job> job;  // null when idle
  int32_t choice = 0;
  bool generating = false;  // false while choice 0 prefills (other choices wait for it)
  size_t prefill_next = 0;  // choice 0: next prompt index to evaluate
  int32_t next_token = -1;  // sampled, not yet evaluated
  int32_t n_generated = 0;
  std::optional<tokenizer::StreamDecoder> detok;
  std::optional<StopMatcher> stops;
  SlotSpec spec;
};

}  // namespace minfer::engine::batching
