// Stateless stages: logit bias, top-k, top-p, min-p, typical, XTC and temperature (llama.cpp semantics).
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <numeric>

#include "sampling/samplers/samplers.h"

namespace minfer::sampling {

void apply_logit_bias(std::span<float> logits, const std::vector<LogitBias>& bias) {
  for (const LogitBias& b : bias) logits[static_cast<size_t>(b.token)] += b.bias;
}

void top_k(Candidates& c, int32_t k) {
  if (k <= 0) return;
  const size_t keep = std::min(static_cast<size_t>(k), c.size());
  if (!c.sorted) {
    std::partial_sort(c.data.begin(), c.data.begin() + static_cast<ptrdiff_t>(keep), c.data.end(),
                      logit_desc);
    c.sorted = true;
  }
  c.data.resize(keep);
}

void top_p(Candidates& c, float p, size_t min_keep) {
  if (p >= 1.0f || c.data.empty()) return;
  if (!c.sorted && c.size() > 1024) {
    // Like llama.cpp: the nucleus is usually small, so sort only the head first; the same order and
    // the same float sums as the full path, so the result is identical.
    softmax(c, false);
    const size_t head = 256;
    std::partial_sort(c.data.begin(), c.data.begin() + static_cast<ptrdiff_t>(head), c.data.end(),
                      logit_desc);
    float cum = 0.0f;
    for (size_t i = 0; i < head; ++i) {
      cum += c.data[i].p;
      if (cum >= p && i + 1 >= min_keep) {
        c.data.resize(i + 1);
        c.sorted = true;
        return;
      }
    }
  }
  softmax(c, true);
  float cum = 0.0f;
  size_t last = c.size();
  for (size_t i = 0; i < c.size(); ++i) {
    cum += c.data[i].p;
    if (cum >= p && i + 1 >= min_keep) {
      last = i + 1;
      break;
    }
  }
  c.data.resize(last);
}

void min_p(Candidates& c, float p, size_t min_keep) {
  if (p <= 0.0f || c.data.empty()) return;
  float max_logit = -FLT_MAX;
  for (const TokenData& t : c.data) max_logit = std::max(max_logit, t.logit);
  const float min_logit = max_logit + std::log(p);  // p_i >= p * p_max  <=>  logit_i >= max + log p
  size_t n_pass = 0;
  for (const TokenData& t : c.data) n_pass += t.logit >= min_logit ? 1 : 0;
  if (n_pass >= std::max<size_t>(min_keep, 1)) {
    // Filter in place, keeping the current order (and therefore `sorted`).
    size_t w = 0;
    for (size_t i = 0; i < c.size(); ++i) {
      if (c.data[i].logit >= min_logit) c.data[w++] = c.data[i];
    }
    c.data.resize(w);
    return;
  }
  sort_desc(c);
  size_t i = 1;
  for (; i < c.size(); ++i) {
    if (c.data[i].logit < min_logit && i >= min_keep) break;
  }
  c.data.resize(i);
}

void typical(Candidates& c, float p, size_t min_keep) {
  if (p >= 1.0f || c.data.empty()) return;
  softmax(c, true);
  float entropy = 0.0f;
  for (const TokenData& t : c.data) {
    if (t.p > 0.0f) entropy += -t.p * std::log(t.p);
  }
  std::vector<float> shifted(c.size());
  for (size_t i = 0; i < c.size(); ++i) shifted[i] = std::fabs(-std::log(c.data[i].p) - entropy);
  std::vector<size_t> order(c.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return shifted[a] < shifted[b]; });
  float cum = 0.0f;
  size_t last = order.size();
  for (size_t i = 0; i < order.size(); ++i) {
    cum += c.data[order[i]].p;
    if (cum > p && (min_keep == 0 || i >= min_keep - 1)) {
      last = i + 1;
      break;
    }
  }
  std::vector<TokenData> kept(last);
  for (size_t i = 0; i < last; ++i) kept[i] = c.data[order[i]];
  c.data = std::move(kept);
  c.sorted = false;
}

void xtc(Candidates& c, float probability, float threshold, size_t min_keep, Rng& rng) {
  if (probability <= 0.0f || threshold > 0.5f || c.size() < 2) return;
  const float chance = static_cast<float>(rng.uniform());
  if (chance > probability) return;
  softmax(c, true);
  size_t pos_last = 0;
  for (size_t i = 0; i < c.size(); ++i) {
    if (c.data[i].p >= threshold) {
      pos_last = i;
    } else {
      break;
    }
  }
  if (c.size() - pos_last >= min_keep && pos_last > 0) {
    c.data.erase(c.data.begin(), c.data.begin() + static_cast<ptrdiff_t>(pos_last));
  }
}

void temperature(Candidates& c, float temp) {
  if (c.data.empty()) return;
  if (temp <= 0.0f) {
    const size_t best = argmax_index(c);
    for (size_t i = 0; i < c.size(); ++i) {
      if (i != best) c.data[i].logit = -INFINITY;
    }
    return;
  }
  for (TokenData& t : c.data) t.logit /= temp;
}

}  // namespace minfer::sampling
