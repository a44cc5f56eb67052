// Causal GQA attention over the KV cells, one (token, head) at a time. Each token reduces over exactly
// its own window (its sequence's cells up to its position, in position order), so a token's output is
// bitwise the same whether it is computed in a large prefill batch, a chunk, or a one-token decode step.
// K reads are fused with the cache type: f16 K is dotted with q rounded to f16 (as ggml does), q8_0 K
// with q quantized to q8_0 per head (an integer block dot, no dequantized window).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "backend/cpu/ops/ops.h"
#include "core/fp16.h"
#include "quant/quant.h"

namespace minfer::backend::cpu {
namespace {

constexpr int64_t kQ8Block = 32;
constexpr size_t kQ8BlockBytes = 34;  // f16 scale + 32 int8

// Dot of a q8_0-quantized q with a q8_0 K row segment of n elements (ggml_vec_dot_q8_0_q8_0 semantics:
// integer sums per block, scaled by the product of the two f16 scales, accumulated in f32).
float dot_q8_0(const uint8_t* a, const uint8_t* b, int64_t n) {
  float sum = 0.0f;
  for (int64_t blk = 0; blk < n / kQ8Block; ++blk) {
    const uint8_t* ab = a + blk * kQ8BlockBytes;
    const uint8_t* bb = b + blk * kQ8BlockBytes;
    uint16_t da, db;
    std::memcpy(&da, ab, 2);
    std::memcpy(&db, bb, 2);
    int32_t isum = 0;
    for (int i = 0; i < kQ8Block; ++i) {
      isum += static_cast<int32_t>(static_cast<int8_t>(ab[2 + i])) * static_cast<int8_t>(bb[2 + i]);
    }
    sum += static_cast<float>(isum) * (fp16_to_fp32(da) * fp16_to_fp32(db));
  }
  return sum;
}

void load_v(const KvLayerView& kv, int32_t cell, int64_t offset, int64_t n, float* out) {
  const auto* row = static_cast<const uint8_t*>(kv.v) + static_cast<size_t>(cell) * kv.row_bytes;
  switch (kv.type) {
    case DType::F32: std::memcpy(out, reinterpret_cast<const float*>(row) + offset, n * sizeof(float)); break;
    case DType::F16: {
      const auto* h = reinterpret_cast<const uint16_t*>(row) + offset;
      for (int64_t i = 0; i < n; ++i) out[i] = fp16_to_fp32(h[i]);
      break;
    }
    default:
      quant::dequantize_row(kv.type, row + (offset / kQ8Block) * kQ8BlockBytes, out, n);
      break;
  }
}

}  // namespace

void attention(const KvLayerView& kv, const BatchView& batch, const float* q, int32_t n_head, int32_t n_head_kv,
               int32_t head_dim, float scale, float* out, ThreadPool& pool) {
  const int64_t n_tokens = static_cast<int64_t>(batch.tokens.size());
  const int32_t group = n_head / n_head_kv;
  const int64_t tasks = n_tokens * n_head;
  pool.run([&](int ith, int nth) {
    int64_t i0, i1;
    split_range(tasks, ith, nth, &i0, &i1);
    thread_local std::vector<float> scores;
    thread_local std::vector<float> vrow;
    thread_local std::vector<uint8_t> qq;  // q in the K cache's format
    vrow.resize(static_cast<size_t>(head_dim));
    qq.resize(static_cast<size_t>(head_dim) * 4);
    for (int64_t task = i0; task < i1; ++task) {
      const int64_t t = task / n_head;
      const int32_t h = static_cast<int32_t>(task % n_head);
      const int32_t hk = h / group;
      const float* qh = q + task * head_dim;
      float* oh = out + task * head_dim;
      const int32_t w0 = batch.window_offsets[static_cast<size_t>(t)];
      const int32_t w1 = batch.window_offsets[static_cast<size_t>(t) + 1];
      const int64_t len = w1 - w0;
      scores.resize(static_cast<size_t>(std::max<int64_t>(len, 1)));
      const int64_t k_off = static_cast<int64_t>(hk) * head_dim;

      if (kv.type == DType::F16) {
        auto* qh16 = reinterpret_cast<uint16_t*>(qq.data());
        for (int32_t d = 0; d < head_dim; ++d) qh16[d] = fp32_to_fp16(qh[d]);
      } else if (kv.type == DType::Q8_0) {
        quant::quantize_row(DType::Q8_0, qh, qq.data(), head_dim);
      }
      float max_score = -INFINITY;
      for (int64_t j = 0; j < len; ++j) {
        const int32_t cell = batch.window_cells[static_cast<size_t>(w0 + j)];
        const auto* row = static_cast<const uint8_t*>(kv.k) + static_cast<size_t>(cell) * kv.row_bytes;
        float s = 0.0f;
        if (kv.type == DType::F32) {
          const float* kr = reinterpret_cast<const float*>(row) + k_off;
          for (int32_t d = 0; d < head_dim; ++d) s += qh[d] * kr[d];
        } else if (kv.type == DType::F16) {
          const auto* kr = reinterpret_cast<const uint16_t*>(row) + k_off;
          const auto* qh16 = reinterpret_cast<const uint16_t*>(qq.data());
          for (int32_t d = 0; d < head_dim; ++d) s += fp16_to_fp32(qh16[d]) * fp16_to_fp32(kr[d]);
        } else {
          s = dot_q8_0(qq.data(), row + (k_off / kQ8Block) * kQ8BlockBytes, head_dim);
        }
        s *= scale;
        scores[static_cast<size_t>(j)] = s;
        max_score = std::max(max_score, s);
      }
      double sum = 0.0;
      for (int64_t j = 0; j < len; ++j) {
        const float e = std::exp(scores[static_cast<size_t>(j)] - max_score);
        scores[static_cast<size_t>(j)] = e;
        sum += e;
      }
      const float inv = sum > 0.0 ? static_cast<float>(1.0 / sum) : 0.0f;
      std::fill(oh, oh + head_dim, 0.0f);
      for (int64_t j = 0; j < len; ++j) {
        const float p = scores[static_cast<size_t>(j)] * inv;
        load_v(kv, batch.window_cells[static_cast<size_t>(w0 + j)], k_off, head_dim, vrow.data());
        for (int32_t d = 0; d < head_dim; ++d) oh[d] += p * vrow[static_cast<size_t>(d)];
      }
    }
  });
}

}  // namespace minfer::backend::cpu
