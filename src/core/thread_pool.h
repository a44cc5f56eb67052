// A persistent thread pool for data-parallel kernels: n-1 workers plus the calling thread run one
// function together and the call returns when all are done. No allocation or thread creation per call.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <type_traits>
#include <vector>

namespace minfer {

// Receives, from each thread, the steady_clock interval it spent on a job (for trace lanes). record() is
// called concurrently by different threads, each with its own `ith`.
class LaneRecorder {
 public:
  virtual ~LaneRecorder() = default;
  // Times are lane_clock_ns() readings.
  virtual void record(int ith, int64_t t_begin_ns, int64_t t_end_ns) = 0;
};

// The clock of lane records: steady, in nanoseconds.
inline int64_t lane_clock_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Usage:
//   ThreadPool pool(4);
//   pool.run([&](int ith, int nth) { for (int64_t r = ith; r < n; r += nth) work(r); });
// Workers spin briefly after each job (so back-to-back ops start fast), then sleep on a futex.
// run() is not reentrant and must be called from one thread at a time.
class ThreadPool {
 public:
  explicit ThreadPool(int n_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int n_threads() const { return n_threads_; }
  // Times every thread's share of each job into `recorder` (nullptr: off, the default). Set between jobs.
  void set_lane_recorder(LaneRecorder* recorder) { recorder_.store(recorder, std::memory_order_release); }

  // Runs fn(ith, nth) on every thread (the caller is ith 0) and returns when all are done.
  template <typename F>
  void run(F&& fn) {
    using Fn = std::remove_reference_t<F>;
    run_impl([](void* ctx, int ith, int nth) { (*static_cast<Fn*>(ctx))(ith, nth); },
             const_cast<void*>(static_cast<const void*>(&fn)));
  }

 private:
  using Task = void (*)(void* ctx, int ith, int nth);
  void run_impl(Task task, void* ctx);
  void worker_loop(int ith);
  void run_task(int ith);

  int n_threads_;
  std::vector<std::thread> workers_;
  Task task_ = nullptr;
  void* ctx_ = nullptr;
  alignas(64) std::atomic<uint32_t> generation_{0};  // bumped once per job; workers wait on it
  alignas(64) std::atomic<int> pending_{0};          // workers still running the current job
  std::atomic<bool> stop_{false};
  std::atomic<LaneRecorder*> recorder_{nullptr};
};

}  // namespace minfer
