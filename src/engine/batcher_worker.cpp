// The worker loop: waits for work, admits queued requests, answers a pending save, frees cancelled
// requests' slots and runs a step; on a drain deadline or at shutdown it answers everything left.
//
// The stall guard lives here because only the loop sees consecutive steps: a step that makes no progress
// (nothing evaluated, no request admitted or ended) is retried after a short wait, as waiting for cells is
// legitimate for a few steps; kStallStepLimit of them in a row is a wedge, and without the guard every
// open request would wait forever while the worker spun.
#include "engine/batcher_worker.h"

#include <chrono>

#include "core/log.h"

namespace minfer::engine {

void Batcher::Impl::run() {
  for (;;) {
    std::string save_path;
    std::promise<Status>* save_promise = nullptr;
    bool abort = false;
    {
      std::unique_lock<std::mutex> lock(mu);
      cv.wait(lock, [&] {
        return stop || abort_all || !save_request.empty() || !queue.empty() || jobs_active > 0;
      });
      if (stop) break;
      abort = abort_all;
      abort_all = false;
      save_path.swap(save_request);
      save_promise = save_done;
      save_done = nullptr;
      if (!abort) admit_locked();
    }
    if (abort) {
      abort_everything(unavailable("the server is shutting down (drain deadline passed)"), true);
      continue;
    }
    if (save_promise != nullptr) save_promise->set_value(save_now(save_path));
    reap_cancelled();
    bool busy = false;
    for (const Slot& s : slots) busy |= s.job != nullptr;
    bool ran = false;
    const int64_t before = progress;
    if (busy) ran = !(opt.stall_injector && opt.stall_injector()) && step();
    publish_occupancy();
    if (!busy || progress != before) {
      steps_without_progress = 0;
    } else if (++steps_without_progress >= kStallStepLimit) {
      stalled_now();
      continue;
    }
    if (busy && !ran) {
      // Nothing could run this step (waiting for cells): yield instead of spinning.
      std::unique_lock<std::mutex> lock(mu);
      cv.wait_for(lock, std::chrono::milliseconds(5));
    }
    if (!busy) {
      // Admission is waiting for cells held by nobody active: re-check shortly.
      std::unique_lock<std::mutex> lock(mu);
      if (!queue.empty() && jobs_active == 0) cv.wait_for(lock, std::chrono::milliseconds(5));
    }
  }
  abort_everything(unavailable("the server is shutting down"), true);
}

void Batcher::Impl::stalled_now() {
  steps_without_progress = 0;
  stalled.fetch_add(1);
  MINFER_LOG_ERROR("batcher: {} steps in a row made no progress; answering every open request with an error",
                   kStallStepLimit);
  // Their rows may be what wedged the step: the slots come back empty.
  for (Slot& s : slots) {
    if (s.job) drop_cache(s);
  }
  abort_everything(error(StatusCode::kInternal, "the worker stalled: {} steps in a row made no progress",
                         kStallStepLimit),
                   false);
}

}  // namespace minfer::engine
