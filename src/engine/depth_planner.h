// DepthPlanner: the adaptive draft depth of speculative decoding (--spec-draft-adaptive), shared by
// generate_speculative and the batcher's per-slot speculation.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdlib>

namespace minfer::engine {

inline constexpr int32_t kMaxDraftDepth = 8;

// Chooses each round's depth: maximises expected emitted tokens per millisecond, with per-position
// acceptance (given the previous position was accepted) and the costs of a draft token and of a verify
// batch of each size as running averages. Untried depths start optimistic, so the cap is tried first.
// Depth 0 (a plain decode step) wins when no depth pays for its drafting; while at 0, every
// kProbeEvery-th round drafts one token so the acceptance estimate follows the text.
class DepthPlanner {
 public:
  static constexpr int32_t kProbeEvery = 16;

  explicit DepthPlanner(int32_t cap) : cap_(std::clamp(cap, 1, kMaxDraftDepth)) {
    accept_.fill(0.9);
    verify_ms_.fill(0.0);
  }
  int32_t choose() {
    const double plain = verify_cost(1);
    if (draft_ms_ <= 0.0 || plain <= 0.0) return cap_;  // nothing measured yet
    int32_t best = 0;
    double best_rate = 1.0 / plain;
    double survive = 1.0, expected = 1.0;
    for (int32_t d = 1; d <= cap_; ++d) {
      survive *= accept_[static_cast<size_t>(d)];
      expected += survive;
      const double rate = expected / (d * draft_ms_ + verify_cost(d + 1));
      if (rate > best_rate) {
        best_rate = rate;
        best = d;
      }
    }
    if (best > 0) {
      idle_rounds_ = 0;
      return best;
    }
    if (++idle_rounds_ < kProbeEvery) return 0;
    idle_rounds_ = 0;
    return 1;
  }
  void record(int32_t drafted, int32_t accepted, double draft_ms, double verify_ms) {
    auto ewma = [](double& v, double x) { v = v <= 0.0 ? x : 0.8 * v + 0.2 * x; };
    if (drafted > 0) ewma(draft_ms_, draft_ms / drafted);
    ewma(verify_ms_[static_cast<size_t>(std::min(drafted + 1, kMaxDraftDepth + 1))], verify_ms);
    for (int32_t i = 1; i <= drafted; ++i) {
      const bool ok = i <= accepted;
      accept_[static_cast<size_t>(i)] = 0.9 * accept_[static_cast<size_t>(i)] + 0.1 * (ok ? 1.0 : 0.0);
      if (!ok) break;  // later positions were not tried
    }
  }

 private:
  // Cost of verifying n tokens: measured, else the nearest measured size scaled by 10% per token (a
  // conservative slope: measured ones range from ~5% on bandwidth-bound decode to ~20% on AVX2); 0 when
  // nothing is measured.
  double verify_cost(int32_t n) const {
    if (verify_ms_[static_cast<size_t>(n)] > 0.0) return verify_ms_[static_cast<size_t>(n)];
    int32_t nearest = 0;
    for (int32_t m = 1; m <= kMaxDraftDepth + 1; ++m) {
      if (verify_ms_[static_cast<size_t>(m)] > 0.0 &&
          (nearest == 0 || std::abs(m - n) < std::abs(nearest - n)))
        nearest = m;
    }
    if (nearest == 0) return 0.0;
    return verify_ms_[static_cast<size_t>(nearest)] * (1.0 + 0.1 * (n - 1)) / (1.0 + 0.1 * (nearest - 1));
  }

  int32_t cap_;
  std::array<double, kMaxDraftDepth + 2> accept_{};
  std::array<double, kMaxDraftDepth + 2> verify_ms_{};
  double draft_ms_ = 0.0;
  int32_t idle_rounds_ = 0;
};

}  // namespace minfer::engine
