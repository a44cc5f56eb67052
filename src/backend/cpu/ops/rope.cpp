// Rotary position embedding, NEOX pairing (dimension i rotates with i + n_rot/2), as llama.cpp computes it
// for Qwen: theta_i = pos * base^(-2i/n_rot), with the power built by repeated multiplication in f32.
#include <cmath>

#include "backend/cpu/ops/ops.h"

namespace minfer::backend::cpu {

void rope_neox_token(const float* x, int64_t head_dim, int64_t n_head, int32_t pos, int32_t n_rot, float freq_base,
                     float* y) {
  const float theta_scale = std::pow(freq_base, -2.0f / static_cast<float>(n_rot));
  const int64_t half = n_rot / 2;
  float cos_cache[kMaxRopeDims / 2], sin_cache[kMaxRopeDims / 2];  // no allocation per call
  float theta = static_cast<float>(pos);
  for (int64_t i = 0; i < half; ++i) {
    cos_cache[i] = std::cos(theta);
    sin_cache[i] = std::sin(theta);
    theta *= theta_scale;
  }
  for (int64_t h = 0; h < n_head; ++h) {
    const float* xh = x + h * head_dim;
    float* yh = y + h * head_dim;
    for (int64_t i = 0; i < half; ++i) {
      const float c = cos_cache[i], s = sin_cache[i];
      const float x0 = xh[i], x1 = xh[i + half];
      yh[i] = x0 * c - x1 * s;
      yh[i + half] = x0 * s + x1 * c;
    }
    for (int64_t i = n_rot; i < head_dim; ++i) yh[i] = xh[i];
  }
}

void rope_neox(const float* x, int64_t head_dim, int64_t n_head, int64_t n_tokens, const int32_t* positions,
               int32_t n_rot, float freq_base, float* y, ThreadPool& pool) {
  pool.run([&](int ith, int nth) {
    int64_t t0, t1;
    split_range(n_tokens, ith, nth, &t0, &t1);
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t off = t * n_head * head_dim;
      rope_neox_token(x + off, head_dim, n_head, positions[t], n_rot, freq_base, y + off);
    }
  });
}

}  // namespace minfer::backend::cpu
