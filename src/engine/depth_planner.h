// DepthPlanner: the adaptive draft depth of speculative decoding (--spec-draft-adaptive), shared by
// generate_speculative and the batcher's per-slot speculation.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <utility>

namespace minfer::engine {

inline constexpr int32_t kMaxDraftDepth = 8;

// Chooses each round's depth: maximises expected emitted tokens per millisecond, with per-position
// acceptance (given the previous position was accepted) and the costs of a draft token and of a verify
// batch of each size as running averages. The first round drafts a little (kFirstDepth) and the second is a
// plain step, so both ends of the verify cost are measured before any deeper round is paid for; an untried
// position is expected to do as the one before it, so deeper rounds are explored when the measured ones pay.
// Depth 0 (a plain decode step) wins when no depth pays for its drafting; while at 0, a round drafts one
// token now and then so the acceptance estimate follows the text: after kProbeEvery plain rounds, the
// interval doubling with each refused probe up to kProbeMax (a probe also pays for the draft catching up
// on the plain rounds' tokens) and back to kProbeEvery once one is accepted.
class DepthPlanner {
 public:
  static constexpr int32_t kProbeEvery = 16;
  static constexpr int32_t kProbeMax = 64;
  static constexpr int32_t kFirstDepth = 2;

  explicit DepthPlanner(int32_t cap) : cap_(std::clamp(cap, 1, kMaxDraftDepth)) {}

  int32_t choose() {
    if (draft_ms_ <= 0.0) return std::min(cap_, kFirstDepth);  // nothing drafted yet
    if (verify_ms_[1] <= 0.0) return 0;                        // a plain step measures C(1)
    int32_t best = 0;
    double best_rate = 1.0 / verify_ms_[1];
    double survive = 1.0, expected = 1.0;
    // P(accept position d | positions before it accepted): decayed counts plus one pseudo-round at
    // position d - 1's estimate (position 1: accepted), so an untried position is expected to do as the
    // one before it, and one refusal halves a fresh estimate.
    double accept = 1.0;
    for (int32_t d = 1; d <= cap_; ++d) {
      const auto& [hits, tries] = counts_[static_cast<size_t>(d)];
      accept = (hits + accept) / (tries + 1.0);
      survive *= accept;
      expected += survive;
      const double rate = expected / (d * draft_ms_ + verify_cost(d + 1));
      if (rate > best_rate) {
        best_rate = rate;
        best = d;
      }
    }
    if (best > 0) {
      idle_rounds_ = 0;
      probe_every_ = kProbeEvery;
      return best;
    }
    if (++idle_rounds_ < probe_every_) return 0;
    idle_rounds_ = 0;
    probing_ = true;
    return 1;
  }

  void record(int32_t drafted, int32_t accepted, double draft_ms, double verify_ms) {
    auto ewma = [](double& v, double x) { v = v <= 0.0 ? x : 0.8 * v + 0.2 * x; };
    // A draft after plain rounds also caught up on their tokens: not the steady cost of a draft token.
    if (drafted > 0 && !(draft_ms_ > 0.0 && plain_before_)) ewma(draft_ms_, draft_ms / drafted);
    plain_before_ = drafted == 0;
    if (probing_ && drafted > 0)
      probe_every_ = accepted > 0 ? kProbeEvery : std::min(2 * probe_every_, kProbeMax);
    probing_ = false;
    ewma(verify_ms_[static_cast<size_t>(std::min(drafted + 1, kMaxDraftDepth + 1))], verify_ms);
    for (int32_t i = 1; i <= drafted; ++i) {
      const bool ok = i <= accepted;
      auto& [hits, tries] = counts_[static_cast<size_t>(i)];
      hits = kForget * hits + (ok ? 1.0 : 0.0);
      tries = kForget * tries + 1.0;
      if (!ok) break;  // later positions were not tried
    }
  }

 private:
  static constexpr double kForget = 0.95;  // older rounds fade: the estimate follows the text (~20 rounds)

  // Cost of verifying n tokens; C(1) is measured before choose() asks. Measured; else linear between the
  // nearest measured sizes below and above n; past the largest, the slope of the two largest measured
  // (never falling: a noisy pair must not make deeper batches look free), or 10% of C(1) per token when
  // C(1) is the only one.
  double verify_cost(int32_t n) const {
    const auto at = [&](int32_t m) { return verify_ms_[static_cast<size_t>(m)]; };
    if (at(n) > 0.0) return at(n);
    int32_t lo = n - 1, hi = n + 1;
    while (at(lo) <= 0.0) --lo;  // stops at 1
    while (hi <= kMaxDraftDepth + 1 && at(hi) <= 0.0) ++hi;
    if (hi <= kMaxDraftDepth + 1) return at(lo) + (at(hi) - at(lo)) * (n - lo) / (hi - lo);
    int32_t below = lo - 1;
    while (below >= 1 && at(below) <= 0.0) --below;
    const double slope = below >= 1 ? std::max((at(lo) - at(below)) / (lo - below), 0.0) : 0.1 * at(lo);
    return at(lo) + slope * (n - lo);
  }

  int32_t cap_;
  std::array<std::pair<double, double>, kMaxDraftDepth + 2> counts_{};  // per position: (hits, tries)
  std::array<double, kMaxDraftDepth + 2> verify_ms_{};
  double draft_ms_ = 0.0;
  int32_t idle_rounds_ = 0;
  int32_t probe_every_ = kProbeEvery;
  bool probing_ = false;       // the round being recorded was a probe
  bool plain_before_ = false;  // the previous recorded round drafted nothing
};

}  // namespace minfer::engine
