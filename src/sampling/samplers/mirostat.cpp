// Mirostat v1 and v2 (llama.cpp semantics): truncate by the current mu, draw, then move mu toward tau.
#include <algorithm>
#include <cmath>

#include "sampling/samplers/samplers.h"

namespace minfer::sampling {

Mirostat::Mirostat(int version, float tau, float eta, int32_t m, int32_t n_vocab)
    : version_(version), tau_(tau), eta_(eta), m_(m), n_vocab_(n_vocab), mu_(2.0f * tau) {}

namespace {

// Inverse-CDF draw over the already normalised p (llama.cpp uses std::discrete_distribution here).
size_t draw_from_p(const Candidates& c, Rng& rng) {
  double sum = 0.0;
  for (const TokenData& t : c.data) sum += t.p;
  const double target = sum * rng.uniform();
  double run = 0.0;
  for (size_t i = 0; i < c.size(); ++i) {
    run += c.data[i].p;
    if (run > target && c.data[i].p > 0.0f) return i;
  }
  return 0;
}

}  // namespace

size_t Mirostat::sample(Candidates& c, Rng& rng) {
  softmax(c, true);
  if (version_ == 1) {
    // Estimate the Zipf exponent s_hat from the top m probabilities.
    float sum_ti_bi = 0.0f;
    float sum_ti_sq = 0.0f;
    for (size_t i = 0; i + 1 < static_cast<size_t>(m_) && i + 1 < c.size(); ++i) {
      const float t_i = std::log(static_cast<float>(i + 2) / static_cast<float>(i + 1));
      const float b_i = std::log(c.data[i].p / c.data[i + 1].p);
      sum_ti_bi += t_i * b_i;
      sum_ti_sq += t_i * t_i;
    }
    const float s_hat = sum_ti_bi / sum_ti_sq;
    const float epsilon_hat = s_hat - 1.0f;
    const float k = std::pow(
        (epsilon_hat * std::pow(2.0f, mu_)) / (1.0f - std::pow(static_cast<float>(n_vocab_), -epsilon_hat)),
        1.0f / s_hat);
    // NaN or huge k (flat distributions) keep everything; llama.cpp's int(k) is undefined there.
    int32_t ki = 1;
    if (std::isfinite(k) && k >= 1.0f)
      ki = k >= static_cast<float>(c.size()) ? static_cast<int32_t>(c.size()) : static_cast<int32_t>(k);
    else if (!std::isfinite(k) && !(k < 0.0f))
      ki = static_cast<int32_t>(c.size());
    top_k(c, std::max(ki, 1));
  } else {
    size_t keep = 0;
    while (keep < c.size() && !(-std::log2(c.data[keep].p) > mu_)) ++keep;
    c.data.resize(std::max<size_t>(keep, 1));
  }
  softmax(c, true);
  const size_t idx = draw_from_p(c, rng);
  const float surprise = -std::log2(c.data[idx].p);
  mu_ = mu_ - eta_ * (surprise - tau_);
  return idx;
}

}  // namespace minfer::sampling
