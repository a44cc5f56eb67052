// NEON + dotprod kernels (aarch64 only; this file alone gets -march=armv8.2-a+dotprod+fp16). Covers the
// 32-element block types that dominate Qwen files (Q8_0, Q4_0, Q5_0) and F32; the others keep the generic
// table. Same contract as x86: each output accumulates its blocks in order, so a tile equals vec_dot.
#include <arm_neon.h>

#include <cstring>

#include "quant/blocks.h"
#include "quant/kernels/kernels.h"

namespace minfer::kernels::neon {
namespace {

using quant::BlockQ4_0;
using quant::BlockQ5_0;
using quant::BlockQ8_0;

inline float h2f(uint16_t h) {
  return vgetq_lane_f32(vcvt_f32_f16(vreinterpret_f16_u16(vdup_n_u16(h))), 0);
}

// 32 signed weights of one block as two int8x16 vectors.
struct W32 {
  int8x16_t lo, hi;
  float d;
};

inline W32 load_q8_0(const BlockQ8_0& b) {
  return {vld1q_s8(b.qs), vld1q_s8(b.qs + 16), h2f(b.d)};
}

inline W32 load_q4_0(const BlockQ4_0& b) {
  const uint8x16_t q = vld1q_u8(b.qs);
  const int8x16_t lo = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(q, vdupq_n_u8(0x0F))), vdupq_n_s8(8));
  const int8x16_t hi = vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(q, 4)), vdupq_n_s8(8));
  return {lo, hi, h2f(b.d)};
}

inline W32 load_q5_0(const BlockQ5_0& b) {
  uint32_t qh;
  std::memcpy(&qh, b.qh, sizeof(qh));
  alignas(16) int8_t v[32];
  for (int j = 0; j < 16; ++j) {
    v[j] = static_cast<int8_t>(((b.qs[j] & 0x0F) | (((qh >> j) & 1) << 4)) - 16);
    v[j + 16] = static_cast<int8_t>(((b.qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4)) - 16);
  }
  return {vld1q_s8(v), vld1q_s8(v + 16), h2f(b.d)};
}

template <class WB, W32 (*Load)(const WB&)>
void dot_blocks(int64_t n, float* s, const void* vw, const void* vx) {
  const auto* w = static_cast<const WB*>(vw);
  const auto* x = static_cast<const BlockQ8_0*>(vx);
  float32x4_t acc = vdupq_n_f32(0.0f);
  for (int64_t ib = 0; ib < n / 32; ++ib) {
    const W32 wb = Load(w[ib]);
    int32x4_t p = vdotq_s32(vdupq_n_s32(0), wb.lo, vld1q_s8(x[ib].qs));
    p = vdotq_s32(p, wb.hi, vld1q_s8(x[ib].qs + 16));
    acc = vmlaq_n_f32(acc, vcvtq_f32_s32(p), wb.d * h2f(x[ib].d));
  }
  *s = vaddvq_f32(acc);
}

void dot_f32(int64_t n, float* s, const void* vw, const void* vx) {
  const auto* w = static_cast<const float*>(vw);
  const auto* x = static_cast<const float*>(vx);
  float32x4_t acc = vdupq_n_f32(0.0f);
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) acc = vfmaq_f32(acc, vld1q_f32(w + i), vld1q_f32(x + i));
  float sum = vaddvq_f32(acc);
  for (; i < n; ++i) sum += w[i] * x[i];
  *s = sum;
}

template <void (*Dot)(int64_t, float*, const void*, const void*)>
void tile(int64_t n, const void* w, size_t ws, int nr, const void* x, size_t xs, int nc, float* y,
          size_t ldy) {
  for (int c = 0; c < nc; ++c) {
    for (int r = 0; r < nr; ++r) {
      Dot(n, y + static_cast<size_t>(c) * ldy + r,
          static_cast<const uint8_t*>(w) + static_cast<size_t>(r) * ws,
          static_cast<const uint8_t*>(x) + static_cast<size_t>(c) * xs);
    }
  }
}

template <void (*Dot)(int64_t, float*, const void*, const void*)>
void set(CpuKernels& k, DType t) {
  TypeKernels& tk = k.types[static_cast<uint32_t>(t)];
  tk.vec_dot = Dot;
  tk.gemm_tile = tile<Dot>;
}

}  // namespace

void fill(CpuKernels& k) {
  set<dot_blocks<BlockQ8_0, load_q8_0>>(k, DType::Q8_0);
  set<dot_blocks<BlockQ4_0, load_q4_0>>(k, DType::Q4_0);
  set<dot_blocks<BlockQ5_0, load_q5_0>>(k, DType::Q5_0);
  set<dot_f32>(k, DType::F32);
}

}  // namespace minfer::kernels::neon
