// The worker loop: waits for work, admits queued requests, answers a pending save, frees cancelled
// requests' slots and runs a step; on a drain deadline or at shutdown it answers everything left.
#include "engine/batcher_worker.h"

#include <chrono>

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
      abort_everything(unavailable("the server is shutting down (drain deadline passed)"));
      idle_cv.notify_all();
      continue;
    }
    if (save_promise != nullptr) save_promise->set_value(save_now(save_path));
    reap_cancelled();
    bool progressed = false;
    for (const Slot& s : slots) progressed |= s.job != nullptr;
    if (progressed && !step()) {
      // Nothing could run this step (waiting for cells): yield instead of spinning.
      std::unique_lock<std::mutex> lock(mu);
      cv.wait_for(lock, std::chrono::milliseconds(5));
    }
    if (!progressed) {
      // Admission is waiting for cells held by nobody active: re-check shortly.
      std::unique_lock<std::mutex> lock(mu);
      if (!queue.empty() && jobs_active == 0) cv.wait_for(lock, std::chrono::milliseconds(5));
    }
  }
  abort_everything(unavailable("the server is shutting down"));
  idle_cv.notify_all();
}

}  // namespace minfer::engine
