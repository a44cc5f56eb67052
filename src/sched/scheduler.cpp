#include "sched/scheduler.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>

#include "core/env.h"
#include "graph/passes/liveness.h"

namespace minfer::sched {
namespace {

using graph::Graph;
using graph::Node;
using graph::NodeId;
using graph::OpKind;

// Nodes whose data is not an activation buffer of their own.
bool needs_buffer(const Node& n) {
  return n.op != OpKind::kInput && n.op != OpKind::kWeight && n.op != OpKind::kReshape && n.op != OpKind::kKvStore;
}

// Elementwise ops that may write over their first source when nothing else reads it later.
bool can_run_in_place(OpKind op) {
  return op == OpKind::kAdd || op == OpKind::kMul || op == OpKind::kSilu || op == OpKind::kSwiGlu ||
         op == OpKind::kGelu || op == OpKind::kScale || op == OpKind::kSoftcap ||
         op == OpKind::kRope || op == OpKind::kRmsNorm;
}

// First-fit offset allocator over one arena; tracks the high-water mark.
class OffsetAllocator {
 public:
  explicit OffsetAllocator(size_t alignment) : alignment_(alignment) {}
  size_t alloc(size_t bytes) {
    bytes = (bytes + alignment_ - 1) / alignment_ * alignment_;
    for (size_t i = 0; i < free_.size(); ++i) {
      if (free_[i].second >= bytes) {
        const size_t off = free_[i].first;
        free_[i].first += bytes;
        free_[i].second -= bytes;
        if (free_[i].second == 0) free_.erase(free_.begin() + static_cast<std::ptrdiff_t>(i));
        return off;
      }
    }
    const size_t off = top_;
    top_ += bytes;
    peak_ = std::max(peak_, top_);
    return off;
  }
  void release(size_t off, size_t bytes) {
    bytes = (bytes + alignment_ - 1) / alignment_ * alignment_;
    free_.emplace_back(off, bytes);
    std::sort(free_.begin(), free_.end());
    std::vector<std::pair<size_t, size_t>> merged;
    for (const auto& b : free_) {
      if (!merged.empty() && merged.back().first + merged.back().second == b.first) {
        merged.back().second += b.second;
      } else {
        merged.push_back(b);
      }
    }
    if (!merged.empty() && merged.back().first + merged.back().second == top_) {  // give the tail back
      top_ = merged.back().first;
      merged.pop_back();
    }
    free_ = std::move(merged);
  }
  size_t peak() const { return peak_; }

 private:
  size_t alignment_;
  size_t top_ = 0;
  size_t peak_ = 0;
  std::vector<std::pair<size_t, size_t>> free_;  // (offset, size), sorted
};

}  // namespace

Scheduler::Scheduler(std::vector<backend::Backend*> backends, ThreadPool* pool)
    : backends_(std::move(backends)), pool_(pool) {
  op_timing_ = env_flag("MINFER_OP_TIMING");
  std::stable_sort(backends_.begin(), backends_.end(),
                   [](const backend::Backend* a, const backend::Backend* b) { return a->priority() > b->priority(); });
}

Scheduler::~Scheduler() {
  if (!op_timing_ || op_times_.empty()) return;
  double total = 0;
  for (const auto& [name, t] : op_times_) total += t.seconds;
  std::fprintf(stderr, "\nop timing (MINFER_OP_TIMING=1):\n  %-12s %10s %10s %7s\n", "op", "seconds", "calls", "share");
  for (const auto& [name, t] : op_times_) {
    std::fprintf(stderr, "  %-12s %10.4f %10lld %6.1f%%\n", name.c_str(), t.seconds, static_cast<long long>(t.calls),
                 total > 0 ? 100.0 * t.seconds / total : 0.0);
  }
}

std::vector<std::string> Scheduler::backend_names() const {
  std::vector<std::string> names;
  for (const backend::Backend* b : backends_) names.emplace_back(b->name());
  return names;
}

Status Scheduler::assign_ops(Graph& graph) const {
  for (size_t i = 0; i < graph.size(); ++i) {
    Node& n = graph.nodes[i];
    n.backend = -1;
    if (n.op == OpKind::kWeight) continue;  // goes where its readers run (assign)
    if (n.op == OpKind::kReshape) {         // a view: where its storage is, so it never breaks a split
      n.backend = graph.node(n.src[0]).backend;
      if (n.backend >= 0) continue;
    }
    for (size_t b = 0; b < backends_.size(); ++b) {
      const backend::Backend& be = *backends_[b];
      const bool ok = n.op == OpKind::kInput ? be.host_memory()  // host data
                                             : (!placement_ || placement_(n, be)) && be.supports_op(graph, n);
      if (ok) {
        n.backend = static_cast<int32_t>(b);
        break;
      }
    }
    if (n.backend < 0) {
      return unsupported("no backend can run node {} ({} '{}', {}, layer {})", i, graph::op_name(n.op), n.name,
                         dtype_name(n.type), n.layer);
    }
  }
  return {};
}

Status Scheduler::assign(Graph& graph) const {
  MINFER_RETURN_IF_ERROR(assign_ops(graph));
  // A weight runs where its readers run; each reader's backend must hold it (the engine registers it there).
  for (size_t i = 0; i < graph.size(); ++i) {
    const Node& n = graph.nodes[i];
    for (NodeId s : n.src) {
      Node& w = graph.nodes[static_cast<size_t>(s)];
      if (w.op != OpKind::kWeight) continue;
      if (w.backend >= 0 && w.backend != n.backend) {
        return unsupported("weight '{}' is read on {} (node {}) and on {}: a weight has one backend", w.name,
                           backends_[static_cast<size_t>(n.backend)]->name(), i,
                           backends_[static_cast<size_t>(w.backend)]->name());
      }
      if (backends_[static_cast<size_t>(n.backend)]->weight_handle(w.name) == nullptr) {
        return unsupported("node {} ({} '{}') runs on {}, which does not hold weight '{}'", i, graph::op_name(n.op),
                           n.name, backends_[static_cast<size_t>(n.backend)]->name(), w.name);
      }
      w.backend = n.backend;
    }
  }
  for (size_t i = 0; i < graph.size(); ++i) {  // unread weights (fusion orphans): any holder
    Node& w = graph.nodes[i];
    for (size_t b = 0; w.backend < 0 && b < backends_.size(); ++b) {
      if (backends_[b]->weight_handle(w.name) != nullptr) w.backend = static_cast<int32_t>(b);
    }
    if (w.backend < 0) return unsupported("no backend holds weight '{}' (node {})", w.name, i);
  }
  return {};
}

Status Scheduler::allocate(Plan& plan) {
  Graph& g = plan.graph;
  const std::vector<int> last = graph::last_uses(g);
  const std::vector<int> consumers = graph::consumer_counts(g);
  plan.data.assign(g.size(), nullptr);
  std::vector<size_t> offset(g.size(), 0);
  std::vector<int> owner(g.size(), -1);       // node whose allocation holds a node's data
  std::vector<int> alloc_last(g.size(), -1);  // last reader of an allocation, extended by aliases
  std::vector<size_t> live;                   // allocations not yet released
  std::vector<OffsetAllocator> allocators;
  for (const backend::Backend* b : backends_) allocators.emplace_back(b->buffer_alignment());
  auto bytes_of = [&](size_t i) { return static_cast<size_t>(g.nodes[i].n_elements()) * sizeof(float); };

  for (size_t i = 0; i < g.size(); ++i) {
    const Node& n = g.nodes[i];
    if (consumers[i] == 0 && n.op != OpKind::kKvStore) continue;  // dead (fusion orphan)
    plan.order.push_back(static_cast<NodeId>(i));
    if (n.op == OpKind::kReshape) {
      const int o = owner[static_cast<size_t>(graph::storage_root(g, static_cast<NodeId>(i)))];
      owner[i] = o;
      if (o >= 0) alloc_last[static_cast<size_t>(o)] = std::max(alloc_last[static_cast<size_t>(o)], last[i]);
    } else if (needs_buffer(n)) {
      // In place: the first source's storage has this node as its last reader and the same backend and size.
      int alias = -1;
      if (can_run_in_place(n.op)) {
        const NodeId root = graph::storage_root(g, n.src[0]);
        const int o = owner[static_cast<size_t>(root)];
        if (o >= 0 && alloc_last[static_cast<size_t>(o)] == static_cast<int>(i) &&
            g.nodes[static_cast<size_t>(o)].backend == n.backend && bytes_of(static_cast<size_t>(o)) == bytes_of(i)) {
          alias = o;
        }
      }
      if (alias >= 0) {
        owner[i] = alias;
        alloc_last[static_cast<size_t>(alias)] = last[i];
      } else {
        offset[i] = allocators[static_cast<size_t>(n.backend)].alloc(bytes_of(i));
        owner[i] = static_cast<int>(i);
        alloc_last[i] = last[i];
        live.push_back(i);
      }
    }
    // Allocations whose last reader was this node are free for the nodes after it.
    for (size_t k = 0; k < live.size();) {
      const size_t o = live[k];
      if (alloc_last[o] <= static_cast<int>(i)) {
        allocators[static_cast<size_t>(g.nodes[o].backend)].release(offset[o], bytes_of(o));
        live[k] = live.back();
        live.pop_back();
      } else {
        ++k;
      }
    }
  }

  plan.arena_bytes.assign(backends_.size(), 0);
  plan.arenas.resize(backends_.size());
  for (size_t b = 0; b < backends_.size(); ++b) {
    plan.arena_bytes[b] = allocators[b].peak();
    if (plan.arena_bytes[b] > 0) {
      // Out of (device) memory names what the buffer was for and its bytes.
      auto arena = backends_[b]->alloc_buffer(plan.arena_bytes[b]);
      if (!arena.ok()) {
        return arena.status().with_context(fmt::format("activations of the {}-token plan on {}: {} bytes: ",
                                                       plan.params.n_tokens, backends_[b]->name(),
                                                       plan.arena_bytes[b]));
      }
      plan.arenas[b] = std::move(*arena);
    }
  }
  for (size_t i = 0; i < g.size(); ++i) {
    const Node& n = g.nodes[i];
    if (n.op == OpKind::kWeight) {
      plan.data[i] = const_cast<void*>(backends_[static_cast<size_t>(n.backend)]->weight_handle(n.name));
    } else if (owner[i] >= 0) {
      const auto o = static_cast<size_t>(owner[i]);
      plan.data[i] = static_cast<uint8_t*>(plan.arenas[static_cast<size_t>(g.nodes[o].backend)]->base()) + offset[o];
    }
  }

  // Splits: maximal runs of executed nodes on one backend.
  for (size_t k = 0; k < plan.order.size(); ++k) {
    const int32_t b = g.node(plan.order[k]).backend;
    if (plan.splits.empty() || plan.splits.back().backend != b) {
      Split split;
      split.backend = b;
      split.begin = k;
      plan.splits.push_back(std::move(split));
    }
    plan.splits.back().end = k + 1;
  }
  // Cross-backend reads meet at split boundaries: a host split stages each device tensor it reads (once
  // per split) into host memory before it runs; a device split reads host tensors itself. Only the
  // tensors that cross are copied. Two devices reading each other have no copy path yet.
  auto storage_backend = [&](NodeId s) { return g.node(graph::storage_root(g, s)).backend; };
  size_t split_peak = 0;
  const size_t align = 64;
  auto round_up = [&](size_t v) { return (v + align - 1) / align * align; };
  for (Split& split : plan.splits) {
    const backend::Backend& to = *backends_[static_cast<size_t>(split.backend)];
    size_t used = 0;
    for (size_t k = split.begin; k < split.end; ++k) {
      const NodeId id = plan.order[k];
      const Node& n = g.node(id);
      if (n.op == OpKind::kReshape) continue;  // a view; its reader stages what it reads
      for (NodeId s : n.src) {
        const Node& root = g.node(graph::storage_root(g, s));
        if (root.op == OpKind::kWeight || root.op == OpKind::kInput || root.op == OpKind::kKvStore) continue;
        const int32_t from = storage_backend(s);
        if (from == split.backend || backends_[static_cast<size_t>(from)]->host_memory()) continue;
        if (!to.host_memory()) {
          return unsupported("node {} ({}) on {} reads node {} on {}: no copy path between two devices", id,
                             graph::op_name(n.op), to.name(), s, backends_[static_cast<size_t>(from)]->name());
        }
        const bool seen = std::any_of(split.inputs.begin(), split.inputs.end(),
                                      [&](const Staged& st) { return st.node == s; });
        if (seen) continue;
        const size_t bytes = static_cast<size_t>(g.node(s).n_elements()) * sizeof(float);
        split.inputs.push_back({s, from, used, bytes});
        used += round_up(bytes);
      }
    }
    split_peak = std::max(split_peak, used);
  }
  size_t staging_bytes = split_peak;
  for (NodeId o : g.outputs) {
    const int32_t from = storage_backend(o);
    if (backends_[static_cast<size_t>(from)]->host_memory()) continue;
    const size_t bytes = static_cast<size_t>(g.node(o).n_elements()) * sizeof(float);
    plan.outputs.push_back({o, from, staging_bytes, bytes});
    staging_bytes += round_up(bytes);
  }
  if (staging_bytes > 0) {
    backend::Backend* host = nullptr;
    for (backend::Backend* b : backends_) {
      if (b->host_memory() && host == nullptr) host = b;
    }
    if (host == nullptr) return unsupported("device tensors cross to the host but no host backend is present");
    MINFER_ASSIGN_OR_RETURN(plan.staging, host->alloc_buffer(staging_bytes));
  }
  return {};
}

size_t Plan::n_crossings() const {
  size_t n = outputs.size();
  for (const Split& s : splits) n += s.inputs.size();
  return n;
}

Status Scheduler::stage_inputs(Plan& plan, const Split& split) {
  auto* base = plan.staging ? static_cast<uint8_t*>(plan.staging->base()) : nullptr;
  for (const Staged& st : split.inputs) {
    backend::Backend& from = *backends_[static_cast<size_t>(st.from)];
    Status s = from.download(base + st.offset, plan.data[static_cast<size_t>(st.node)], st.bytes);
    if (!s.ok()) {
      return s.with_context(fmt::format("{}: copying node {} ('{}') to {}: ", from.name(), st.node,
                                        plan.graph.node(st.node).name,
                                        backends_[static_cast<size_t>(split.backend)]->name()));
    }
  }
  return {};
}

std::span<void* const> Scheduler::split_data(Plan& plan, const Split& split) {
  if (split.inputs.empty()) return plan.data;
  split_data_ = plan.data;
  auto* base = static_cast<uint8_t*>(plan.staging->base());
  for (const Staged& st : split.inputs) split_data_[static_cast<size_t>(st.node)] = base + st.offset;
  return split_data_;
}

Status Scheduler::download_outputs(Plan& plan) {
  for (const Staged& st : plan.outputs) {
    backend::Backend& from = *backends_[static_cast<size_t>(st.from)];
    Status s = from.download(static_cast<uint8_t*>(plan.staging->base()) + st.offset,
                             plan.data[static_cast<size_t>(st.node)], st.bytes);
    if (!s.ok()) return s.with_context(fmt::format("{}: reading output node {}: ", from.name(), st.node));
  }
  return {};
}

Result<std::unique_ptr<Plan>> Scheduler::prepare(Graph graph, const GraphParams& params) {
  auto plan = std::make_unique<Plan>();
  plan->params = params;
  plan->graph = std::move(graph);
  MINFER_RETURN_IF_ERROR(assign(plan->graph));
  plan->fuse_stats = graph::fuse(plan->graph, [&](int32_t b, OpKind op) {
    return backends_[static_cast<size_t>(b)]->supports_fused(op);
  });
  MINFER_RETURN_IF_ERROR(allocate(*plan));
  return plan;
}

Result<Plan*> Scheduler::plan(const GraphParams& params, const Builder& build) {
  auto it = plans_.find(params);
  if (it != plans_.end()) return it->second.get();
  MINFER_ASSIGN_OR_RETURN(Graph graph, build(params));
  MINFER_ASSIGN_OR_RETURN(auto plan, prepare(std::move(graph), params));
  ++n_builds_;
  if (plans_.size() >= max_plans_ && !plan_order_.empty()) {
    plans_.erase(plan_order_.front());
    plan_order_.erase(plan_order_.begin());
  }
  plan_order_.push_back(params);
  Plan* raw = plan.get();
  plans_[params] = std::move(plan);
  return raw;
}

namespace {

// "split 3 of 7 (nodes 40 'blk.1.attn_norm' .. 71 'blk.1.ffn_out'): ", so a device error names where it struck.
std::string split_context(const Plan& plan, size_t index) {
  const Split& split = plan.splits[index];
  const graph::NodeId first = plan.order[split.begin], last = plan.order[split.end - 1];
  return fmt::format("split {} of {} (nodes {} '{}' .. {} '{}'): ", index + 1, plan.splits.size(), first,
                     plan.graph.node(first).name, last, plan.graph.node(last).name);
}

}  // namespace

Status Scheduler::execute(Plan& plan, const backend::BatchView& batch, std::span<const backend::KvLayerView> kv) {
  const Graph& g = plan.graph;
  if (static_cast<int64_t>(batch.tokens.size()) != plan.params.n_tokens ||
      static_cast<int64_t>(batch.output_rows.size()) != plan.params.n_outputs) {
    return invalid_argument("batch of {} tokens / {} outputs does not match the plan ({} / {})", batch.tokens.size(),
                            batch.output_rows.size(), plan.params.n_tokens, plan.params.n_outputs);
  }
  for (graph::NodeId id : plan.order) {
    const Node& n = g.node(id);
    if (n.op != OpKind::kInput) continue;
    std::span<const int32_t> src = n.params.input == graph::InputKind::kTokens      ? batch.tokens
                                   : n.params.input == graph::InputKind::kPositions ? batch.positions
                                                                                    : batch.output_rows;
    if (static_cast<int64_t>(src.size()) != n.ne[0]) {
      return invalid_argument("input '{}' has {} values, the graph expects {}", n.name, src.size(), n.ne[0]);
    }
    plan.data[static_cast<size_t>(id)] = const_cast<int32_t*>(src.data());
  }
  backend::ExecContext ctx;
  ctx.batch = &batch;
  ctx.kv = kv;
  ctx.pool = pool_;
  if (!observers_.empty()) return execute_observed(plan, ctx);
  for (size_t si = 0; si < plan.splits.size(); ++si) {
    const Split& split = plan.splits[si];
    backend::Backend& b = *backends_[static_cast<size_t>(split.backend)];
    if (Status st = stage_inputs(plan, split); !st.ok()) return st.with_context(split_context(plan, si));
    const std::span<void* const> data = split_data(plan, split);
    for (size_t k = split.begin; k < split.end; ++k) {
      const graph::NodeId id = plan.order[k];
      const auto t0 = op_timing_ ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point();
      Status st = b.execute(g, id, data, ctx);
      if (!st.ok()) return st.with_context(fmt::format("{}: {}", b.name(), split_context(plan, si)));
      if (op_timing_) {
        OpTime& t = op_times_[std::string(graph::op_name(g.node(id).op))];
        t.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        ++t.calls;
      }
    }
    // A failed submit or a lost device: the whole split's recorded work, no single node, is what failed.
    if (Status st = b.synchronize(); !st.ok())
      return st.with_context(fmt::format("{}: {}", b.name(), split_context(plan, si)));
  }
  return download_outputs(plan);
}

// The same loop with a synchronize and the observers after every node, so each observer reads a node's
// output before a later node (in place, or reusing the freed range) overwrites it. Kept apart so the
// unobserved loop stays as it was.
Status Scheduler::execute_observed(Plan& plan, const backend::ExecContext& ctx) {
  const Graph& g = plan.graph;
  auto now_ns = [] {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  };
  for (NodeObserver* o : observers_) o->begin_step(plan);
  for (size_t si = 0; si < plan.splits.size(); ++si) {
    const Split& split = plan.splits[si];
    backend::Backend& b = *backends_[static_cast<size_t>(split.backend)];
    const backend::Buffer* arena = plan.arenas[static_cast<size_t>(split.backend)].get();
    const bool host = arena == nullptr || arena->host_visible();
    if (Status st = stage_inputs(plan, split); !st.ok()) {
      for (NodeObserver* o : observers_) o->end_step(plan, false);
      return st.with_context(split_context(plan, si));
    }
    const std::span<void* const> data = split_data(plan, split);
    for (size_t k = split.begin; k < split.end; ++k) {
      NodeEvent ev;
      ev.id = plan.order[k];
      ev.order = k;
      const Node& n = g.node(ev.id);
      ev.t_begin_ns = now_ns();
      Status st = b.execute(g, ev.id, data, ctx);
      if (st.ok()) st = b.synchronize();
      ev.t_end_ns = now_ns();
      if (!st.ok()) {
        for (NodeObserver* o : observers_) o->end_step(plan, false);
        return st.with_context(fmt::format("{}: {}", b.name(), split_context(plan, si)));
      }
      if (op_timing_) {
        OpTime& t = op_times_[std::string(graph::op_name(n.op))];
        t.seconds += static_cast<double>(ev.t_end_ns - ev.t_begin_ns) * 1e-9;
        ++t.calls;
      }
      const bool has_data = n.op != OpKind::kKvStore && n.op != OpKind::kWeight;
      ev.data =
          has_data && (host || n.op == OpKind::kInput) ? plan.data[static_cast<size_t>(ev.id)] : nullptr;
      if (has_data && ev.data == nullptr && !b.host_memory()) {  // a device node: observers read a host copy
        observed_.resize(static_cast<size_t>(n.n_elements()));
        st = b.download(observed_.data(), plan.data[static_cast<size_t>(ev.id)], observed_.size() * sizeof(float));
        if (!st.ok()) {
          for (NodeObserver* o : observers_) o->end_step(plan, false);
          return st.with_context(fmt::format("{}: reading node {} for its observers: ", b.name(), ev.id));
        }
        ev.data = observed_.data();
      }
      for (NodeObserver* o : observers_) o->on_node(plan, ev);
    }
  }
  Status st = download_outputs(plan);
  for (NodeObserver* o : observers_) o->end_step(plan, st.ok());
  return st;
}

void Scheduler::add_observer(NodeObserver* observer) {
  if (std::find(observers_.begin(), observers_.end(), observer) == observers_.end())
    observers_.push_back(observer);
}

void Scheduler::remove_observer(NodeObserver* observer) {
  observers_.erase(std::remove(observers_.begin(), observers_.end(), observer), observers_.end());
}

const float* Scheduler::output_data(const Plan& plan, size_t i) const {
  const NodeId id = plan.graph.outputs[i];
  for (const Staged& st : plan.outputs) {  // a device output: its host copy
    if (st.node == id) return reinterpret_cast<const float*>(static_cast<const uint8_t*>(plan.staging->base()) + st.offset);
  }
  return static_cast<const float*>(plan.data[static_cast<size_t>(id)]);
}

}  // namespace minfer::sched
