// The scalar attention kernel: kernel_math.h's arithmetic written out one row at a time. It is the
// reference the SIMD kernels are tested against bitwise, and the kernel for head sizes they do not tile.
#include <algorithm>
#include <vector>

#include "core/fp16.h"
#include "quant/kernels/kernel_math.h"
#include "quant/kernels/kernels.h"

namespace minfer::kernels::generic {
namespace {

struct F32 {
  static float load(const uint8_t* p, int32_t i) {
    float v;
    std::memcpy(&v, p + 4 * static_cast<size_t>(i), 4);
    return v;
  }
  static float round(float x) { return x; }
};
struct F16 {
  static float load(const uint8_t* p, int32_t i) {
    uint16_t h;
    std::memcpy(&h, p + 2 * static_cast<size_t>(i), 2);
    return fp16_to_fp32(h);
  }
  static float round(float x) { return fp16_to_fp32(fp32_to_fp16(x)); }
};

template <class E>
void attention_rows(const AttnRows& a) {
  const int32_t D = a.head_dim;
  std::vector<float> q(static_cast<size_t>(D));
  std::vector<float> e;
  for (int32_t r = 0; r < a.n_rows; ++r) {
    float* out = a.out[r];
    std::fill(out, out + D, 0.0f);
    const int32_t len = a.lens[r];
    const int32_t start = a.starts != nullptr ? a.starts[r] : 0;
    if (len <= start) continue;
    for (int32_t d = 0; d < D; ++d) q[static_cast<size_t>(d)] = E::round(a.q[r][d]);
    e.resize(static_cast<size_t>(len));
    float max_score = -INFINITY;
    for (int32_t j = start; j < len; ++j) {
      const uint8_t* k = a.k + static_cast<size_t>(a.cells[j]) * a.row_bytes;
      float s = 0.0f;
      for (int32_t d = 0; d < D; ++d) s = std::fma(q[static_cast<size_t>(d)], E::load(k, d), s);
      s *= a.scale;
      e[static_cast<size_t>(j)] = s;
      max_score = std::max(max_score, s);
    }
    float lanes[math::kLanes] = {};
    for (int32_t j = start; j < len; ++j) {
      const float x = math::exp_approx(e[static_cast<size_t>(j)] - max_score);
      e[static_cast<size_t>(j)] = x;
      lanes[j % math::kLanes] += x;
    }
    const float inv = 1.0f / math::lane_tree(lanes);
    for (int32_t j = start; j < len; ++j) {
      const float p = e[static_cast<size_t>(j)] * inv;
      const uint8_t* v = a.v + static_cast<size_t>(a.cells[j]) * a.row_bytes;
      for (int32_t d = 0; d < D; ++d) out[d] = std::fma(p, E::load(v, d), out[d]);
    }
  }
}

void swiglu(const float* g, const float* u, int64_t n, float* y) {
  for (int64_t i = 0; i < n; ++i) y[i] = math::silu(g[i]) * u[i];
}

}  // namespace

void fill_attention(CpuKernels& k) {
  k.swiglu = swiglu;
  k.types[static_cast<uint32_t>(DType::F32)].attention = attention_rows<F32>;
  k.types[static_cast<uint32_t>(DType::F16)].attention = attention_rows<F16>;
}

}  // namespace minfer::kernels::generic
