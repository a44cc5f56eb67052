// NEON + dotprod kernels (aarch64 only; this file alone gets -march=armv8.2-a+dotprod+fp16). Every
// quantized type has a dot here and each one is bitwise the scalar reference's (quant/reference.cpp): the
// integer part of a block (or K-quant sub-block) is an exact int32 sum whatever its order, so the
// vectors compute it with vdotq, and the float part is then the reference's own expression, one block
// after the other. F32 keeps 4-lane FMA accumulators (within the lane-kernel tolerance, like x86's).
// F16 / BF16 dots and the activation quantizers stay on the generic table (see docs/KERNELS.md).
// Tested under qemu-aarch64 (scripts/test.sh, `neon` preset): tests/quant/kernels_test.cpp.
#include <arm_neon.h>

#include <cstring>
#include <type_traits>

#include "quant/blocks.h"
#include "quant/kernels/kernels.h"

namespace minfer::kernels::neon {
namespace {

using quant::BlockQ4_0;
using quant::BlockQ4_1;
using quant::BlockQ4_K;
using quant::BlockQ5_0;
using quant::BlockQ5_1;
using quant::BlockQ5_K;
using quant::BlockQ6_K;
using quant::BlockQ8_0;
using quant::BlockQ8_1;
using quant::BlockQ8_K;

// Local copies (never the shared inlines of core/ or reference.h: this file is built with other flags).
inline float h2f(uint16_t h) {
  return vgetq_lane_f32(vcvt_f32_f16(vreinterpret_f16_u16(vdup_n_u16(h))), 0);
}

inline void scale_min_k4(int j, const uint8_t* q, int* d, int* m) {
  if (j < 4) {
    *d = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *d = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    *m = (q[j + 4] >> 4) | ((q[j - 0] >> 6) << 4);
  }
}

// Exact int32 dot of 16 int8 weights with 16 int8 activations.
inline int32_t dot16(int8x16_t w, const int8_t* a) {
  return vaddvq_s32(vdotq_s32(vdupq_n_s32(0), w, vld1q_s8(a)));
}

// 32 weights of one 32-element block as two int8 vectors (elements 0-15, 16-31), offset removed.
struct W32 {
  int8x16_t lo, hi;
};

inline int32_t dot32(const W32& w, const int8_t* a) {
  int32x4_t p = vdotq_s32(vdupq_n_s32(0), w.lo, vld1q_s8(a));
  p = vdotq_s32(p, w.hi, vld1q_s8(a + 16));
  return vaddvq_s32(p);
}

// The 5th bits of a Q5 block (qh, bit j for element j) as 0x10 bytes.
inline W32 fifth_bits(const uint8_t* qh_bytes) {
  uint32_t qh;
  std::memcpy(&qh, qh_bytes, sizeof(qh));
  static const uint8_t kBit[16] = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
  const uint8x16_t bit = vld1q_u8(kBit);
  // Bytes 0-7 of each vector hold qh's byte for elements 0-7, bytes 8-15 the byte for elements 8-15.
  const uint8x16_t b01 =
      vcombine_u8(vdup_n_u8(static_cast<uint8_t>(qh)), vdup_n_u8(static_cast<uint8_t>(qh >> 8)));
  const uint8x16_t b23 =
      vcombine_u8(vdup_n_u8(static_cast<uint8_t>(qh >> 16)), vdup_n_u8(static_cast<uint8_t>(qh >> 24)));
  const uint8x16_t lo = vandq_u8(vtstq_u8(b01, bit), vdupq_n_u8(0x10));
  const uint8x16_t hi = vandq_u8(vtstq_u8(b23, bit), vdupq_n_u8(0x10));
  return {vreinterpretq_s8_u8(lo), vreinterpretq_s8_u8(hi)};
}

// Unsigned 4- or 5-bit quants of a 32-block (no offset), as in Q4_1 / Q5_1.
inline W32 nibbles(const uint8_t* qs) {
  const uint8x16_t q = vld1q_u8(qs);
  return {vreinterpretq_s8_u8(vandq_u8(q, vdupq_n_u8(0x0F))), vreinterpretq_s8_u8(vshrq_n_u8(q, 4))};
}

inline W32 with_fifth(W32 w, const uint8_t* qh) {
  const W32 h = fifth_bits(qh);
  return {vorrq_s8(w.lo, h.lo), vorrq_s8(w.hi, h.hi)};
}

inline W32 minus(W32 w, int8_t o) {
  return {vsubq_s8(w.lo, vdupq_n_s8(o)), vsubq_s8(w.hi, vdupq_n_s8(o))};
}

// ---- 32-element blocks: sumf += (float)sumi * (d_w * d_x) [+ m_w * s_x], block by block.

inline W32 weights(const BlockQ8_0& b) {
  return {vld1q_s8(b.qs), vld1q_s8(b.qs + 16)};
}
inline W32 weights(const BlockQ4_0& b) {
  return minus(nibbles(b.qs), 8);
}
inline W32 weights(const BlockQ5_0& b) {
  return minus(with_fifth(nibbles(b.qs), b.qh), 16);
}
inline W32 weights(const BlockQ4_1& b) {
  return nibbles(b.qs);
}
inline W32 weights(const BlockQ5_1& b) {
  return with_fifth(nibbles(b.qs), b.qh);
}

template <class WB>
void dot_q8_0_act(int64_t n, float* s, const void* vw, const void* vx) {
  const auto* w = static_cast<const WB*>(vw);
  const auto* x = static_cast<const BlockQ8_0*>(vx);
  float sumf = 0;
  for (int64_t ib = 0; ib < n / 32; ++ib) {
    const int32_t sumi = dot32(weights(w[ib]), x[ib].qs);
    sumf += static_cast<float>(sumi) * (h2f(w[ib].d) * h2f(x[ib].d));
  }
  *s = sumf;
}

template <class WB>
void dot_q8_1_act(int64_t n, float* s, const void* vw, const void* vx) {
  const auto* w = static_cast<const WB*>(vw);
  const auto* x = static_cast<const BlockQ8_1*>(vx);
  float sumf = 0;
  for (int64_t ib = 0; ib < n / 32; ++ib) {
    const int32_t sumi = dot32(weights(w[ib]), x[ib].qs);
    sumf += static_cast<float>(sumi) * (h2f(w[ib].d) * h2f(x[ib].d)) + h2f(w[ib].m) * h2f(x[ib].s);
  }
  *s = sumf;
}

// ---- K-quants: per super-block the exact sums of scale * (q . x) and min * bsum, then the reference's
// sumf += d * sumi - dmin * summ (Q4_K, Q5_K) or sumf += d_w * d_x * sumi (Q6_K).

// Q4_K / Q5_K: sub-block j (32 quants) is the low (even j) or high (odd j) nibbles of qs[32*(j/2)...],
// plus for Q5_K bit j of qh[0..31] as 0x10.
template <class WB>
void dot_k4(int64_t n, float* s, const void* vw, const void* vx) {
  constexpr bool kFifth = std::is_same_v<WB, BlockQ5_K>;
  const auto* w = static_cast<const WB*>(vw);
  const auto* x = static_cast<const BlockQ8_K*>(vx);
  float sumf = 0;
  for (int64_t i = 0; i < n / 256; ++i) {
    int32_t sumi = 0, summ = 0;
    uint8x16_t qh0 = vdupq_n_u8(0), qh1 = vdupq_n_u8(0);
    if constexpr (kFifth) {
      qh0 = vld1q_u8(w[i].qh);
      qh1 = vld1q_u8(w[i].qh + 16);
    }
    for (int j = 0; j < 8; ++j) {
      int sc, m;
      scale_min_k4(j, w[i].scales, &sc, &m);
      const uint8x16_t q0 = vld1q_u8(w[i].qs + 32 * (j / 2));
      const uint8x16_t q1 = vld1q_u8(w[i].qs + 32 * (j / 2) + 16);
      uint8x16_t v0 = (j & 1) ? vshrq_n_u8(q0, 4) : vandq_u8(q0, vdupq_n_u8(0x0F));
      uint8x16_t v1 = (j & 1) ? vshrq_n_u8(q1, 4) : vandq_u8(q1, vdupq_n_u8(0x0F));
      if constexpr (kFifth) {
        const uint8x16_t bit = vdupq_n_u8(static_cast<uint8_t>(1u << j));
        v0 = vorrq_u8(v0, vandq_u8(vtstq_u8(qh0, bit), vdupq_n_u8(0x10)));
        v1 = vorrq_u8(v1, vandq_u8(vtstq_u8(qh1, bit), vdupq_n_u8(0x10)));
      }
      const int32_t dot = dot32({vreinterpretq_s8_u8(v0), vreinterpretq_s8_u8(v1)}, x[i].qs + 32 * j);
      sumi += sc * dot;
      summ += m * (x[i].bsums[2 * j] + x[i].bsums[2 * j + 1]);
    }
    const float d = h2f(w[i].d) * x[i].d;
    const float dmin = h2f(w[i].dmin) * x[i].d;
    sumf += d * static_cast<float>(sumi) - dmin * static_cast<float>(summ);
  }
  *s = sumf;
}

// Q6_K: per 128-element half, quarter q (32 quants) has low bits ql[l] & 0xF, ql[l+32] & 0xF, ql[l] >> 4,
// ql[l+32] >> 4 (q = 0..3) and high bits (qh[l] >> 2q) & 3, minus 32; one int8 scale per 16 quants.
void dot_q6_K(int64_t n, float* s, const void* vw, const void* vx) {
  const auto* w = static_cast<const BlockQ6_K*>(vw);
  const auto* x = static_cast<const BlockQ8_K*>(vx);
  float sumf = 0;
  for (int64_t i = 0; i < n / 256; ++i) {
    int32_t sumi = 0;
    for (int half = 0; half < 2; ++half) {
      const uint8_t* ql = w[i].ql + 64 * half;
      const uint8_t* qh = w[i].qh + 32 * half;
      const int8_t* sc = w[i].scales + 8 * half;
      const int8_t* a = x[i].qs + 128 * half;
      for (int part = 0; part < 2; ++part) {  // elements l = 16*part .. 16*part+15 of each quarter
        const uint8x16_t l0 = vld1q_u8(ql + 16 * part);
        const uint8x16_t l1 = vld1q_u8(ql + 32 + 16 * part);
        const uint8x16_t h = vld1q_u8(qh + 16 * part);
        const uint8x16_t m4 = vdupq_n_u8(0x0F), m2 = vdupq_n_u8(3);
        const uint8x16_t lo[4] = {vandq_u8(l0, m4), vandq_u8(l1, m4), vshrq_n_u8(l0, 4), vshrq_n_u8(l1, 4)};
        const uint8x16_t hi[4] = {vandq_u8(h, m2), vandq_u8(vshrq_n_u8(h, 2), m2),
                                  vandq_u8(vshrq_n_u8(h, 4), m2), vshrq_n_u8(h, 6)};
        for (int quarter = 0; quarter < 4; ++quarter) {
          const int8x16_t q = vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(lo[quarter], vshlq_n_u8(hi[quarter], 4))),
                                       vdupq_n_s8(32));
          sumi += sc[2 * quarter + part] * dot16(q, a + 32 * quarter + 16 * part);
        }
      }
    }
    sumf += h2f(w[i].d) * x[i].d * static_cast<float>(sumi);
  }
  *s = sumf;
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
  set<dot_q8_0_act<BlockQ8_0>>(k, DType::Q8_0);
  set<dot_q8_0_act<BlockQ4_0>>(k, DType::Q4_0);
  set<dot_q8_0_act<BlockQ5_0>>(k, DType::Q5_0);
  set<dot_q8_1_act<BlockQ4_1>>(k, DType::Q4_1);
  set<dot_q8_1_act<BlockQ5_1>>(k, DType::Q5_1);
  set<dot_k4<BlockQ4_K>>(k, DType::Q4_K);
  set<dot_k4<BlockQ5_K>>(k, DType::Q5_K);
  set<dot_q6_K>(k, DType::Q6_K);
  set<dot_f32>(k, DType::F32);
}

}  // namespace minfer::kernels::neon
