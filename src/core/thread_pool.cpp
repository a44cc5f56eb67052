// ThreadPool: generation counter + pending count; spin-then-futex-wait (std::atomic::wait) on both sides.
#include "core/thread_pool.h"

#include <algorithm>
#include <chrono>
#include <thread>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define MINFER_CPU_RELAX() _mm_pause()
#elif defined(__aarch64__)
#define MINFER_CPU_RELAX() asm volatile("yield" ::: "memory")
#else
#define MINFER_CPU_RELAX() \
  do {                     \
  } while (0)
#endif

namespace minfer {
namespace {
// ~20-50 us of spinning: covers the gap between consecutive ops of one forward pass without burning a
// core while the engine is idle.
constexpr int kSpinIterations = 20000;
// Past the first spins, yield the core every so often: when another process holds a core, a spinning
// thread otherwise burns its time slice while the thread it waits for cannot run (decode fell 6-8x with
// one busy process on a 2-core machine).
constexpr int kSpinBeforeYield = 1000;
constexpr int kYieldEvery = 64;

inline void spin_pause(int spin) {
  if (spin >= kSpinBeforeYield && spin % kYieldEvery == 0) {
    std::this_thread::yield();
  } else {
    MINFER_CPU_RELAX();
  }
}
}  // namespace

ThreadPool::ThreadPool(int n_threads) : n_threads_(std::max(1, n_threads)) {
  workers_.reserve(static_cast<size_t>(n_threads_ - 1));
  for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  stop_.store(true, std::memory_order_release);
  generation_.fetch_add(1, std::memory_order_acq_rel);
  generation_.notify_all();
  for (std::thread& t : workers_) t.join();
}

// One thread's share of the current job, timed only while a lane recorder is set.
void ThreadPool::run_task(int ith) {
  LaneRecorder* recorder = recorder_.load(std::memory_order_acquire);
  if (recorder == nullptr) {
    task_(ctx_, ith, n_threads_);
    return;
  }
  const int64_t t0 = lane_clock_ns();
  task_(ctx_, ith, n_threads_);
  recorder->record(ith, t0, lane_clock_ns());
}

void ThreadPool::run_impl(Task task, void* ctx) {
  task_ = task;
  ctx_ = ctx;
  if (n_threads_ == 1) {
    run_task(0);
    return;
  }
  pending_.store(n_threads_ - 1, std::memory_order_relaxed);
  generation_.fetch_add(1, std::memory_order_release);
  generation_.notify_all();
  run_task(0);
  for (int spin = 0; pending_.load(std::memory_order_acquire) != 0; ++spin) {
    if (spin < kSpinIterations) {
      spin_pause(spin);
    } else {
      const int left = pending_.load(std::memory_order_acquire);
      if (left != 0) pending_.wait(left, std::memory_order_acquire);
    }
  }
}

void ThreadPool::worker_loop(int ith) {
  // Generation 0 is the one before any job. Reading the live counter here instead would lose a job
  // posted before this thread first ran, and deadlock run() waiting on it.
  uint32_t seen = 0;
  for (;;) {
    uint32_t now = generation_.load(std::memory_order_acquire);
    for (int spin = 0; now == seen; ++spin) {
      if (spin < kSpinIterations) {
        spin_pause(spin);
      } else {
        generation_.wait(seen, std::memory_order_acquire);
      }
      now = generation_.load(std::memory_order_acquire);
    }
    seen = now;
    if (stop_.load(std::memory_order_acquire)) return;
    run_task(ith);
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) pending_.notify_one();
  }
}

}  // namespace minfer
