// Summary statistics of one tensor's values for dumps and the visualizer: min / max / mean / std over the
// finite values, NaN and Inf counts, a histogram and a downsampled heatmap. Reads only; never changes data.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include <nlohmann/json.hpp>

namespace minfer::inspect {

struct TensorStats {
  int64_t count = 0;  // all values
  int64_t n_nan = 0;
  int64_t n_inf = 0;
  double min = 0, max = 0, mean = 0, std = 0;  // over the finite values (0 when there are none)
};

TensorStats compute_stats(std::span<const float> values);

// `n_bins` equal bins over [stats.min, stats.max] of the finite values (one bin when min == max).
std::vector<int64_t> histogram(std::span<const float> values, const TensorStats& stats, int n_bins);

// A rows x cols matrix (row-major, ne[0] = cols) averaged down to at most max_rows x max_cols cells.
// Cells hold the mean of their finite values (NaN when a cell has none).
struct Heatmap {
  int64_t rows = 0, cols = 0;  // cells
  int64_t src_rows = 0, src_cols = 0;
  std::vector<float> cells;  // rows * cols
};
Heatmap heatmap(std::span<const float> values, int64_t src_rows, int64_t src_cols, int64_t max_rows,
                int64_t max_cols);

nlohmann::ordered_json to_json(const TensorStats& stats);
// Same values, from JSON written by to_json (missing fields read as 0).
TensorStats stats_from_json(const nlohmann::json& j);

}  // namespace minfer::inspect
