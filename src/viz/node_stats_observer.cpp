#include "viz/node_stats_observer.h"

#include "inspect/node_tensor.h"
#include "sched/scheduler.h"

namespace minfer::viz {

void NodeStatsObserver::begin_step(const sched::Plan& plan) {
  (void)plan;
  times_.clear();
}

void NodeStatsObserver::on_node(const sched::Plan& plan, const sched::NodeEvent& ev) {
  const graph::Node& n = plan.graph.node(ev.id);
  const double us = static_cast<double>(ev.t_end_ns - ev.t_begin_ns) / 1000.0;
  times_.emplace_back(ev.id, us);
  const std::span<const float> values = inspect::node_values(n, ev.data, &scratch_);
  if (values.empty()) return;
  NodeSnapshot s;  // computed outside the lock: HTTP readers wait only for the swap
  s.n_tokens = plan.params.n_tokens;
  s.shape = inspect::numpy_shape(n.ne);
  s.stats = inspect::compute_stats(values);
  s.histogram = inspect::histogram(values, s.stats, kHistogramBins);
  const int64_t cols = n.ne[0];
  s.heatmap = inspect::heatmap(values, n.n_elements() / cols, cols, kHeatmapRows, kHeatmapCols);
  s.micros = us;
  std::lock_guard<std::mutex> lock(mu_);
  s.step = step_;
  nodes_[ev.id] = std::move(s);
}

void NodeStatsObserver::end_step(const sched::Plan& plan, bool ok) {
  (void)plan;
  (void)ok;
  std::lock_guard<std::mutex> lock(mu_);
  last_times_ = times_;
  ++step_;
}

std::optional<NodeSnapshot> NodeStatsObserver::snapshot(graph::NodeId id) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = nodes_.find(id);
  if (it == nodes_.end()) return std::nullopt;
  return it->second;
}

std::vector<std::pair<graph::NodeId, double>> NodeStatsObserver::last_step_times() const {
  std::lock_guard<std::mutex> lock(mu_);
  return last_times_;
}

int64_t NodeStatsObserver::steps() const {
  std::lock_guard<std::mutex> lock(mu_);
  return step_;
}

}  // namespace minfer::viz
