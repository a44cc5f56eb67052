// MINFER_TRACE=FILE.json: a Chrome trace-event file (Perfetto, chrome://tracing). Lane "scheduler" holds one
// complete ("X") slice per step and, inside it, one per executed node with op, shape, dtype, layer and
// backend in args; lanes "pool thread N" hold each thread-pool thread's share of every node's job.
// Events are kept in memory and written by write() (the CLI calls it at exit).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/thread_pool.h"
#include "sched/observer.h"

namespace minfer::inspect {

class TraceObserver : public sched::NodeObserver, public LaneRecorder {
 public:
  // `pool` (optional) gets this as its lane recorder until destruction.
  TraceObserver(std::string path, ThreadPool* pool);
  ~TraceObserver() override;

  void begin_step(const sched::Plan& plan) override;
  void on_node(const sched::Plan& plan, const sched::NodeEvent& event) override;
  void end_step(const sched::Plan& plan, bool ok) override;
  void record(int ith, int64_t t_begin_ns, int64_t t_end_ns) override;

  // Writes the whole trace to the path (again: each call rewrites the file with every event so far).
  Status write() const;
  const std::string& path() const { return path_; }

 private:
  struct Slice {
    std::string name;
    std::string cat;
    int tid = 0;
    int64_t t0 = 0, t1 = 0;  // ns, steady_clock
    std::string args;        // JSON object text
  };
  std::string path_;
  ThreadPool* pool_;
  int n_lanes_ = 1;
  int64_t origin_ns_ = 0;
  int64_t step_ = 0;
  int64_t step_t0_ = 0;
  std::string step_args_;
  std::vector<Slice> slices_;
  std::vector<std::vector<std::pair<int64_t, int64_t>>> lanes_;  // per pool thread, intervals not yet claimed
};

}  // namespace minfer::inspect
