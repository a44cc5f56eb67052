#include "inspect/trace_observer.h"

#include <chrono>
#include <fstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "inspect/node_tensor.h"
#include "sched/scheduler.h"

namespace minfer::inspect {

TraceObserver::TraceObserver(std::string path, ThreadPool* pool)
    : path_(std::move(path)), pool_(pool), origin_ns_(lane_clock_ns()) {
  n_lanes_ = pool_ != nullptr ? pool_->n_threads() : 0;
  lanes_.resize(static_cast<size_t>(n_lanes_));
  for (auto& lane : lanes_) lane.reserve(64);
  if (pool_ != nullptr) pool_->set_lane_recorder(this);
}

TraceObserver::~TraceObserver() {
  if (pool_ != nullptr) pool_->set_lane_recorder(nullptr);
}

void TraceObserver::record(int ith, int64_t t_begin_ns, int64_t t_end_ns) {
  if (ith >= 0 && ith < n_lanes_) lanes_[static_cast<size_t>(ith)].emplace_back(t_begin_ns, t_end_ns);
}

void TraceObserver::begin_step(const sched::Plan& plan) {
  step_t0_ = lane_clock_ns();
  step_args_ = fmt::format(R"({{"step":{},"n_tokens":{},"n_outputs":{}}})", step_, plan.params.n_tokens,
                           plan.params.n_outputs);
  for (auto& lane : lanes_) lane.clear();  // pool work outside a step is not a node's
}

void TraceObserver::on_node(const sched::Plan& plan, const sched::NodeEvent& ev) {
  const graph::Node& n = plan.graph.node(ev.id);
  const std::string op(graph::op_name(n.op));
  nlohmann::json args = {{"op", op},
                         {"shape", numpy_shape(n.ne)},
                         {"dtype", std::string(dtype_name(n.type))},
                         {"layer", n.layer},
                         {"step", step_},
                         {"node", ev.id}};
  if (!n.fused_from.empty()) args["fused_from"] = n.fused_from;
  slices_.push_back({n.name, op, 0, ev.t_begin_ns, ev.t_end_ns, args.dump()});
  // The pool's threads have all finished this node's job when the scheduler calls us (run() joined them).
  for (int ith = 0; ith < n_lanes_; ++ith) {
    for (const auto& [t0, t1] : lanes_[static_cast<size_t>(ith)]) {
      slices_.push_back(
          {n.name, op, 1 + ith, t0, t1, fmt::format(R"({{"node":{},"step":{}}})", ev.id, step_)});
    }
    lanes_[static_cast<size_t>(ith)].clear();
  }
}

void TraceObserver::end_step(const sched::Plan& plan, bool ok) {
  (void)plan;
  slices_.push_back({fmt::format("step {}{}", step_, ok ? "" : " (failed)"), "step", 0, step_t0_,
                     lane_clock_ns(), step_args_});
  ++step_;
}

Status TraceObserver::write() const {
  nlohmann::json events = nlohmann::json::array();
  auto lane_name = [&](int tid, const std::string& name) {
    events.push_back(
        {{"ph", "M"}, {"pid", 1}, {"tid", tid}, {"name", "thread_name"}, {"args", {{"name", name}}}});
  };
  events.push_back(
      {{"ph", "M"}, {"pid", 1}, {"tid", 0}, {"name", "process_name"}, {"args", {{"name", "minfer"}}}});
  lane_name(0, "scheduler");
  for (int i = 0; i < n_lanes_; ++i) lane_name(1 + i, fmt::format("pool thread {}", i));
  for (const Slice& s : slices_) {
    nlohmann::json args = nlohmann::json::parse(s.args, nullptr, false);
    events.push_back({{"name", s.name},
                      {"cat", s.cat},
                      {"ph", "X"},
                      {"pid", 1},
                      {"tid", s.tid},
                      {"ts", static_cast<double>(s.t0 - origin_ns_) / 1000.0},
                      {"dur", static_cast<double>(s.t1 - s.t0) / 1000.0},
                      {"args", std::move(args)}});
  }
  std::ofstream out(path_, std::ios::binary | std::ios::trunc);
  out << nlohmann::json{{"displayTimeUnit", "ms"}, {"traceEvents", std::move(events)}}.dump() << '\n';
  if (!out) return io_error("MINFER_TRACE: cannot write '{}'", path_);
  return {};
}

}  // namespace minfer::inspect
