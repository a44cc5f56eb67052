// Candidate list helpers: fill, sort, softmax, argmax and the inverse-CDF draw.
#include "sampling/samplers/candidates.h"

#include <algorithm>
#include <cmath>

namespace minfer::sampling {

void Candidates::assign(std::span<const float> logits) {
  data.resize(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) data[i] = TokenData{static_cast<int32_t>(i), logits[i], 0.0f};
  sorted = false;
}

void sort_desc(Candidates& c) {
  if (c.sorted) return;
  std::stable_sort(c.data.begin(), c.data.end(), logit_desc);  // merge sort: faster here than introsort
  c.sorted = true;
}

void softmax(Candidates& c, bool do_sort) {
  if (c.data.empty()) return;
  if (do_sort) sort_desc(c);
  float max_l = c.data[0].logit;
  if (!c.sorted) {
    for (const TokenData& t : c.data) max_l = std::max(max_l, t.logit);
  }
  float sum = 0.0f;
  for (TokenData& t : c.data) {
    t.p = std::exp(t.logit - max_l);
    sum += t.p;
  }
  for (TokenData& t : c.data) t.p /= sum;
}

size_t argmax_index(const Candidates& c) {
  size_t best = 0;
  for (size_t i = 1; i < c.data.size(); ++i) {
    if (c.data[i].logit > c.data[best].logit) best = i;
  }
  return best;
}

size_t draw_index(Candidates& c, Rng& rng) {
  if (c.data.size() <= 1) {
    if (!c.data.empty()) c.data[0].p = 1.0f;
    return 0;
  }
  float max_l = c.data[0].logit;
  if (!c.sorted) {
    for (const TokenData& t : c.data) max_l = std::max(max_l, t.logit);
  }
  double sum = 0.0;
  for (TokenData& t : c.data) {
    t.p = std::exp(t.logit - max_l);
    sum += t.p;
  }
  const double target = sum * rng.uniform();
  double run = 0.0;
  size_t chosen = c.data.size();
  for (size_t i = 0; i < c.data.size(); ++i) {
    if (chosen == c.data.size()) {
      run += c.data[i].p;
      // A zero-probability token (-inf logit) is never chosen even when the target is 0.
      if (run >= target && c.data[i].p > 0.0f) chosen = i;
    }
    c.data[i].p = static_cast<float>(c.data[i].p / sum);
  }
  if (chosen == c.data.size()) {
    // Rounding left the target past the sum: take the last token with non-zero probability.
    chosen = c.data.size() - 1;
    while (chosen > 0 && c.data[chosen].p <= 0.0f) --chosen;
  }
  return chosen;
}

}  // namespace minfer::sampling
