// Mixture-of-experts CPU ops, as llama.cpp's build_moe_ffn computes them with softmax gating: the router's
// softmax and top-k (moe_route), the chosen experts' weights (moe_weights), the expert matmul (matmul_id,
// through quant::matmul_id) and the weighted sum of the experts' outputs (moe_sum). Each token's row is
// computed on its own, so results do not depend on the batch.
#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/cpu/ops/ops.h"
#include "quant/matmul_id.h"

namespace minfer::backend::cpu {
namespace {

// ggml's soft_max: exp(x - max) in f32, summed in double, scaled by the f32 reciprocal of the sum.
void softmax_row(const float* x, int64_t n, float* p) {
  float mx = -INFINITY;
  for (int64_t i = 0; i < n; ++i) mx = std::max(mx, x[i]);
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    p[i] = std::exp(x[i] - mx);
    sum += static_cast<double>(p[i]);
  }
  const auto scale = static_cast<float>(1.0 / sum);
  for (int64_t i = 0; i < n; ++i) p[i] *= scale;
}

template <typename Fn>
void per_token(int64_t n_tokens, ThreadPool& pool, Fn fn) {
  if (n_tokens == 1) {
    fn(0);
    return;
  }
  pool.run([&](int ith, int nth) {
    int64_t t0, t1;
    split_range(n_tokens, ith, nth, &t0, &t1);
    for (int64_t t = t0; t < t1; ++t) fn(t);
  });
}

}  // namespace

void moe_route(const float* logits, int64_t n_expert, int64_t n_tokens, int32_t n_used, int32_t* ids,
               ThreadPool& pool) {
  per_token(n_tokens, pool, [&](int64_t t) {
    thread_local std::vector<float> p;
    p.resize(static_cast<size_t>(n_expert));
    softmax_row(logits + t * n_expert, n_expert, p.data());
    int32_t* out = ids + t * n_used;
    // Selection by repeated scans (n_used is small): the largest remaining probability, lowest id on ties.
    for (int32_t s = 0; s < n_used; ++s) {
      int32_t best = -1;
      for (int64_t e = 0; e < n_expert; ++e) {
        bool taken = false;
        for (int32_t j = 0; j < s; ++j) taken = taken || out[j] == e;
        if (!taken && (best < 0 || p[static_cast<size_t>(e)] > p[static_cast<size_t>(best)])) {
          best = static_cast<int32_t>(e);
        }
      }
      out[s] = best;
    }
  });
}

void moe_weights(const float* logits, int64_t n_expert, const int32_t* ids, int64_t n_tokens, int32_t n_used,
                 bool norm_w, float* weights, ThreadPool& pool) {
  per_token(n_tokens, pool, [&](int64_t t) {
    thread_local std::vector<float> p;
    p.resize(static_cast<size_t>(n_expert));
    softmax_row(logits + t * n_expert, n_expert, p.data());
    float* w = weights + t * n_used;
    for (int32_t s = 0; s < n_used; ++s) w[s] = p[static_cast<size_t>(ids[t * n_used + s])];
    if (!norm_w) return;
    double sum = 0.0;  // ggml's sum_rows accumulates in double
    for (int32_t s = 0; s < n_used; ++s) sum += static_cast<double>(w[s]);
    // llama.cpp clamps the sum to the smallest normal f16 before dividing.
    const float div = std::max(static_cast<float>(sum), 6.103515625e-5f);
    for (int32_t s = 0; s < n_used; ++s) w[s] /= div;
  });
}

void moe_sum(const float* experts, const float* weights, int64_t d, int64_t n_used, int64_t n_tokens, float* y,
             ThreadPool& pool) {
  per_token(n_tokens, pool, [&](int64_t t) {
    const float* e = experts + t * n_used * d;
    const float* w = weights + t * n_used;
    float* yt = y + t * d;
    for (int64_t i = 0; i < d; ++i) yt[i] = e[i] * w[0];
    for (int64_t s = 1; s < n_used; ++s) {
      const float* es = e + s * d;
      for (int64_t i = 0; i < d; ++i) yt[i] = yt[i] + es[i] * w[s];
    }
  });
}

void matmul_id(const CpuWeight& w, const float* x, const int32_t* ids, int64_t n_tokens, int64_t n_used,
               bool x_per_slot, float* y, ThreadPool& pool) {
  thread_local quant::MatmulScratch scratch;
  quant::matmul_id(w.experts, x, ids, n_tokens, n_used, x_per_slot, y, pool, scratch);
}

}  // namespace minfer::backend::cpu
