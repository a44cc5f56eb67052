#include "engine/batcher.h"

#include <algorithm>
#include <cstdlib>
#include <future>

#include "core/env.h"
#include "engine/batcher_worker.h"

namespace minfer::engine {
namespace {

using batching::Clock;
using batching::Job;
using batching::kRateWindowSeconds;
constexpr int32_t kMaxTopLogprobs = 20;

}  // namespace

// ---------------------------------------------------------------------------------------------------------
// RequestHandle

std::optional<BatchEvent> RequestHandle::next(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!cv_.wait_for(lock, timeout, [&] { return !events_.empty(); })) return std::nullopt;
  BatchEvent ev = std::move(events_.front());
  events_.pop_front();
  return ev;
}

void RequestHandle::push(BatchEvent event) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (finished_) return;
    if (event.kind == BatchEvent::Kind::kFinished) finished_ = true;
    events_.push_back(std::move(event));
  }
  cv_.notify_all();
}

// ---------------------------------------------------------------------------------------------------------
// Public API

Batcher::Batcher(std::unique_ptr<Impl> impl) : options_(impl->opt), impl_(std::move(impl)) {}

Batcher::~Batcher() {
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->stop = true;
  }
  impl_->cv.notify_all();
  if (impl_->worker.joinable()) impl_->worker.join();
}

Result<std::unique_ptr<Batcher>> Batcher::create(Engine& engine, const BatcherOptions& options) {
  if (options.n_slots < 1 || options.n_slots > kv::kMaxSequences) {
    return invalid_argument("--n-slots {} is outside [1, {}]", options.n_slots, kv::kMaxSequences);
  }
  if (options.queue_depth < 0) return invalid_argument("--queue-depth {} is negative", options.queue_depth);
  if (options.n_batch < 0) return invalid_argument("batch size {} is negative", options.n_batch);
  auto impl = std::make_unique<Impl>(engine, options);
  impl->n_batch = options.n_batch > 0 ? options.n_batch : engine.options().n_batch;
  impl->vocab = engine.sampling_vocab();
  if (options.speculate) {
    MINFER_ASSIGN_OR_RETURN(impl->drafter,
                            batching::BatchDrafter::create(engine, options.draft_model, options.spec));
  }
  MINFER_ASSIGN_OR_RETURN(impl->op_timing, env_bool("MINFER_OP_TIMING"));
  engine.kv().clear();
  impl->slots.resize(static_cast<size_t>(options.n_slots));
  for (size_t i = 0; i < impl->slots.size(); ++i) impl->slots[i].seq = static_cast<kv::SeqId>(i);
  if (!options.slots_file.empty()) impl->restore_slots();
  impl->weights_bytes = static_cast<int64_t>(engine.weights_bytes());
  impl->kv_bytes = static_cast<int64_t>(engine.kv().bytes());
  if (options.speculate && options.draft_model != nullptr) {  // the draft model's memory is the server's too
    impl->weights_bytes += static_cast<int64_t>(options.draft_model->weights_bytes());
    impl->kv_bytes += static_cast<int64_t>(options.draft_model->kv().bytes());
  }
  impl->publish_occupancy();
  Impl* raw = impl.get();
  impl->worker = std::thread([raw] { raw->run(); });
  return std::unique_ptr<Batcher>(new Batcher(std::move(impl)));
}

Result<std::shared_ptr<RequestHandle>> Batcher::submit(BatchRequest request) {
  Impl& im = *impl_;
  const int32_t n_ctx = im.engine.n_ctx();
  auto reject = [&](Status st) -> Status {
    im.rejected.fetch_add(1);
    return st;
  };
  if (request.prompt.empty()) return invalid_argument("the prompt is empty");
  for (int32_t id : request.prompt) {
    if (id < 0 || id >= im.engine.n_vocab()) {
      return invalid_argument("prompt token id {} is outside the vocabulary [0, {})", id,
                              im.engine.n_vocab());
    }
  }
  if (static_cast<int32_t>(request.prompt.size()) >= n_ctx) {
    return error(StatusCode::kOutOfRange, "the prompt has {} tokens but the context holds {}",
                 request.prompt.size(), n_ctx);
  }
  if (request.n_choices < 1 || request.n_choices > im.opt.n_slots) {
    return invalid_argument("n = {} is outside [1, {}] (the server's slots)", request.n_choices,
                            im.opt.n_slots);
  }
  if (request.n_top_logprobs > kMaxTopLogprobs) {
    return invalid_argument("top_logprobs = {} is above {}", request.n_top_logprobs, kMaxTopLogprobs);
  }
  if (request.n_predict == 0 || request.n_predict < -1) {
    return invalid_argument("max_tokens = {} must be at least 1", request.n_predict);
  }
  auto job = std::make_shared<Job>();
  uint64_t seed = request.sampling.seed;
  for (int32_t c = 0; c < request.n_choices; ++c) {
    sampling::SamplerConfig cfg = request.sampling;
    if (c > 0) cfg.seed = seed + static_cast<uint64_t>(c);
    MINFER_ASSIGN_OR_RETURN(sampling::Sampler sampler, sampling::Sampler::create(cfg, im.vocab));
    if (c == 0) seed = sampler.seed();
    for (int32_t id : request.prompt) sampler.accept_history(id);
    job->samplers.push_back(std::move(sampler));
  }
  job->handle = std::make_shared<RequestHandle>();
  job->submitted = Clock::now();
  job->req = std::move(request);
  if (im.drafter) MINFER_RETURN_IF_ERROR(im.drafter->prepare(*job));
  {
    std::lock_guard<std::mutex> lock(im.mu);
    if (im.draining || im.stop) return reject(unavailable("the server is draining"));
    // claimed_slots counts running jobs' slots and what queued jobs will need; beyond n_slots they wait.
    const int32_t free_slots = im.opt.n_slots - im.claimed_slots;
    if (job->req.n_choices > free_slots) {
      if (im.opt.queue_depth == 0) return reject(unavailable("no idle slot"));
      const int32_t waiting = std::max(0, im.claimed_slots - im.opt.n_slots);
      if (waiting + job->req.n_choices > im.opt.queue_depth) return reject(unavailable("queue full"));
    }
    job->handle->id_ = im.next_id++;
    im.claimed_slots += job->req.n_choices;
    im.queue.push_back(job);
    im.queue_len.store(static_cast<int32_t>(im.queue.size()));
    im.total.fetch_add(1);
  }
  im.cv.notify_all();
  return job->handle;
}

int64_t Batcher::drain(std::chrono::milliseconds deadline) {
  Impl& im = *impl_;
  std::unique_lock<std::mutex> lock(im.mu);
  im.draining = true;
  const bool clean =
      im.idle_cv.wait_for(lock, deadline, [&] { return im.queue.empty() && im.jobs_active == 0; });
  if (clean) return 0;
  const int64_t before = im.aborted;
  im.abort_all = true;
  im.cv.notify_all();
  im.idle_cv.wait(lock, [&] { return !im.abort_all; });
  // The worker has taken the flag; wait until it has answered everyone.
  im.idle_cv.wait_for(lock, std::chrono::seconds(30),
                      [&] { return im.queue.empty() && im.jobs_active == 0; });
  const int64_t abandoned = im.aborted - before;
  im.drain_abandoned.store(abandoned);
  return abandoned;
}

BatcherStats Batcher::stats() const {
  const Impl& im = *impl_;
  BatcherStats s;
  s.n_slots = im.opt.n_slots;
  s.slots_busy = im.slots_busy.load();
  s.queue_depth = im.queue_len.load();
  s.requests_running = im.running.load();
  s.requests_total = im.total.load();
  s.requests_completed = im.completed.load();
  s.requests_rejected = im.rejected.load();
  s.requests_cancelled = im.cancelled.load();
  s.requests_failed = im.failed.load();
  s.prompt_tokens = im.prompt_tokens.load();
  s.cached_prompt_tokens = im.cached_tokens.load();
  s.completion_tokens = im.completion_tokens.load();
  s.steps = im.steps.load();
  s.spec_rounds = im.spec_rounds.load();
  s.spec_drafted = im.spec_drafted.load();
  s.spec_accepted = im.spec_accepted.load();
  s.kv_cells_used = im.kv_used.load();
  s.kv_cells_total = im.engine.kv().n_cells();
  s.kv_sequences = im.kv_sequences.load();
  s.kv_shared_cells = im.kv_shared.load();
  s.pending_jobs = im.queue_len.load() + im.running.load();
  s.worker_stalled = im.stalled.load();
  s.memory_weights_bytes = im.weights_bytes;
  s.memory_kv_bytes = im.kv_bytes;
  s.memory_activations_bytes = im.activations_bytes.load();
  s.drain_abandoned = im.drain_abandoned.load();
  {
    std::lock_guard<std::mutex> lock(im.stats_mu);
    const auto now = Clock::now();
    int64_t n = 0;
    for (const auto& [t, k] : im.rate_window) {
      if (std::chrono::duration<double>(now - t).count() <= kRateWindowSeconds) n += k;
    }
    s.completion_tokens_per_second = static_cast<double>(n) / kRateWindowSeconds;
    s.op_times = im.op_times;
  }
  {
    std::lock_guard<std::mutex> lock(im.mu);
    s.draining = im.draining;
  }
  return s;
}

Status Batcher::save_slots(const std::string& path) {
  Impl& im = *impl_;
  std::promise<Status> done;
  auto result = done.get_future();
  {
    std::lock_guard<std::mutex> lock(im.mu);
    if (im.save_done != nullptr) return unavailable("a slots save is already in progress");
    im.save_request = path;
    im.save_done = &done;
  }
  im.cv.notify_all();
  return result.get();
}

}  // namespace minfer::engine
