// DepthPlanner: the adaptive draft depth of speculative decoding (--spec-draft-adaptive), shared by
// generate_speculative and the batcher's per-slot speculation.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>

namespace minfer::engine {

inline constexpr int32_t kMaxDraftDepth = 8;

// Chooses each round's depth: maximises expected emitted tokens per millisecond, with per-position
// acceptance (given the previous position was accepted) and the costs of a draft token and of a verify
// batch of each size as running averages. Untried depths start optimistic, so each gets measured.
class DepthPlanner {
 public:
  explicit DepthPlanner(int32_t cap) : cap_(std::clamp(cap, 1, kMaxDraftDepth)) {
    accept_.fill(0.9);
    verify_ms_.fill(0.0);
  }
  int32_t choose() const {
    if (draft_ms_ <= 0.0 || verify_ms_[1] <= 0.0) return cap_;
    int32_t best = 1;
    double best_rate = 0.0;
    double survive = 1.0, expected = 1.0;
    for (int32_t d = 1; d <= cap_; ++d) {
      survive *= accept_[static_cast<size_t>(d)];
      expected += survive;
      const double verify = verify_ms_[static_cast<size_t>(d + 1)] > 0.0
                                ? verify_ms_[static_cast<size_t>(d + 1)]
                                : verify_ms_[1] * (1.0 + 0.05 * d);
      const double rate = expected / (d * draft_ms_ + verify);
      if (rate > best_rate) {
        best_rate = rate;
        best = d;
      }
    }
    return best;
  }
  void record(int32_t drafted, int32_t accepted, double draft_ms, double verify_ms) {
    auto ewma = [](double& v, double x) { v = v <= 0.0 ? x : 0.8 * v + 0.2 * x; };
    if (drafted > 0) ewma(draft_ms_, draft_ms / drafted);
    ewma(verify_ms_[static_cast<size_t>(std::min(drafted + 1, kMaxDraftDepth + 1))], verify_ms);
    if (drafted == 0) ewma(verify_ms_[1], verify_ms);
    for (int32_t i = 1; i <= drafted; ++i) {
      const bool ok = i <= accepted;
      accept_[static_cast<size_t>(i)] = 0.9 * accept_[static_cast<size_t>(i)] + 0.1 * (ok ? 1.0 : 0.0);
      if (!ok) break;  // later positions were not tried
    }
  }

 private:
  int32_t cap_;
  std::array<double, kMaxDraftDepth + 2> accept_{};
  std::array<double, kMaxDraftDepth + 2> verify_ms_{};
  double draft_ms_ = 0.0;
};

}  // namespace minfer::engine
