#include "inspect/tensor_stats.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace minfer::inspect {

TensorStats compute_stats(std::span<const float> values) {
  TensorStats s;
  s.count = static_cast<int64_t>(values.size());
  double sum = 0;
  int64_t n = 0;
  double lo = std::numeric_limits<double>::infinity(), hi = -lo;
  for (float v : values) {
    if (std::isnan(v)) {
      ++s.n_nan;
    } else if (std::isinf(v)) {
      ++s.n_inf;
    } else {
      sum += v;
      lo = std::min(lo, static_cast<double>(v));
      hi = std::max(hi, static_cast<double>(v));
      ++n;
    }
  }
  if (n == 0) return s;
  s.min = lo;
  s.max = hi;
  s.mean = sum / static_cast<double>(n);
  double sq = 0;  // second pass: the two-pass variance does not cancel catastrophically
  for (float v : values) {
    if (std::isfinite(v)) sq += (v - s.mean) * (v - s.mean);
  }
  s.std = std::sqrt(sq / static_cast<double>(n));
  return s;
}

std::vector<int64_t> histogram(std::span<const float> values, const TensorStats& stats, int n_bins) {
  std::vector<int64_t> bins(static_cast<size_t>(std::max(1, n_bins)), 0);
  const double width = (stats.max - stats.min) / static_cast<double>(bins.size());
  for (float v : values) {
    if (!std::isfinite(v)) continue;
    size_t b = width > 0 ? static_cast<size_t>((v - stats.min) / width) : 0;
    bins[std::min(b, bins.size() - 1)]++;
  }
  return bins;
}

Heatmap heatmap(std::span<const float> values, int64_t src_rows, int64_t src_cols, int64_t max_rows,
                int64_t max_cols) {
  Heatmap h;
  h.src_rows = src_rows;
  h.src_cols = src_cols;
  h.rows = std::min(src_rows, std::max<int64_t>(1, max_rows));
  h.cols = std::min(src_cols, std::max<int64_t>(1, max_cols));
  std::vector<double> sum(static_cast<size_t>(h.rows * h.cols), 0.0);
  std::vector<int64_t> n(sum.size(), 0);
  for (int64_t r = 0; r < src_rows; ++r) {
    const int64_t hr = r * h.rows / src_rows;
    for (int64_t c = 0; c < src_cols; ++c) {
      const float v = values[static_cast<size_t>(r * src_cols + c)];
      if (!std::isfinite(v)) continue;
      const auto k = static_cast<size_t>(hr * h.cols + c * h.cols / src_cols);
      sum[k] += v;
      n[k]++;
    }
  }
  h.cells.resize(sum.size());
  for (size_t k = 0; k < sum.size(); ++k) {
    h.cells[k] = n[k] ? static_cast<float>(sum[k] / static_cast<double>(n[k]))
                      : std::numeric_limits<float>::quiet_NaN();
  }
  return h;
}

nlohmann::ordered_json to_json(const TensorStats& s) {
  return {{"count", s.count}, {"min", s.min},   {"max", s.max},  {"mean", s.mean},
          {"std", s.std},     {"nan", s.n_nan}, {"inf", s.n_inf}};
}

TensorStats stats_from_json(const nlohmann::json& j) {
  TensorStats s;
  s.count = j.value("count", int64_t{0});
  s.min = j.value("min", 0.0);
  s.max = j.value("max", 0.0);
  s.mean = j.value("mean", 0.0);
  s.std = j.value("std", 0.0);
  s.n_nan = j.value("nan", int64_t{0});
  s.n_inf = j.value("inf", int64_t{0});
  return s;
}

}  // namespace minfer::inspect
