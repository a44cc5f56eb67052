// CPU op kernels over f32 activations (row-major, ne[0] contiguous). Each op validates nothing: the
// backend checks shapes and types once at its boundary (cpu_backend.cpp) and then calls these.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/exec_context.h"
#include "core/thread_pool.h"
#include "quant/matmul.h"

namespace minfer::backend::cpu {

// A registered weight: the raw GGUF view (for get_rows) and its matmul-prepared form.
struct CpuWeight {
  DType type = DType::F32;
  int64_t ne0 = 0;  // k (elements per row)
  int64_t ne1 = 0;  // rows
  const void* data = nullptr;
  bool has_matmul = false;
  quant::Weight prepared;
  // Expert-stacked 3-D tensors ({k, n, n_expert}: ffn_*_exps): each expert's n rows prepared on their own
  // (repacked like a dense weight), for matmul_id; `prepared` is unused then.
  std::vector<quant::Weight> experts;
};

void get_rows_weight(const CpuWeight& w, const int32_t* ids, int64_t n, float* dst, ThreadPool& pool);
void get_rows_f32(const float* src, int64_t d, const int32_t* ids, int64_t n, float* dst);
void rms_norm(const float* x, const float* w, int64_t d, int64_t rows, float eps, float* y, ThreadPool& pool);
void add(const float* a, const float* b, int64_t d, int64_t rows, bool broadcast, float* y, ThreadPool& pool);
void mul(const float* a, const float* b, int64_t d, int64_t rows, bool broadcast, float* y, ThreadPool& pool);
void silu(const float* x, int64_t n, float* y, ThreadPool& pool);
void swiglu(const float* g, const float* u, int64_t n, float* y, ThreadPool& pool);
// ggml's CPU GELU (tanh approximation, GGML_GELU_FP16): 0 for x <= -10, x for x >= 10, otherwise the
// formula at x rounded to f16, its result rounded to f16 (ggml reads it from a 64K-entry f16 table).
// gelu_tanh is the formula itself in f32, as ggml_gelu_f32 writes it; gelu_ggml the rule above for one value.
float gelu_tanh(float x);
float gelu_ggml(float x);
void gelu(const float* x, int64_t n, float* y, ThreadPool& pool);
void scale(const float* x, int64_t n, float s, float* y, ThreadPool& pool);
// tanhf(x * (1 / cap)) * cap, ggml's scale -> tanh -> scale for final logit soft-capping.
void softcap(const float* x, int64_t n, float cap, float* y, ThreadPool& pool);
inline constexpr int32_t kMaxRopeDims = 1024;
// Rotary parameters as llama.cpp's ggml_rope_ext takes them (no YaRN): pair i turns by
// theta_i = freq_scale * (pos * base^(-2i/n_rot) / freq_factors[i]).
struct RopeSpec {
  int32_t n_rot = 0;
  float freq_base = 10000.0f;
  float freq_scale = 1.0f;
  bool neox = true;                     // NEOX pairs (i, i + n_rot/2); false: normal pairs (2i, 2i + 1)
  const float* freq_factors = nullptr;  // n_rot/2 divisors (llama3 rope_freqs), or none
};
// One token's heads ({head_dim, n_head}) rotated to position `pos`; x may equal y. Also re-rotates cached K
// when a sequence's positions shift (rotations compose: rotating by delta moves pos to pos + delta).
void rope_token(const float* x, int64_t head_dim, int64_t n_head, int32_t pos, const RopeSpec& spec, float* y);
// x: {head_dim, n_head, n_tokens}; rotates the first n_rot dims of each head.
void rope(const float* x, int64_t head_dim, int64_t n_head, int64_t n_tokens, const int32_t* positions,
          const RopeSpec& spec, float* y, ThreadPool& pool);
// Writes K/V rows (n_tokens rows of kv.row_elems floats) into cells, converting to the cache type; v nullptr:
// K only.
void kv_store(const KvLayerView& kv, const float* k, const float* v, const int32_t* cells, int64_t n_tokens,
              ThreadPool& pool);
// The K rows of n cells, converted to f32: out {kv.row_elems, n}.
void kv_rows(const KvLayerView& kv, const int32_t* cells, int64_t n, float* out, ThreadPool& pool);
// q: {head_dim, n_head, n_tokens} -> out: {head_dim * n_head, n_tokens}. n_swa > 0: each token attends only
// the cells of its window with pos > its pos - n_swa (a suffix of the window, found from
// batch.window_positions).
void attention(const KvLayerView& kv, const BatchView& batch, const float* q, int32_t n_head, int32_t n_head_kv,
               int32_t head_dim, float scale, int32_t n_swa, float* out, ThreadPool& pool);

// Mixture of experts (graph/ir.h kMoeRoute, kMoeWeights, kMatMulId, kMoeSum). logits: {n_expert, n_tokens}.
void moe_route(const float* logits, int64_t n_expert, int64_t n_tokens, int32_t n_used, int32_t* ids,
               ThreadPool& pool);
void moe_weights(const float* logits, int64_t n_expert, const int32_t* ids, int64_t n_tokens, int32_t n_used,
                 bool norm_w, float* weights, ThreadPool& pool);
// y: {w.ne1 rows per expert, n_used, n_tokens}; x: {k, x_per_slot ? n_used : 1, n_tokens}.
void matmul_id(const CpuWeight& w, const float* x, const int32_t* ids, int64_t n_tokens, int64_t n_used,
               bool x_per_slot, float* y, ThreadPool& pool);
// experts: {d, n_used, n_tokens}, weights: {n_used, n_tokens} -> y: {d, n_tokens}.
void moe_sum(const float* experts, const float* weights, int64_t d, int64_t n_used, int64_t n_tokens, float* y,
             ThreadPool& pool);

// Splits [0, n) into nth nearly equal contiguous ranges; returns thread ith's range.
inline void split_range(int64_t n, int ith, int nth, int64_t* begin, int64_t* end) {
  const int64_t per = (n + nth - 1) / nth;
  *begin = std::min<int64_t>(n, per * ith);
  *end = std::min<int64_t>(n, *begin + per);
}

}  // namespace minfer::backend::cpu
