// The scheduler turns a model's graph into an executable plan and runs it:
//   build (the model's pure function of GraphParams) -> assign backends -> fuse -> allocate -> execute.
// Plans are cached by GraphParams: a decode step with the same token count reuses the built, assigned and
// allocated plan; positions, KV cells and windows are data bound at execution, never topology.
// With several backends, a split is a maximal run of nodes on one backend; they meet at copies of only
// the tensors that cross (Split::inputs for a host split, the device backend's own copy-in of host
// pointers for a device split, Plan::outputs after the last split), see docs/BACKENDS.md.
//
//   Scheduler sched({&cpu}, &pool);
//   auto plan = sched.plan({n_tokens, n_outputs}, [&] { return model.build_graph(params); });
//   MINFER_RETURN_IF_ERROR(sched.execute(**plan, batch, kv.views()));
//   const float* logits = sched.output_data(**plan, 0);
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "core/thread_pool.h"
#include "graph/params.h"
#include "graph/passes/fuse.h"
#include "sched/observer.h"

namespace minfer::sched {

using graph::GraphParams;

// A device node's bytes copied into host memory before a host split reads them (the split's inputs
// from other backends). Host bytes a device split reads need no entry: the device backend copies them in
// when it records the op (see Backend::host_memory).
struct Staged {
  graph::NodeId node = graph::kNoNode;  // the source as the split's nodes name it
  int32_t from = 0;                     // backend holding its storage
  size_t offset = 0;                    // in Plan::staging
  size_t bytes = 0;
};

struct Split {
  int32_t backend = 0;
  size_t begin = 0;  // range in Plan::order
  size_t end = 0;
  std::vector<Staged> inputs;  // copied in before the split runs; empty when nothing crosses
};

struct Plan {
  GraphParams params;
  graph::Graph graph;
  std::vector<graph::NodeId> order;  // nodes to execute, in build order (dead and bound nodes skipped)
  std::vector<Split> splits;
  std::vector<std::unique_ptr<backend::Buffer>> arenas;  // one per backend that needs activations
  std::vector<void*> data;                               // per node: buffer, weight handle or bound input
  std::vector<size_t> arena_bytes;                       // per backend
  graph::FuseStats fuse_stats;
  // Host memory for the staged split inputs (reused by every split: a staged copy is read only by its
  // split) followed by the graph outputs that live on a device, downloaded after the last split.
  std::unique_ptr<backend::Buffer> staging;
  std::vector<Staged> outputs;  // per graph output on a device; node = the output
  size_t n_crossings() const;   // staged tensors, over all splits and outputs
};

class Scheduler {
 public:
  using Builder = std::function<Result<graph::Graph>(const GraphParams&)>;
  // Whether `node` may run on `backend` at all (besides supports_op): the engine's layer offload.
  // Unset: every backend may run every node it supports.
  using Placement = std::function<bool(const graph::Node& node, const backend::Backend& backend)>;

  // `backends` in any order; assignment prefers higher priority(). The pool runs the CPU kernels.
  Scheduler(std::vector<backend::Backend*> backends, ThreadPool* pool);
  ~Scheduler();  // prints the op timing table when MINFER_OP_TIMING=1

  // The plan for `params`: built on first use, then reused. At most `max_plans` are kept (oldest dropped).
  Result<Plan*> plan(const GraphParams& params, const Builder& build);
  // Runs every split of `plan`. Inputs are bound from `batch`; KV ops read and write `kv`.
  Status execute(Plan& plan, const backend::BatchView& batch, std::span<const backend::KvLayerView> kv);
  // Host pointer to output `i` (graph.outputs[i]) after execute.
  const float* output_data(const Plan& plan, size_t i) const;

  // Assign + fuse + allocate an already built graph (also what plan() does on a miss).
  Result<std::unique_ptr<Plan>> prepare(graph::Graph graph, const GraphParams& params);
  // Set before the first plan: plans already built keep their assignment.
  void set_placement(Placement placement) { placement_ = std::move(placement); }
  // Assigns every node but the weights (index into backends(), highest priority first), as prepare()
  // would: which backend runs what, so the engine can register weights where their readers run.
  Status assign_ops(graph::Graph& graph) const;
  const std::vector<backend::Backend*>& backends() const { return backends_; }

  std::vector<std::string> backend_names() const;
  // Per-op wall time, collected when MINFER_OP_TIMING=1 (printed to stderr at destruction).
  struct OpTime {
    double seconds = 0;
    int64_t calls = 0;
  };
  // The per-op totals so far (empty unless MINFER_OP_TIMING=1). Read it on the thread that executes.
  const std::map<std::string, OpTime>& op_times() const { return op_times_; }
  int64_t n_builds() const { return n_builds_; }
  void set_max_plans(size_t n) { max_plans_ = n; }

  // Observers see every executed node of every step (see sched/observer.h). Not owned; remove before
  // destroying one. Call between steps, on the thread that executes.
  void add_observer(NodeObserver* observer);
  void remove_observer(NodeObserver* observer);

 private:
  Status assign(graph::Graph& graph) const;
  Status stage_inputs(Plan& plan, const Split& split);
  Status download_outputs(Plan& plan);
  std::span<void* const> split_data(Plan& plan, const Split& split);
  Status execute_observed(Plan& plan, const backend::ExecContext& ctx);
  Status allocate(Plan& plan);

  std::vector<backend::Backend*> backends_;  // sorted by priority, highest first
  ThreadPool* pool_;
  std::map<GraphParams, std::unique_ptr<Plan>> plans_;
  std::vector<GraphParams> plan_order_;  // insertion order, for eviction
  size_t max_plans_ = 8;
  int64_t n_builds_ = 0;
  bool op_timing_ = false;
  std::map<std::string, OpTime> op_times_;
  std::vector<NodeObserver*> observers_;
  Placement placement_;
  std::vector<void*> split_data_;  // plan.data with a split's staged inputs swapped in (reused)
  std::vector<float> observed_;    // a device node's output copied for the observers
};

}  // namespace minfer::sched
