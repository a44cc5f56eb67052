// Batcher: continuous batching over one Engine. It owns n_slots sequences of the multi-sequence KV cache,
// a bounded FIFO of waiting requests and one worker thread whose step loop evaluates, in one forward,
// every generating slot's next token plus chunks of waiting prompts (chunked prefill mixed with decode).
// It knows nothing about HTTP: the server translates requests into BatchRequest and streams BatchEvents.
//
//   auto batcher = Batcher::create(engine, {.n_slots = 4, .queue_depth = 64});
//   auto handle = (*batcher)->submit(std::move(request));   // kUnavailable: queue full / draining
//   while (auto ev = (*handle)->next(std::chrono::milliseconds(100))) { ... }   // until kind == kFinished
//
// Threading: submit(), stats(), drain() and every RequestHandle method may be called from any thread. Only
// the worker touches the Engine after create(); stats() reads atomics and never waits on a forward.
//
// Prefix reuse: a new request takes the slot whose cached tokens share the longest prefix with its prompt,
// or shares that prefix's KV cells from another slot (KvCache::seq_cp, no copy), and prefills only the rest.
// Idle slots keep their tokens for this until their cells are needed. usage.cached_tokens reports it.
//
// Memory: -c is one pool of cells for all slots. When a step cannot get cells, idle slots' cached prefixes
// are evicted first (least recently used); a slot that still cannot grow finishes with reason "length".
//
// Health: a worker whose steps stop making progress (no token evaluated, no request started or ended)
// kStallStepLimit times in a row answers every open request once with an internal error (HTTP 500), frees
// their slots, counts it in BatcherStats::worker_stalled and carries on with new requests: a wedge costs
// the requests of the moment, never the server. Each request logs one info line when it ends (prompt and
// cached tokens, its slot, time to first token).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "engine/engine.h"
#include "engine/speculative.h"
#include "sampling/config.h"

namespace minfer::engine {

// Consecutive steps without progress after which the worker gives up on every open request.
inline constexpr int32_t kStallStepLimit = 64;

struct BatcherOptions {
  int32_t n_slots = 4;       // sequences decoded together; each choice of a request takes one
  int32_t queue_depth = 64;  // requests that may wait for slots; 0: refuse ("no idle slot") when none is free
  int32_t n_batch = 0;       // tokens per step (decode tokens + prefill chunks); 0: the engine's n_batch
  bool prefix_reuse = true;
  std::string
      slots_file;  // when set: slot tokens and KV rows saved after each completed request, loaded at start
  // Speculative decoding (off unless `speculate`): each decoding slot proposes up to spec.draft_n tokens
  // per step, from `draft_model` (same vocabulary; its KV cache holds one sequence per slot and should
  // have the target's context) or, when that is null, by prompt lookup over the slot's own tokens; the
  // step's forward verifies them. The output equals the same requests without speculation (greedy:
  // token for token; sampling: in distribution). Requests with mirostat are refused.
  bool speculate = false;
  Engine* draft_model = nullptr;  // not owned; used only by the worker
  SpecOptions spec;
  // Tests only: called by the worker before each forward; a failed Status is treated as that forward failing.
  std::function<Status(int64_t step)> fault_injector;
  // Tests only: called by the worker before each step; true makes that step a wedged one (it runs nothing
  // and so makes no progress), which is how the stall guard is exercised.
  std::function<bool()> stall_injector;
};

struct TopLogprob {
  int32_t token = 0;
  float logprob = 0.0f;
};

struct BatchRequest {
  std::vector<int32_t> prompt;  // the tokens to evaluate (template already applied); must not be empty
  int32_t n_predict = -1;  // generated tokens per choice; -1: until end of generation or the context fills
  int32_t n_choices = 1;   // OpenAI `n`: the choices share the prompt's KV rows
  std::vector<std::string> stop;     // stop strings (never emitted)
  sampling::SamplerConfig sampling;  // choice i samples with seed + i (a random seed is drawn once first)
  int32_t n_top_logprobs = -1;  // -1: no logprobs; 0..20: each token's logprob plus that many alternatives
};

struct BatchUsage {
  int32_t prompt_tokens = 0;
  int32_t cached_tokens = 0;      // prompt tokens whose KV rows were reused, not recomputed
  int32_t completion_tokens = 0;  // over every choice
};

struct BatchEvent {
  enum class Kind {
    kToken,     // one sampled token of a choice: its text (may be empty while held back) and logprobs
    kDone,      // a choice finished: finish_reason; `text` holds text held back until the end (append it)
    kFinished,  // the whole request finished: usage (always the last event)
    kError,     // the request failed (a forward failed, the batcher stopped); always followed by kFinished
  };
  Kind kind = Kind::kToken;
  int32_t choice = 0;
  int32_t token = -1;
  std::string text;             // complete UTF-8 only; stop strings and what follows them are never included
  float logprob = 0.0f;         // when n_top_logprobs >= 0: log-softmax of the raw logits
  std::vector<TopLogprob> top;  // the n_top_logprobs most likely tokens, most likely first
  std::string finish_reason;    // kDone: "stop" (end of generation or a stop string), "length", "grammar"
  std::string detail;           // kDone with "grammar": the sampler's message
  BatchUsage usage;             // kFinished; kToken and kDone: so far (prompt and cached tokens are final)
  Status error;                 // kError
};

class Batcher;

// The requester's side of one request. Events arrive in order; kFinished is always the last one.
class RequestHandle {
 public:
  // Waits up to `timeout` for the next event; nullopt on timeout (and forever after kFinished was taken).
  std::optional<BatchEvent> next(std::chrono::milliseconds timeout);
  // Abandons the request: its slots are freed within one step, no further events are produced, and its
  // tokens are not counted as delivered. Idempotent; safe after completion.
  void cancel() { cancelled_.store(true); }
  bool cancelled() const { return cancelled_.load(); }
  int64_t id() const { return id_; }

 private:
  friend class Batcher;
  void push(BatchEvent event);

  int64_t id_ = 0;
  std::atomic<bool> cancelled_{false};
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<BatchEvent> events_;
  bool finished_ = false;  // kFinished pushed
};

// A consistent-enough snapshot for /metrics: plain counters read without taking the worker's locks.
struct BatcherStats {
  int32_t n_slots = 0;
  int32_t slots_busy = 0;
  int32_t queue_depth = 0;         // accepted, waiting for slots
  int32_t requests_running = 0;    // occupying slots now
  int64_t requests_total = 0;      // accepted by submit()
  int64_t requests_completed = 0;  // finished with every choice delivered
  int64_t requests_rejected = 0;   // refused by submit(): queue full, no idle slot, draining
  int64_t requests_cancelled = 0;
  int64_t requests_failed = 0;  // answered with an error (a failed forward)
  int64_t prompt_tokens = 0;    // prompt tokens of completed requests
  int64_t cached_prompt_tokens = 0;
  int64_t completion_tokens = 0;              // delivered tokens of completed requests
  double completion_tokens_per_second = 0.0;  // over a trailing 16 s window
  int64_t steps = 0;
  int64_t spec_rounds = 0;  // speculative verifications (a decoder with proposals in a step)
  int64_t spec_drafted = 0;
  int64_t spec_accepted = 0;
  int64_t kv_cells_used = 0;
  int64_t kv_cells_total = 0;
  int32_t kv_sequences = 0;     // sequences holding cells (busy slots and idle slots' cached prefixes)
  int64_t kv_shared_cells = 0;  // cells owned by more than one sequence: prefix sharing at work
  int32_t pending_jobs = 0;     // requests the worker still owes an answer: queued plus running
  int64_t worker_stalled = 0;   // times the stall guard answered every open request (see kStallStepLimit)
  // Memory in bytes: weights (each tensor once), the KV cache's buffers, and the largest activation arena
  // a forward has used so far.
  int64_t memory_weights_bytes = 0;
  int64_t memory_kv_bytes = 0;
  int64_t memory_activations_bytes = 0;
  bool draining = false;
  int64_t drain_abandoned = 0;
  struct OpTime {
    std::string op;
    double seconds = 0.0;
    int64_t calls = 0;
  };
  std::vector<OpTime> op_times;  // per-op totals, only when MINFER_OP_TIMING=1 (copied after each step)
};

class Batcher {
 public:
  // Starts the worker. The engine must outlive the batcher and is used by nobody else meanwhile. With
  // options.slots_file set, restores slots from that file (a mismatch is logged and the batcher starts
  // empty). Fails on n_slots outside [1, kv::kMaxSequences] or a negative queue depth.
  static Result<std::unique_ptr<Batcher>> create(Engine& engine, const BatcherOptions& options);
  ~Batcher();  // stops the worker; requests still open get kError("the server is shutting down")

  // Validates and enqueues. Errors: kInvalidArgument (empty prompt, n_choices outside [1, n_slots],
  // n_top_logprobs > 20, a sampler config or grammar the sampler refuses: the message names it),
  // kOutOfRange (the prompt does not fit the context: both counts named), kUnavailable ("queue full",
  // "no idle slot" with queue_depth 0, "draining"). The sampler is compiled here, on the caller's thread.
  Result<std::shared_ptr<RequestHandle>> submit(BatchRequest request);

  // Stops accepting (submit answers kUnavailable "draining"), lets accepted requests run until `deadline`,
  // then cancels what is left with kError. Returns how many requests were abandoned.
  int64_t drain(std::chrono::milliseconds deadline);

  BatcherStats stats() const;
  const BatcherOptions& options() const { return options_; }

  // Writes every slot's tokens and KV rows to `path` atomically (versioned, checksummed). Runs on the
  // worker between steps; blocks the caller until done.
  Status save_slots(const std::string& path);

 private:
  struct Impl;
  explicit Batcher(std::unique_ptr<Impl> impl);
  BatcherOptions options_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace minfer::engine
