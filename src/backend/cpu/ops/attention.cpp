// Causal GQA attention over the KV cells, one (token, head) at a time. Each token reduces over exactly
// its own window (its sequence's cells up to its position, in position order), so a token's output is
// bitwise the same whether it is computed in a large prefill batch, a chunk, or a one-token decode step.
// Scores use the kernel table's dot for the cache type (q rounded to f16 for an f16 cache, quantized to
// q8_0 for a q8_0 cache, as ggml does). With transposed V (f32 / f16 caches) each output element is one
// kernel dot of the probabilities (rounded to f16 for an f16 cache, as ggml's non-flash path does) with a
// contiguous run of V cells; a window whose cells are not contiguous is gathered first, which feeds the
// dot the same values in the same order. A q8_0 cache's V is read cell by cell, one head segment at a time.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <span>
#include <vector>

#include "backend/cpu/ops/ops.h"
#include "quant/kernels/kernels.h"
#include "quant/quant.h"

namespace minfer::backend::cpu {

void attention(const KvLayerView& kv, const BatchView& batch, const float* q, int32_t n_head, int32_t n_head_kv,
               int32_t head_dim, float scale, float* out, ThreadPool& pool) {
  const int64_t n_tokens = static_cast<int64_t>(batch.tokens.size());
  const int32_t group = n_head / n_head_kv;
  const kernels::TypeKernels& kt = kernels::cpu_kernels().of(kv.type);
  const DType q_type = kt.vec_dot_type;
  const size_t q_bytes = *row_bytes(q_type, head_dim);
  const size_t k_head_bytes = *row_bytes(kv.type, head_dim);

  const kernels::TypeKernels& vt = kernels::cpu_kernels().of(kv.type);
  const size_t v_elem = kv.type == DType::F32 ? 4 : 2;
  const int64_t tasks = n_tokens * n_head;
  pool.run([&](int ith, int nth) {
    thread_local std::vector<float> scores;
    thread_local std::vector<uint8_t> qq;
    thread_local std::vector<uint8_t> pv;      // probabilities in V's dot input type
    thread_local std::vector<uint8_t> gather;  // one V row's window when its cells are not contiguous
    thread_local std::vector<float> vrow;      // one q8_0 V head segment
    qq.resize(q_bytes);
    // Interleaved tasks: later tokens have longer windows, so contiguous ranges would unbalance threads.
    for (int64_t task = ith; task < tasks; task += nth) {
      const int64_t t = task / n_head;
      const int32_t hk = static_cast<int32_t>(task % n_head) / group;
      const float* qh = q + task * head_dim;
      float* oh = out + task * head_dim;
      const int32_t w0 = batch.window_offsets[static_cast<size_t>(t)];
      const int64_t len = batch.window_offsets[static_cast<size_t>(t) + 1] - w0;
      scores.resize(static_cast<size_t>(std::max<int64_t>(len, 1)));
      kt.from_float(qh, qq.data(), head_dim);

      float max_score = -INFINITY;
      for (int64_t j = 0; j < len; ++j) {
        const int32_t cell = batch.window_cells[static_cast<size_t>(w0 + j)];
        const auto* k = static_cast<const uint8_t*>(kv.k) + static_cast<size_t>(cell) * kv.row_bytes +
                        static_cast<size_t>(hk) * k_head_bytes;
        float s = 0.0f;
        kt.vec_dot(head_dim, &s, k, qq.data());
        s *= scale;
        scores[static_cast<size_t>(j)] = s;
        max_score = std::max(max_score, s);
      }
      double sum = 0.0;  // as ggml's softmax, the normaliser is summed in double
      for (int64_t j = 0; j < len; ++j) {
        const float e = std::exp(scores[static_cast<size_t>(j)] - max_score);
        scores[static_cast<size_t>(j)] = e;
        sum += e;
      }
      const float inv = sum > 0.0 ? static_cast<float>(1.0 / sum) : 0.0f;
      for (int64_t j = 0; j < len; ++j) scores[static_cast<size_t>(j)] *= inv;
      const int32_t* win = batch.window_cells.data() + w0;
      if (kv.v_trans) {
        if (len == 0) {
          std::fill(oh, oh + head_dim, 0.0f);
          continue;
        }
        pv.resize(static_cast<size_t>(len) * v_elem);
        vt.from_float(scores.data(), pv.data(), len);
        bool contiguous = true;
        for (int64_t j = 1; j < len && contiguous; ++j) contiguous = win[j] == win[0] + j;
        if (!contiguous) gather.resize(static_cast<size_t>(len) * v_elem);
        for (int32_t d = 0; d < head_dim; ++d) {
          const auto* vcol = static_cast<const uint8_t*>(kv.v) +
                             (static_cast<size_t>(hk) * head_dim + d) * static_cast<size_t>(kv.n_cells) * v_elem;
          const uint8_t* w = vcol + static_cast<size_t>(win[0]) * v_elem;
          if (!contiguous) {
            for (int64_t j = 0; j < len; ++j) {
              std::memcpy(gather.data() + j * v_elem, vcol + static_cast<size_t>(win[j]) * v_elem, v_elem);
            }
            w = gather.data();
          }
          vt.vec_dot(len, &oh[d], w, pv.data());
        }
        continue;
      }
      // q8_0 V: each cell's head segment (whole blocks) is decoded as it is used; nothing window-sized.
      vrow.resize(static_cast<size_t>(head_dim));
      std::fill(oh, oh + head_dim, 0.0f);
      for (int64_t j = 0; j < len; ++j) {
        const float p = scores[static_cast<size_t>(j)];
        const auto* row = static_cast<const uint8_t*>(kv.v) + static_cast<size_t>(win[j]) * kv.row_bytes +
                          static_cast<size_t>(hk) * k_head_bytes;
        quant::dequantize_row(kv.type, row, vrow.data(), head_dim);
        for (int32_t d = 0; d < head_dim; ++d) oh[d] += p * vrow[static_cast<size_t>(d)];
      }
    }
  });
}

}  // namespace minfer::backend::cpu
