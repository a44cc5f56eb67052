// The observation seam: the scheduler calls each registered NodeObserver right after a node has run (its
// backend synchronized), before any later node can overwrite that node's buffer (in-place aliasing reuses
// buffers within a step). Dumps, traces, statistics and the visualizer are observers; none of them reaches
// into kernels or the graph. With no observer registered the scheduler does no extra work.
#pragma once

#include <cstdint>

#include "graph/ir.h"

namespace minfer::sched {

struct Plan;

// What an observer sees of one executed node.
struct NodeEvent {
  graph::NodeId id = 0;
  size_t order = 0;            // position in Plan::order (evaluation order)
  const void* data = nullptr;  // host-readable output (F32 activations, I32 inputs; a device node's is
                               // a host copy); nullptr when the node has no output of its own (KvStore)
  int64_t t_begin_ns = 0;      // steady_clock, around the node's execution
  int64_t t_end_ns = 0;
};

class NodeObserver {
 public:
  virtual ~NodeObserver() = default;
  // Once per Scheduler::execute (one micro-batch), before the first node.
  virtual void begin_step(const Plan& /*plan*/) {}
  // The data pointer is valid only during the call: copy what must outlive it.
  virtual void on_node(const Plan& plan, const NodeEvent& event) = 0;
  // After the last node of the step ran (also after a failed step, with ok = false).
  virtual void end_step(const Plan& /*plan*/, bool /*ok*/) {}
};

}  // namespace minfer::sched
