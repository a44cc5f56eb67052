// The visualizer's observer: for the latest step, every node's statistics, histogram and downsampled
// heatmap, plus the step's per-node times. Written on the thread that runs the model, read by HTTP threads.
#pragma once

#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "inspect/tensor_stats.h"
#include "sched/observer.h"

namespace minfer::viz {

struct NodeSnapshot {
  int64_t step = 0;            // observer's step counter (one per scheduler execute)
  int32_t n_tokens = 0;        // of that step's plan
  std::vector<int64_t> shape;  // numpy order
  inspect::TensorStats stats;
  std::vector<int64_t> histogram;  // kHistogramBins over [stats.min, stats.max]
  inspect::Heatmap heatmap;        // rows = all dims but ne[0], cols = ne[0]
  double micros = 0;               // the node's execution time
};

class NodeStatsObserver : public sched::NodeObserver {
 public:
  static constexpr int kHistogramBins = 32;
  static constexpr int64_t kHeatmapRows = 64, kHeatmapCols = 128;

  void begin_step(const sched::Plan& plan) override;
  void on_node(const sched::Plan& plan, const sched::NodeEvent& event) override;
  void end_step(const sched::Plan& plan, bool ok) override;

  std::optional<NodeSnapshot> snapshot(graph::NodeId id) const;
  // (node id, microseconds) of the last finished step, in evaluation order.
  std::vector<std::pair<graph::NodeId, double>> last_step_times() const;
  int64_t steps() const;

 private:
  mutable std::mutex mu_;
  int64_t step_ = 0;
  std::map<graph::NodeId, NodeSnapshot> nodes_;
  std::vector<std::pair<graph::NodeId, double>> times_, last_times_;
  std::vector<float> scratch_;
};

}  // namespace minfer::viz
