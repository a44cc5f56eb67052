// Rotary position embedding as llama.cpp computes it (ggml_rope_cache_init + rope_yarn without YaRN):
// theta_i = freq_scale * (pos * base^(-2i/n_rot) / freq_factor_i), the power built by repeated multiplication
// in f32; NEOX pairing (dimension i rotates with i + n_rot/2, Qwen) or normal pairing (2i with 2i + 1, llama).
#include <cmath>

#include "backend/cpu/ops/ops.h"

namespace minfer::backend::cpu {

void rope_token(const float* x, int64_t head_dim, int64_t n_head, int32_t pos, const RopeSpec& spec, float* y) {
  const float theta_scale = std::pow(spec.freq_base, -2.0f / static_cast<float>(spec.n_rot));
  const int64_t half = spec.n_rot / 2;
  float cos_cache[kMaxRopeDims / 2], sin_cache[kMaxRopeDims / 2];  // no allocation per call
  float theta = static_cast<float>(pos);
  for (int64_t i = 0; i < half; ++i) {
    const float ff = spec.freq_factors != nullptr ? spec.freq_factors[i] : 1.0f;
    const float t = spec.freq_scale * (theta / ff);
    cos_cache[i] = std::cos(t);
    sin_cache[i] = std::sin(t);
    theta *= theta_scale;
  }
  for (int64_t h = 0; h < n_head; ++h) {
    const float* xh = x + h * head_dim;
    float* yh = y + h * head_dim;
    if (spec.neox) {
      for (int64_t i = 0; i < half; ++i) {
        const float c = cos_cache[i], s = sin_cache[i];
        const float x0 = xh[i], x1 = xh[i + half];
        yh[i] = x0 * c - x1 * s;
        yh[i + half] = x0 * s + x1 * c;
      }
    } else {
      for (int64_t i = 0; i < half; ++i) {
        const float c = cos_cache[i], s = sin_cache[i];
        const float x0 = xh[2 * i], x1 = xh[2 * i + 1];
        yh[2 * i] = x0 * c - x1 * s;
        yh[2 * i + 1] = x0 * s + x1 * c;
      }
    }
    for (int64_t i = spec.n_rot; i < head_dim; ++i) yh[i] = xh[i];
  }
}

void rope(const float* x, int64_t head_dim, int64_t n_head, int64_t n_tokens, const int32_t* positions,
          const RopeSpec& spec, float* y, ThreadPool& pool) {
  pool.run([&](int ith, int nth) {
    int64_t t0, t1;
    split_range(n_tokens, ith, nth, &t0, &t1);
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t off = t * n_head * head_dim;
      rope_token(x + off, head_dim, n_head, positions[t], spec, y + off);
    }
  });
}

}  // namespace minfer::backend::cpu
