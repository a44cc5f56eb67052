// The batcher's worker state (internal to engine/): Batcher::Impl, the one object the public API and the
// worker thread share. Its methods are defined by concern, one file each, and the files call one another
// in one direction only, top to bottom:
//
//   batcher.cpp              public API: create, submit, drain, stats, save_slots, RequestHandle
//   batcher_worker.cpp       the loop: waits for work, admits, runs steps, the stall guard, shutdown
//   batcher_admission.cpp    queued request -> slots (prefix reuse: the best own or shared prefix)
//   batcher_step.cpp         one step: compose decode tokens + prefill chunks, one forward, hand out rows
//   batcher_speculation.cpp  the batcher's side of speculation: proposal caps, verification of the rows
//   batcher_delivery.cpp     a sampled token -> events (logprobs, stop strings, limits)
//   batcher_lifecycle.cpp    ending choices and requests: finish, release, complete, fail, cancel, abort
//   batcher_cells.cpp        the cell pool: evicting idle slots' cached prefixes (admission and step)
//   batcher_slots_file.cpp   --slots-file: save after each completed request, restore at start
//
// The records (Job, Slot) are in batcher_slots.h, shared with batch_drafter.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <future>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "engine/batch_drafter.h"
#include "engine/batcher.h"
#include "engine/batcher_slots.h"
#include "kv/kv_state.h"

namespace minfer::engine {

namespace batching {
// Tokens/s in BatcherStats is over this trailing window (a lifetime average would keep reporting a burst).
inline constexpr double kRateWindowSeconds = 16.0;
}  // namespace batching

struct Batcher::Impl {
  using Clock = batching::Clock;
  using Job = batching::Job;
  using Slot = batching::Slot;

  Engine& engine;
  BatcherOptions opt;
  int32_t n_batch = 512;
  std::shared_ptr<const sampling::VocabView> vocab;
  std::vector<Slot> slots;

  // Shared with submitters, guarded by mu.
  mutable std::mutex mu;
  std::condition_variable cv;       // wakes the worker
  std::condition_variable idle_cv;  // wakes drain()
  std::deque<std::shared_ptr<Job>> queue;
  int32_t claimed_slots = 0;  // slots held by admitted jobs plus those the queued jobs need
  int32_t jobs_active = 0;    // admitted, not finished
  bool stop = false;
  bool draining = false;
  bool abort_all = false;  // drain deadline passed: fail everything left
  int64_t aborted = 0;
  std::string save_request;
  std::promise<Status>* save_done = nullptr;
  int64_t next_id = 1;

  // Counters read by stats() without the worker's cooperation.
  std::atomic<int32_t> slots_busy{0}, queue_len{0}, running{0};
  std::atomic<int64_t> total{0}, completed{0}, rejected{0}, cancelled{0}, failed{0};
  std::atomic<int64_t> prompt_tokens{0}, cached_tokens{0}, completion_tokens{0}, steps{0};
  std::atomic<int64_t> kv_used{0}, drain_abandoned{0};
  std::atomic<int32_t> kv_sequences{0};
  std::atomic<int64_t> kv_shared{0}, stalled{0};
  std::atomic<int64_t> activations_bytes{0};
  int64_t weights_bytes = 0, kv_bytes = 0;  // fixed at create()
  mutable std::mutex stats_mu;              // rate window and op times
  std::deque<std::pair<Clock::time_point, int32_t>> rate_window;
  std::vector<BatcherStats::OpTime> op_times;
  bool op_timing = false;

  // Step cost estimates for sizing prefill chunks next to decoding streams.
  double ema_decode_ms = 0.0;
  double ema_prefill_token_ms = 0.0;

  std::unique_ptr<batching::BatchDrafter> drafter;  // speculation; null when off
  std::atomic<int64_t> spec_rounds{0}, spec_drafted{0}, spec_accepted{0};

  // Stall guard (worker only): `progress` moves with every forward run and every request admitted or
  // ended; steps_without_progress counts the busy loop turns in a row that left it where it was.
  int64_t progress = 0;
  int32_t steps_without_progress = 0;

  std::thread worker;

  Impl(Engine& e, const BatcherOptions& o) : engine(e), opt(o) {}

  // batcher_worker.cpp
  void run();
  void stalled_now();  // the guard tripped: answer every open request, drop their rows, carry on

  // batcher_admission.cpp (called with mu held)
  void admit_locked();

  // batcher_step.cpp
  struct PrefillBudget {  // prefill tokens per step beside decoding streams
    int32_t step;         // for the whole step
    int32_t long_prompt;  // for one long prompt's chunk
  };
  PrefillBudget prefill_budget(int32_t n_decode) const;
  bool step();  // false when nothing could run

  // batcher_speculation.cpp
  // Proposals each decoder may get this step (0: none); adds them to *n_decode_tokens when granted.
  std::vector<int32_t> speculation_caps(std::span<const size_t> decoders, const std::vector<bool>& busy,
                                        int64_t* n_decode_tokens);
  void verify_choice(Slot& slot, std::span<const float> rows, double step_ms);

  // batcher_delivery.cpp
  void sample_choice(Slot& slot, std::span<const float> row);
  bool take_token(Slot& slot, Result<int32_t> token, std::span<const float> row);
  void record_rate(int32_t n);

  // batcher_lifecycle.cpp
  void finish_choice(Slot& slot, const std::string& reason, std::string text, std::string detail = "");
  void release(Slot& slot);
  void complete_job(Job& job);
  void fail_job(std::shared_ptr<Job> job, const Status& status);  // by value: it resets the slots holding it
  void reap_cancelled();
  void retire_failed(std::shared_ptr<Job> job, const Status& status);  // by value, as fail_job; no event
  void send_failure(Job& job, const Status& status);                         // kError then kFinished
  // Answers every admitted and queued request with `why`; shutting_down also counts them as aborted.
  int64_t abort_everything(const Status& why, bool shutting_down);  // returns how many it answered
  void log_request(const Job& job, std::string_view outcome) const;  // the one info line per request

  // batcher_cells.cpp
  bool ensure_cells(int64_t need, const std::vector<bool>& protect);
  void drop_cache(Slot& slot);
  void publish_occupancy();  // cells, sequences, shared cells and the activation high-water for stats()

  // batcher_slots_file.cpp
  Status save_now(const std::string& path);
  void restore_slots();  // from opt.slots_file, at create(); logs what it restored or why it started empty
  // A file from another model, context, cache type or slot count is refused (slot i must mean slot i).
  kv::KvFileIdentity identity() const {
    return {engine.fingerprint(), engine.n_ctx(), engine.options().cache_type, opt.n_slots};
  }
};

}  // namespace minfer::engine
