// Ending choices and requests. Every request ends with exactly one kFinished event, whatever ends it:
// its last choice finishing, an error (its other slots are released at once), its client cancelling, or
// the batcher stopping. The counters, the queue length and the published KV occupancy move before the
// terminal events, so a requester that saw its end also sees it in stats().
// Each end logs the request's one info line (log_request): what an operator needs to explain its latency.
#include "engine/batcher_worker.h"

#include <algorithm>
#include <chrono>
#include <deque>
#include <vector>

#include <fmt/ranges.h>

#include "core/log.h"

namespace minfer::engine {

void Batcher::Impl::log_request(const Job& job, std::string_view outcome) const {
  if (static_cast<int>(LogLevel::kInfo) < static_cast<int>(log_level())) return;
  std::string where = "none (never admitted)";
  if (!job.slots.empty()) where = fmt::format("{}", fmt::join(job.slots, ","));
  std::string ttft = "none (no token)";
  // Microseconds: a fully cached prompt's first token on a small model comes in well under 0.1 ms.
  if (job.first_token)
    ttft = fmt::format("{:.3f} ms",
                       std::chrono::duration<double, std::milli>(*job.first_token - job.submitted).count());
  MINFER_LOG_INFO(
      "batcher: request {} {}: prompt {} tokens, {} cached tokens reused, slot {}, time to first token "
      "{}, {} completion tokens",
      job.handle->id(), outcome, job.req.prompt.size(), job.usage.cached_tokens, where, ttft,
      job.usage.completion_tokens);
}

void Batcher::Impl::finish_choice(Slot& slot, const std::string& reason, std::string text,
                                  std::string detail) {
  std::shared_ptr<Job> job = slot.job;
  BatchEvent ev;
  ev.kind = BatchEvent::Kind::kDone;
  ev.choice = slot.choice;
  ev.finish_reason = reason;
  ev.text = std::move(text);
  ev.detail = std::move(detail);
  ev.usage = job->usage;
  job->handle->push(std::move(ev));
  release(slot);
  if (--job->choices_open == 0) complete_job(*job);
}

void Batcher::Impl::release(Slot& slot) {
  if (!slot.job) return;
  // Only the slot's tokens stay cached (a verify step may have left rows of refused proposals).
  engine.kv().seq_rm(slot.seq, static_cast<int32_t>(slot.tokens.size()), -1);
  slot.job.reset();
  slot.generating = false;
  slot.next_token = -1;
  slot.detok.reset();
  slot.stops.reset();
  slot.last_used = Clock::now();
  ++progress;
  slots_busy.fetch_sub(1);
  std::lock_guard<std::mutex> lock(mu);
  --claimed_slots;
}

void Batcher::Impl::complete_job(Job& job) {
  if (!opt.slots_file.empty()) {
    if (Status st = save_now(opt.slots_file); !st.ok())
      MINFER_LOG_WARN("batcher: slots file not saved: {}", st.message());
  }
  if (job.spec.rounds > 0) MINFER_LOG_INFO("batcher: request {}: {}", job.handle->id(), job.spec.summary());
  log_request(job, "completed");
  // Counters first, so a requester that has seen kFinished also sees them in stats().
  completed.fetch_add(1);
  prompt_tokens.fetch_add(job.usage.prompt_tokens);
  cached_tokens.fetch_add(job.usage.cached_tokens);
  completion_tokens.fetch_add(job.usage.completion_tokens);
  running.fetch_sub(1);
  {
    std::lock_guard<std::mutex> lock(mu);
    --jobs_active;
  }
  publish_occupancy();
  BatchEvent ev;
  ev.kind = BatchEvent::Kind::kFinished;
  ev.usage = job.usage;
  job.handle->push(std::move(ev));
  idle_cv.notify_all();
}

// Bookkeeping of a failed request: its slots, the counters and the log line. No event yet.
void Batcher::Impl::retire_failed(std::shared_ptr<Job> job, const Status& status) {
  bool admitted = false;
  for (int32_t si : job->slots) {
    Slot& s = slots[static_cast<size_t>(si)];
    if (s.job == job) {
      release(s);
      admitted = true;
    }
  }
  if (admitted) {
    running.fetch_sub(1);
    std::lock_guard<std::mutex> lock(mu);
    --jobs_active;
  }
  job->choices_open = 0;
  ++progress;
  failed.fetch_add(1);
  log_request(*job, fmt::format("failed ({})", status.message()));
}

void Batcher::Impl::send_failure(Job& job, const Status& status) {
  BatchEvent err;
  err.kind = BatchEvent::Kind::kError;
  err.error = status;
  job.handle->push(std::move(err));
  BatchEvent fin;
  fin.kind = BatchEvent::Kind::kFinished;
  fin.usage = job.usage;
  job.handle->push(std::move(fin));
}

void Batcher::Impl::fail_job(std::shared_ptr<Job> job, const Status& status) {
  if (!job) return;
  retire_failed(job, status);
  publish_occupancy();
  send_failure(*job, status);
  idle_cv.notify_all();
}

void Batcher::Impl::reap_cancelled() {
  for (Slot& s : slots) {
    if (!s.job || !s.job->handle->cancelled()) continue;
    std::shared_ptr<Job> job = s.job;
    for (int32_t si : job->slots) release(slots[static_cast<size_t>(si)]);
    cancelled.fetch_add(1);
    log_request(*job, "cancelled");
    running.fetch_sub(1);
    {
      std::lock_guard<std::mutex> lock(mu);
      --jobs_active;
    }
    publish_occupancy();
    job->handle->push({.kind = BatchEvent::Kind::kFinished});
    idle_cv.notify_all();
  }
}

int64_t Batcher::Impl::abort_everything(const Status& why, bool shutting_down) {
  std::vector<std::shared_ptr<Job>> ended;
  for (Slot& s : slots) {
    if (!s.job) continue;
    ended.push_back(s.job);
    retire_failed(s.job, why);  // releases every slot of the job, so it is met once
  }
  std::deque<std::shared_ptr<Job>> waiting;
  {
    std::lock_guard<std::mutex> lock(mu);
    waiting.swap(queue);
    for (const auto& job : waiting) claimed_slots -= job->req.n_choices;
  }
  queue_len.store(0);
  for (auto& job : waiting) {
    failed.fetch_add(1);
    log_request(*job, fmt::format("failed in the queue ({})", why.message()));
    ended.push_back(std::move(job));
  }
  const auto n = static_cast<int64_t>(ended.size());
  if (shutting_down) {
    std::lock_guard<std::mutex> lock(mu);
    aborted += n;
  }
  publish_occupancy();
  for (const auto& job : ended) send_failure(*job, why);
  idle_cv.notify_all();
  return n;
}

}  // namespace minfer::engine
