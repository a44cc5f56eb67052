// Elementwise CPU ops: add, mul (with row broadcast), silu, swiglu, gelu, scale, row gathers and RMS norm.
#include <cmath>
#include <cstring>
#include <vector>

#include "core/fp16.h"

#include "backend/cpu/ops/ops.h"
#include "quant/kernels/kernel_math.h"
#include "quant/kernels/kernels.h"
#include "quant/quant.h"

namespace minfer::backend::cpu {
namespace {

template <typename Op>
void binary(const float* a, const float* b, int64_t d, int64_t rows, bool broadcast, float* y, ThreadPool& pool,
            Op op) {
  pool.run([&](int ith, int nth) {
    int64_t r0, r1;
    split_range(rows, ith, nth, &r0, &r1);
    for (int64_t r = r0; r < r1; ++r) {
      const float* ar = a + r * d;
      const float* br = broadcast ? b : b + r * d;
      float* yr = y + r * d;
      for (int64_t i = 0; i < d; ++i) yr[i] = op(ar[i], br[i]);
    }
  });
}

}  // namespace

void add(const float* a, const float* b, int64_t d, int64_t rows, bool broadcast, float* y, ThreadPool& pool) {
  binary(a, b, d, rows, broadcast, y, pool, [](float p, float q) { return p + q; });
}

void mul(const float* a, const float* b, int64_t d, int64_t rows, bool broadcast, float* y, ThreadPool& pool) {
  binary(a, b, d, rows, broadcast, y, pool, [](float p, float q) { return p * q; });
}

void silu(const float* x, int64_t n, float* y, ThreadPool& pool) {
  pool.run([&](int ith, int nth) {
    int64_t i0, i1;
    split_range(n, ith, nth, &i0, &i1);
    for (int64_t i = i0; i < i1; ++i) y[i] = kernels::math::silu(x[i]);
  });
}

// The kernel table's SwiGLU (silu as kernel_math.h defines it: x * sigmoid(x) via exp(-|x|)); silu()
// above is the same function, so a graph with or without the SwiGLU fusion computes the same numbers.
void swiglu(const float* g, const float* u, int64_t n, float* y, ThreadPool& pool) {
  const kernels::SwigluFn fn = kernels::cpu_kernels().swiglu;
  pool.run([&](int ith, int nth) {
    int64_t i0, i1;
    split_range(n, ith, nth, &i0, &i1);
    fn(g + i0, u + i0, i1 - i0, y + i0);
  });
}

float gelu_tanh(float x) {
  constexpr float kCoefA = 0.044715f;
  constexpr float kSqrt2OverPi = 0.79788456080286535587989211986876f;
  return 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * x * (1.0f + kCoefA * x * x)));
}

namespace {
// gelu_tanh at every f16 value, rounded to f16: the table ggml's CPU backend builds at init.
const std::vector<uint16_t>& gelu_table() {
  static const std::vector<uint16_t> table = [] {
    std::vector<uint16_t> t(65536);
    for (uint32_t i = 0; i < 65536; ++i) t[i] = fp32_to_fp16(gelu_tanh(fp16_to_fp32(static_cast<uint16_t>(i))));
    return t;
  }();
  return table;
}
float gelu_lookup(const uint16_t* table, float x) {
  if (x <= -10.0f) return 0.0f;
  if (x >= 10.0f) return x;
  return fp16_to_fp32(table[fp32_to_fp16(x)]);
}
}  // namespace

float gelu_ggml(float x) { return gelu_lookup(gelu_table().data(), x); }

void gelu(const float* x, int64_t n, float* y, ThreadPool& pool) {
  const uint16_t* table = gelu_table().data();
  pool.run([&](int ith, int nth) {
    int64_t i0, i1;
    split_range(n, ith, nth, &i0, &i1);
    for (int64_t i = i0; i < i1; ++i) y[i] = gelu_lookup(table, x[i]);
  });
}

void scale(const float* x, int64_t n, float s, float* y, ThreadPool& pool) {
  pool.run([&](int ith, int nth) {
    int64_t i0, i1;
    split_range(n, ith, nth, &i0, &i1);
    for (int64_t i = i0; i < i1; ++i) y[i] = x[i] * s;
  });
}

void softcap(const float* x, int64_t n, float cap, float* y, ThreadPool& pool) {
  const float inv = 1.0f / cap;
  pool.run([&](int ith, int nth) {
    int64_t i0, i1;
    split_range(n, ith, nth, &i0, &i1);
    for (int64_t i = i0; i < i1; ++i) y[i] = std::tanh(x[i] * inv) * cap;
  });
}

void rms_norm(const float* x, const float* w, int64_t d, int64_t rows, float eps, float* y, ThreadPool& pool) {
  pool.run([&](int ith, int nth) {
    int64_t r0, r1;
    split_range(rows, ith, nth, &r0, &r1);
    for (int64_t r = r0; r < r1; ++r) {
      const float* xr = x + r * d;
      float* yr = y + r * d;
      double sum = 0.0;  // ggml accumulates the sum of squares in double
      for (int64_t i = 0; i < d; ++i) sum += static_cast<double>(xr[i] * xr[i]);
      const float mean = static_cast<float>(sum / static_cast<double>(d));
      const float scale = 1.0f / std::sqrt(mean + eps);
      for (int64_t i = 0; i < d; ++i) yr[i] = (xr[i] * scale) * w[i];
    }
  });
}

void get_rows_f32(const float* src, int64_t d, const int32_t* ids, int64_t n, float* dst) {
  for (int64_t i = 0; i < n; ++i) std::memcpy(dst + i * d, src + static_cast<int64_t>(ids[i]) * d, d * sizeof(float));
}

void get_rows_weight(const CpuWeight& w, const int32_t* ids, int64_t n, float* dst, ThreadPool& pool) {
  const size_t row_bytes = *minfer::row_bytes(w.type, w.ne0);
  pool.run([&](int ith, int nth) {
    int64_t i0, i1;
    split_range(n, ith, nth, &i0, &i1);
    for (int64_t i = i0; i < i1; ++i) {
      const auto* row = static_cast<const uint8_t*>(w.data) + static_cast<size_t>(ids[i]) * row_bytes;
      quant::dequantize_row(w.type, row, dst + i * w.ne0, w.ne0);
    }
  });
}

}  // namespace minfer::backend::cpu
