// Causal GQA attention over the KV cells. Each token reduces over exactly its own window (its
// sequence's cells up to its position, in position order), so a token's output is bitwise the same
// whether it is computed in a large prefill batch, a chunk, or a one-token decode step.
//
// f32 / f16 caches: the kernel table's tiled attention. Consecutive tokens whose windows nest (a
// sequence's prefill) form a run; a task is a block of a run's tokens x one KV head, i.e. the block's
// tokens times the GQA group's heads as query rows sharing one K/V stream. The kernel's result per row
// depends only on that row (quant/kernels/kernel_math.h), so blocking never changes a number.
//
// Sliding window (n_swa > 0, gemma3's local layers): token t attends only the suffix of its window with
// pos > pos_t - n_swa, from `start(t)` on. A tiled task passes its rows' shared window from the smallest
// start rounded down to a multiple of 16 (cells before it are beyond every row's window) and each row's
// start within it; the rounding keeps every cell on the softmax lane of its index in the whole window, so
// a token's result still does not depend on its batch.
//
// q8_0 cache: per (token, head), scores by the kernel dot for q8_0 (q quantized to q8_0, as ggml does),
// softmax as ggml's (normaliser summed in double), V decoded per cell head segment.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <vector>

#include "backend/cpu/ops/ops.h"
#include "quant/kernels/kernels.h"
#include "quant/quant.h"

namespace minfer::backend::cpu {
namespace {

// Query rows per task: enough to amortise the K transposition and V loads over many rows.
constexpr int32_t kRowsPerTask = 48;

struct Task {
  int64_t t0, t1;  // tokens [t0, t1) of one run
  int32_t hk;      // KV head
  int64_t cost;    // cells the block's rows span
  int32_t base;    // first window cell passed to the kernel (a multiple of 16; 0 without a sliding window)
};

// Token t's window: window_len(b, t) cells starting at window(b, t).
const int32_t* window(const BatchView& b, int64_t t) {
  return b.window_cells.data() + b.window_offsets[static_cast<size_t>(t)];
}
int32_t window_len(const BatchView& b, int64_t t) {
  return b.window_offsets[static_cast<size_t>(t) + 1] - b.window_offsets[static_cast<size_t>(t)];
}

// Index in token t's window of its first cell inside a sliding window of n_swa positions (0 if none).
int32_t window_start(const BatchView& b, int64_t t, int32_t n_swa) {
  if (n_swa <= 0) return 0;
  const int32_t* pos = b.window_positions.data() + b.window_offsets[static_cast<size_t>(t)];
  const int64_t lowest = static_cast<int64_t>(b.positions[static_cast<size_t>(t)]) - n_swa + 1;
  return static_cast<int32_t>(std::lower_bound(pos, pos + window_len(b, t), lowest) - pos);
}

bool nests(const BatchView& b, int64_t a, int64_t c) {  // window(a) is a prefix of window(c)
  return window_len(b, a) <= window_len(b, c) &&
         std::equal(window(b, a), window(b, a) + window_len(b, a), window(b, c));
}

void attention_tiled(kernels::AttentionFn kernel, const KvLayerView& kv, const BatchView& batch,
                     const float* q, int32_t n_head, int32_t n_head_kv, int32_t head_dim, float scale,
                     int32_t n_swa, float* out, ThreadPool& pool) {
  const auto n_tokens = static_cast<int64_t>(batch.tokens.size());
  const int32_t group = n_head / n_head_kv;
  const int64_t block = std::max<int32_t>(1, kRowsPerTask / group);
  std::vector<Task> tasks;
  for (int64_t r0 = 0; r0 < n_tokens;) {
    int64_t r1 = r0 + 1;
    while (r1 < n_tokens && nests(batch, r1 - 1, r1)) ++r1;
    for (int64_t t0 = r0; t0 < r1; t0 += block) {
      const int64_t t1 = std::min(r1, t0 + block);
      int32_t base = window_len(batch, t1 - 1);
      for (int64_t t = t0; t < t1; ++t) base = std::min(base, window_start(batch, t, n_swa));
      base = base / 16 * 16;
      for (int32_t hk = 0; hk < n_head_kv; ++hk) {
        tasks.push_back({t0, t1, hk, window_len(batch, t1 - 1) - base, base});
      }
    }
    r0 = r1;
  }
  // Longest windows first, handed out one at a time: threads stay balanced even when one is descheduled.
  std::stable_sort(tasks.begin(), tasks.end(), [](const Task& a, const Task& b) { return a.cost > b.cost; });
  const size_t head_bytes = kv.row_bytes / static_cast<size_t>(n_head_kv);
  std::atomic<size_t> next{0};
  pool.run([&](int, int) {
    std::vector<const float*> qrows;
    std::vector<float*> orows;
    std::vector<int32_t> lens, starts;
    for (size_t i = next.fetch_add(1); i < tasks.size(); i = next.fetch_add(1)) {
      const Task& task = tasks[i];
      qrows.clear();
      orows.clear();
      lens.clear();
      starts.clear();
      for (int64_t t = task.t0; t < task.t1; ++t) {
        const int32_t len = window_len(batch, t) - task.base;
        const int32_t start = window_start(batch, t, n_swa) - task.base;
        for (int32_t h = task.hk * group; h < (task.hk + 1) * group; ++h) {
          const int64_t row = t * n_head + h;
          qrows.push_back(q + row * head_dim);
          orows.push_back(out + row * head_dim);
          lens.push_back(len);
          starts.push_back(start);
        }
      }
      kernels::AttnRows a;
      a.head_dim = head_dim;
      a.n_rows = static_cast<int32_t>(qrows.size());
      a.q = qrows.data();
      a.out = orows.data();
      a.lens = lens.data();
      a.starts = n_swa > 0 ? starts.data() : nullptr;
      a.cells = window(batch, task.t1 - 1) + task.base;
      a.k = static_cast<const uint8_t*>(kv.k) + static_cast<size_t>(task.hk) * head_bytes;
      a.v = static_cast<const uint8_t*>(kv.v) + static_cast<size_t>(task.hk) * head_bytes;
      a.row_bytes = kv.row_bytes;
      a.scale = scale;
      kernel(a);
    }
  });
}

void attention_q8_0(const KvLayerView& kv, const BatchView& batch, const float* q, int32_t n_head,
                    int32_t n_head_kv, int32_t head_dim, float scale, int32_t n_swa, float* out, ThreadPool& pool) {
  const int64_t n_tokens = static_cast<int64_t>(batch.tokens.size());
  const int32_t group = n_head / n_head_kv;
  const kernels::TypeKernels& kt = kernels::cpu_kernels().of(kv.type);
  const size_t q_bytes = *row_bytes(kt.vec_dot_type, head_dim);
  const size_t head_bytes = *row_bytes(kv.type, head_dim);
  const int64_t tasks = n_tokens * n_head;
  pool.run([&](int ith, int nth) {
    thread_local std::vector<float> scores;
    thread_local std::vector<uint8_t> qq;
    thread_local std::vector<float> vrow;  // one V head segment
    qq.resize(q_bytes);
    vrow.resize(static_cast<size_t>(head_dim));
    // Interleaved tasks: later tokens have longer windows, so contiguous ranges would unbalance threads.
    for (int64_t task = ith; task < tasks; task += nth) {
      const int64_t t = task / n_head;
      const int32_t hk = static_cast<int32_t>(task % n_head) / group;
      const float* qh = q + task * head_dim;
      float* oh = out + task * head_dim;
      const int32_t start = window_start(batch, t, n_swa);
      const int64_t len = window_len(batch, t) - start;
      const int32_t* win = window(batch, t) + start;
      scores.resize(static_cast<size_t>(std::max<int64_t>(len, 1)));
      kt.from_float(qh, qq.data(), head_dim);

      float max_score = -INFINITY;
      for (int64_t j = 0; j < len; ++j) {
        const auto* k = static_cast<const uint8_t*>(kv.k) + static_cast<size_t>(win[j]) * kv.row_bytes +
                        static_cast<size_t>(hk) * head_bytes;
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
      std::fill(oh, oh + head_dim, 0.0f);
      for (int64_t j = 0; j < len; ++j) {
        const float p = scores[static_cast<size_t>(j)] * inv;
        const auto* row = static_cast<const uint8_t*>(kv.v) + static_cast<size_t>(win[j]) * kv.row_bytes +
                          static_cast<size_t>(hk) * head_bytes;
        quant::dequantize_row(kv.type, row, vrow.data(), head_dim);
        for (int32_t d = 0; d < head_dim; ++d) oh[d] += p * vrow[static_cast<size_t>(d)];
      }
    }
  });
}

}  // namespace

void attention(const KvLayerView& kv, const BatchView& batch, const float* q, int32_t n_head,
               int32_t n_head_kv, int32_t head_dim, float scale, int32_t n_swa, float* out, ThreadPool& pool) {
  if (kernels::AttentionFn tiled = kernels::cpu_kernels().of(kv.type).attention; tiled != nullptr) {
    attention_tiled(tiled, kv, batch, q, n_head, n_head_kv, head_dim, scale, n_swa, out, pool);
  } else {
    attention_q8_0(kv, batch, q, n_head, n_head_kv, head_dim, scale, n_swa, out, pool);
  }
}

}  // namespace minfer::backend::cpu
