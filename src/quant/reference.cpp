// Scalar reference (de)quantizers and dots. The file quantizers follow ggml-quants.c's *_ref encoders
// operation for operation (same evaluation order, no FMA contraction: this file is built with
// -ffp-contract=off) because llama-quantize's output is compared byte for byte.
#include "quant/reference.h"

#include <algorithm>
#include <bit>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <type_traits>

#include "core/fp16.h"
#include "quant/blocks.h"

namespace minfer::quant::ref {
namespace {

constexpr float kGroupMaxEps = 1e-15f;

inline float h2f(uint16_t h) {
  return fp16_to_fp32(h);
}
inline uint16_t f2h(float f) {
  return fp32_to_fp16(f);
}

// Round to nearest, ties to even, for |fval| < 2^22 (ggml's nearest_int, a magic-number trick).
inline int nearest_int(float fval) {
  const float val = fval + 12582912.f;
  const int32_t i = std::bit_cast<int32_t>(val);
  return (i & 0x007fffff) - 0x00400000;
}

// ggml's make_qx_quants without quant weights (qw == nullptr): symmetric scale search for Q6_K.
float make_qx_quants(int n, int nmax, const float* x, int8_t* L, int rmse_type) {
  float max = 0;
  float amax = 0;
  for (int i = 0; i < n; ++i) {
    const float ax = std::fabs(x[i]);
    if (ax > amax) {
      amax = ax;
      max = x[i];
    }
  }
  if (amax < kGroupMaxEps) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    return 0.f;
  }
  float iscale = -nmax / max;
  if (rmse_type == 0) {
    for (int i = 0; i < n; ++i) {
      const int l = nearest_int(iscale * x[i]);
      L[i] = static_cast<int8_t>(nmax + std::max(-nmax, std::min(nmax - 1, l)));
    }
    return 1 / iscale;
  }
  bool return_early = false;
  if (rmse_type < 0) {
    rmse_type = -rmse_type;
    return_early = true;
  }
  auto weight = [&](int i) -> float {
    return rmse_type == 1   ? x[i] * x[i]
           : rmse_type == 2 ? 1.0f
           : rmse_type == 3 ? std::fabs(x[i])
                            : std::sqrt(std::fabs(x[i]));
  };
  float sumlx = 0;
  float suml2 = 0;
  for (int i = 0; i < n; ++i) {
    int l = nearest_int(iscale * x[i]);
    l = std::max(-nmax, std::min(nmax - 1, l));
    L[i] = static_cast<int8_t>(l + nmax);
    const float w = weight(i);
    sumlx += w * x[i] * static_cast<float>(l);
    suml2 += w * static_cast<float>(l) * static_cast<float>(l);
  }
  float scale = suml2 != 0.0f ? sumlx / suml2 : 0.0f;
  if (return_early) return suml2 > 0 ? 0.5f * (scale + 1 / iscale) : 1 / iscale;
  float best = scale * sumlx;
  for (int is = -9; is <= 9; ++is) {
    if (is == 0) continue;
    iscale = -(static_cast<float>(nmax) + 0.1f * static_cast<float>(is)) / max;
    sumlx = suml2 = 0;
    for (int i = 0; i < n; ++i) {
      int l = nearest_int(iscale * x[i]);
      l = std::max(-nmax, std::min(nmax - 1, l));
      const float w = weight(i);
      sumlx += w * x[i] * static_cast<float>(l);
      suml2 += w * static_cast<float>(l) * static_cast<float>(l);
    }
    if (suml2 > 0 && sumlx * sumlx > best * suml2) {
      for (int i = 0; i < n; ++i) {
        const int l = nearest_int(iscale * x[i]);
        L[i] = static_cast<int8_t>(nmax + std::max(-nmax, std::min(nmax - 1, l)));
      }
      scale = sumlx / suml2;
      best = scale * sumlx;
    }
  }
  return scale;
}

// ggml's make_qkx2_quants: asymmetric (scale, min) search for Q4_K / Q5_K sub-blocks.
float make_qkx2_quants(int n, int nmax, const float* x, const float* weights, uint8_t* L, float* the_min,
                       uint8_t* Laux, float rmin, float rdelta, int nstep, bool use_mad) {
  float min = x[0];
  float max = x[0];
  float sum_w = weights[0];
  float sum_x = sum_w * x[0];
  for (int i = 1; i < n; ++i) {
    if (x[i] < min) min = x[i];
    if (x[i] > max) max = x[i];
    const float w = weights[i];
    sum_w += w;
    sum_x += w * x[i];
  }
  if (min > 0) min = 0;
  if (max == min) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    *the_min = -min;
    return 0.f;
  }
  float iscale = static_cast<float>(nmax) / (max - min);
  float scale = 1 / iscale;
  float best_error = 0;
  for (int i = 0; i < n; ++i) {
    const int l = nearest_int(iscale * (x[i] - min));
    L[i] = static_cast<uint8_t>(std::max(0, std::min(nmax, l)));
    float diff = scale * static_cast<float>(L[i]) + min - x[i];
    diff = use_mad ? std::fabs(diff) : diff * diff;
    best_error += weights[i] * diff;
  }
  if (nstep < 1) {
    *the_min = -min;
    return scale;
  }
  for (int is = 0; is <= nstep; ++is) {
    iscale = (rmin + rdelta * static_cast<float>(is) + static_cast<float>(nmax)) / (max - min);
    float sum_l = 0, sum_l2 = 0, sum_xl = 0;
    for (int i = 0; i < n; ++i) {
      int l = nearest_int(iscale * (x[i] - min));
      l = std::max(0, std::min(nmax, l));
      Laux[i] = static_cast<uint8_t>(l);
      const float w = weights[i];
      const float fl = static_cast<float>(l);
      sum_l += w * fl;
      sum_l2 += w * fl * fl;
      sum_xl += w * fl * x[i];
    }
    const float D = sum_w * sum_l2 - sum_l * sum_l;
    if (D > 0) {
      float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
      float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
      if (this_min > 0) {
        this_min = 0;
        this_scale = sum_xl / sum_l2;
      }
      float cur_error = 0;
      for (int i = 0; i < n; ++i) {
        float diff = this_scale * static_cast<float>(Laux[i]) + this_min - x[i];
        diff = use_mad ? std::fabs(diff) : diff * diff;
        cur_error += weights[i] * diff;
      }
      if (cur_error < best_error) {
        for (int i = 0; i < n; ++i) L[i] = Laux[i];
        best_error = cur_error;
        scale = this_scale;
        min = this_min;
      }
    }
  }
  *the_min = -min;
  return scale;
}

// Packs 8 six-bit scales and mins into the 12-byte Q4_K/Q5_K scales field.
void pack_k4_scales(uint8_t* scales, const uint8_t* ls, const uint8_t* lm) {
  for (int j = 0; j < kQK_K / 32; ++j) {
    if (j < 4) {
      scales[j] = ls[j];
      scales[j + 4] = lm[j];
    } else {
      scales[j + 4] = static_cast<uint8_t>((ls[j] & 0xF) | ((lm[j] & 0xF) << 4));
      scales[j - 4] |= static_cast<uint8_t>((ls[j] >> 4) << 6);
      scales[j - 0] |= static_cast<uint8_t>((lm[j] >> 4) << 6);
    }
  }
}

// Shared first half of the Q4_K / Q5_K encoders: per-32 (scale, min) search, 6-bit packing, requantize.
void quantize_k4_superblock(const float* x, int nmax, float rmin, int nstep, uint16_t* d_out,
                            uint16_t* dmin_out, uint8_t* scales_out, uint8_t* L) {
  uint8_t Laux[32];
  float weights[32];
  float mins[kQK_K / 32];
  float scales[kQK_K / 32];
  float max_scale = 0;
  float max_min = 0;
  for (int j = 0; j < kQK_K / 32; ++j) {
    float sum_x2 = 0;
    for (int l = 0; l < 32; ++l) sum_x2 += x[32 * j + l] * x[32 * j + l];
    const float av_x = std::sqrt(sum_x2 / 32);
    for (int l = 0; l < 32; ++l) weights[l] = av_x + std::fabs(x[32 * j + l]);
    scales[j] =
        make_qkx2_quants(32, nmax, x + 32 * j, weights, L + 32 * j, &mins[j], Laux, rmin, 0.1f, nstep, false);
    if (scales[j] > max_scale) max_scale = scales[j];
    if (mins[j] > max_min) max_min = mins[j];
  }
  const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
  const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
  uint8_t ls[kQK_K / 32];
  uint8_t lm[kQK_K / 32];
  for (int j = 0; j < kQK_K / 32; ++j) {
    ls[j] = std::min<uint8_t>(63, static_cast<uint8_t>(nearest_int(inv_scale * scales[j])));
    lm[j] = std::min<uint8_t>(63, static_cast<uint8_t>(nearest_int(inv_min * mins[j])));
  }
  std::memset(scales_out, 0, kKScaleSize);
  pack_k4_scales(scales_out, ls, lm);
  *d_out = f2h(max_scale / 63.f);
  *dmin_out = f2h(max_min / 63.f);
  for (int j = 0; j < kQK_K / 32; ++j) {
    uint8_t sc, m;
    get_scale_min_k4(j, scales_out, &sc, &m);
    const float d = h2f(*d_out) * static_cast<float>(sc);
    if (d == 0.0f) continue;
    const float dm = h2f(*dmin_out) * static_cast<float>(m);
    for (int ii = 0; ii < 32; ++ii) {
      const int l = nearest_int((x[32 * j + ii] + dm) / d);
      L[32 * j + ii] = static_cast<uint8_t>(std::max(0, std::min(nmax, l)));
    }
  }
}

// The 32-element formats: byte j of qs holds element j (low nibble) and j + 16 (high nibble), the 5th
// bit of element e is bit e of qh; Q4_0 / Q5_0 subtract 8 / 16, Q4_1 / Q5_1 are unsigned (their min is
// added separately), Q8_0 is plain bytes. One loop per block, as ggml's reference, so it vectorizes.
template <class B>
constexpr int kOffset = std::is_same_v<B, BlockQ4_0>   ? 8
                        : std::is_same_v<B, BlockQ5_0> ? 16
                                                       : 0;
template <class B>
constexpr bool kFifthBit = std::is_same_v<B, BlockQ5_0> || std::is_same_v<B, BlockQ5_1>;

// Calls f(e, q) for the 32 quants q of block b, element e.
template <class B, class F>
inline void for_each_quant(const B& b, F f) {
  if constexpr (std::is_same_v<B, BlockQ8_0>) {
    for (int e = 0; e < 32; ++e) f(e, static_cast<int>(b.qs[e]));
  } else {
    uint32_t h = 0;
    if constexpr (kFifthBit<B>) std::memcpy(&h, b.qh, sizeof(h));
    for (int j = 0; j < 16; ++j) {
      f(j, ((b.qs[j] & 0x0F) | static_cast<int>(((h >> j) << 4) & 0x10)) - kOffset<B>);
      f(j + 16, ((b.qs[j] >> 4) | static_cast<int>((h >> (j + 12)) & 0x10)) - kOffset<B>);
    }
  }
}
template <class B>
constexpr bool kHasMin = std::is_same_v<B, BlockQ4_1> || std::is_same_v<B, BlockQ5_1>;

// The element of largest magnitude with its sign, the first one on ties (Q4_0 / Q5_0 encoders).
inline float signed_absmax(const float* x, int n) {
  float amax = 0.0f, max = 0.0f;
  for (int j = 0; j < n; ++j) {
    if (amax < std::fabs(x[j])) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  return max;
}

// Smallest and largest element (Q4_1 / Q5_1 encoders).
inline void min_max(const float* x, int n, float* min, float* max) {
  *min = FLT_MAX;
  *max = -FLT_MAX;
  for (int j = 0; j < n; ++j) {
    if (x[j] < *min) *min = x[j];
    if (x[j] > *max) *max = x[j];
  }
}

}  // namespace

// ---------------------------------------------------------------------------------------------- encoders

void quantize_q4_0(const float* x, void* vy, int64_t n) {
  auto* y = static_cast<BlockQ4_0*>(vy);
  constexpr int qk = kQK4_0;
  for (int64_t i = 0; i < n / qk; ++i, x += qk) {
    const float max = signed_absmax(x, qk);
    const float d = max / -8;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = f2h(d);
    for (int j = 0; j < qk / 2; ++j) {
      const float x0 = x[j] * id;
      const float x1 = x[qk / 2 + j] * id;
      const int xi0 = std::min(15, static_cast<int>(x0 + 8.5f));
      const int xi1 = std::min(15, static_cast<int>(x1 + 8.5f));
      y[i].qs[j] = static_cast<uint8_t>(xi0 | (xi1 << 4));
    }
  }
}

void quantize_q4_1(const float* x, void* vy, int64_t n) {
  auto* y = static_cast<BlockQ4_1*>(vy);
  constexpr int qk = kQK4_1;
  for (int64_t i = 0; i < n / qk; ++i, x += qk) {
    float min, max;
    min_max(x, qk, &min, &max);
    const float d = (max - min) / ((1 << 4) - 1);
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = f2h(d);
    y[i].m = f2h(min);
    for (int j = 0; j < qk / 2; ++j) {
      const float x0 = (x[j] - min) * id;
      const float x1 = (x[qk / 2 + j] - min) * id;
      const int xi0 = std::min(15, static_cast<int>(x0 + 0.5f));
      const int xi1 = std::min(15, static_cast<int>(x1 + 0.5f));
      y[i].qs[j] = static_cast<uint8_t>(xi0 | (xi1 << 4));
    }
  }
}

void quantize_q5_0(const float* x, void* vy, int64_t n) {
  auto* y = static_cast<BlockQ5_0*>(vy);
  constexpr int qk = kQK5_0;
  for (int64_t i = 0; i < n / qk; ++i, x += qk) {
    const float max = signed_absmax(x, qk);
    const float d = max / -16;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = f2h(d);
    uint32_t qh = 0;
    for (int j = 0; j < qk / 2; ++j) {
      const float x0 = x[j] * id;
      const float x1 = x[qk / 2 + j] * id;
      const uint32_t xi0 = static_cast<uint32_t>(std::min(31, static_cast<int>(x0 + 16.5f)));
      const uint32_t xi1 = static_cast<uint32_t>(std::min(31, static_cast<int>(x1 + 16.5f)));
      y[i].qs[j] = static_cast<uint8_t>((xi0 & 0x0F) | ((xi1 & 0x0F) << 4));
      qh |= ((xi0 & 0x10u) >> 4) << (j + 0);
      qh |= ((xi1 & 0x10u) >> 4) << (j + qk / 2);
    }
    std::memcpy(y[i].qh, &qh, sizeof(qh));
  }
}

void quantize_q5_1(const float* x, void* vy, int64_t n) {
  auto* y = static_cast<BlockQ5_1*>(vy);
  constexpr int qk = kQK5_1;
  for (int64_t i = 0; i < n / qk; ++i, x += qk) {
    float min, max;
    min_max(x, qk, &min, &max);
    const float d = (max - min) / ((1 << 5) - 1);
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = f2h(d);
    y[i].m = f2h(min);
    uint32_t qh = 0;
    for (int j = 0; j < qk / 2; ++j) {
      const float x0 = (x[j] - min) * id;
      const float x1 = (x[qk / 2 + j] - min) * id;
      const uint32_t xi0 = static_cast<uint8_t>(static_cast<int>(x0 + 0.5f));
      const uint32_t xi1 = static_cast<uint8_t>(static_cast<int>(x1 + 0.5f));
      y[i].qs[j] = static_cast<uint8_t>((xi0 & 0x0F) | ((xi1 & 0x0F) << 4));
      qh |= ((xi0 & 0x10u) >> 4) << (j + 0);
      qh |= ((xi1 & 0x10u) >> 4) << (j + qk / 2);
    }
    std::memcpy(y[i].qh, &qh, sizeof(qh));
  }
}

void quantize_q8_0(const float* x, void* vy, int64_t n) {
  auto* y = static_cast<BlockQ8_0*>(vy);
  for (int64_t i = 0; i < n / kQK8_0; ++i, x += kQK8_0) {
    float amax = 0.0f;
    for (int j = 0; j < kQK8_0; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / ((1 << 7) - 1);
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = f2h(d);
    for (int j = 0; j < kQK8_0; ++j) y[i].qs[j] = static_cast<int8_t>(std::round(x[j] * id));
  }
}

void quantize_q8_1(const float* x, void* vy, int64_t n) {
  auto* y = static_cast<BlockQ8_1*>(vy);
  for (int64_t i = 0; i < n / kQK8_1; ++i, x += kQK8_1) {
    float amax = 0.0f;
    for (int j = 0; j < kQK8_1; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / ((1 << 7) - 1);
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = f2h(d);
    int sum = 0;
    for (int j = 0; j < kQK8_1; ++j) {
      y[i].qs[j] = static_cast<int8_t>(std::round(x[j] * id));
      sum += y[i].qs[j];
    }
    y[i].s = f2h(static_cast<float>(sum) * d);
  }
}

void quantize_q4_K(const float* x, void* vy, int64_t n) {
  auto* y = static_cast<BlockQ4_K*>(vy);
  uint8_t L[kQK_K];
  for (int64_t i = 0; i < n / kQK_K; ++i, x += kQK_K) {
    quantize_k4_superblock(x, 15, -1.f, 20, &y[i].d, &y[i].dmin, y[i].scales, L);
    uint8_t* q = y[i].qs;
    for (int j = 0; j < kQK_K; j += 64, q += 32) {
      for (int l = 0; l < 32; ++l) q[l] = static_cast<uint8_t>(L[j + l] | (L[j + l + 32] << 4));
    }
  }
}

void quantize_q5_K(const float* x, void* vy, int64_t n) {
  auto* y = static_cast<BlockQ5_K*>(vy);
  uint8_t L[kQK_K];
  for (int64_t i = 0; i < n / kQK_K; ++i, x += kQK_K) {
    quantize_k4_superblock(x, 31, -0.5f, 15, &y[i].d, &y[i].dmin, y[i].scales, L);
    uint8_t* qh = y[i].qh;
    uint8_t* ql = y[i].qs;
    std::memset(qh, 0, kQK_K / 8);
    uint8_t m1 = 1, m2 = 2;
    for (int base = 0; base < kQK_K; base += 64, ql += 32) {
      for (int j = 0; j < 32; ++j) {
        int l1 = L[base + j];
        if (l1 > 15) {
          l1 -= 16;
          qh[j] |= m1;
        }
        int l2 = L[base + j + 32];
        if (l2 > 15) {
          l2 -= 16;
          qh[j] |= m2;
        }
        ql[j] = static_cast<uint8_t>(l1 | (l2 << 4));
      }
      m1 = static_cast<uint8_t>(m1 << 2);
      m2 = static_cast<uint8_t>(m2 << 2);
    }
  }
}

void quantize_q6_K(const float* x, void* vy, int64_t n) {
  auto* y = static_cast<BlockQ6_K*>(vy);
  int8_t L[kQK_K];
  float scales[kQK_K / 16];
  for (int64_t i = 0; i < n / kQK_K; ++i, x += kQK_K) {
    float max_scale = 0;
    float max_abs_scale = 0;
    for (int ib = 0; ib < kQK_K / 16; ++ib) {
      const float scale = make_qx_quants(16, 32, x + 16 * ib, L + 16 * ib, 1);
      scales[ib] = scale;
      const float abs_scale = std::fabs(scale);
      if (abs_scale > max_abs_scale) {
        max_abs_scale = abs_scale;
        max_scale = scale;
      }
    }
    if (max_abs_scale < kGroupMaxEps) {
      std::memset(&y[i], 0, sizeof(BlockQ6_K));
      y[i].d = f2h(0.f);
      continue;
    }
    const float iscale = -128.f / max_scale;
    y[i].d = f2h(1 / iscale);
    for (int ib = 0; ib < kQK_K / 16; ++ib) {
      y[i].scales[ib] = static_cast<int8_t>(std::min(127, nearest_int(iscale * scales[ib])));
    }
    for (int j = 0; j < kQK_K / 16; ++j) {
      const float d = h2f(y[i].d) * static_cast<float>(y[i].scales[j]);
      if (d == 0.0f) continue;
      for (int ii = 0; ii < 16; ++ii) {
        const int l = nearest_int(x[16 * j + ii] / d);
        L[16 * j + ii] = static_cast<int8_t>(std::max(-32, std::min(31, l)) + 32);
      }
    }
    uint8_t* ql = y[i].ql;
    uint8_t* qh = y[i].qh;
    for (int j = 0; j < kQK_K; j += 128, ql += 64, qh += 32) {
      for (int l = 0; l < 32; ++l) {
        const uint8_t q1 = L[j + l + 0] & 0xF;
        const uint8_t q2 = L[j + l + 32] & 0xF;
        const uint8_t q3 = L[j + l + 64] & 0xF;
        const uint8_t q4 = L[j + l + 96] & 0xF;
        ql[l + 0] = static_cast<uint8_t>(q1 | (q3 << 4));
        ql[l + 32] = static_cast<uint8_t>(q2 | (q4 << 4));
        qh[l] = static_cast<uint8_t>((L[j + l] >> 4) | ((L[j + l + 32] >> 4) << 2) |
                                     ((L[j + l + 64] >> 4) << 4) | ((L[j + l + 96] >> 4) << 6));
      }
    }
  }
}

void quantize_q8_K(const float* x, void* vy, int64_t n) {
  auto* y = static_cast<BlockQ8_K*>(vy);
  for (int64_t i = 0; i < n / kQK_K; ++i, x += kQK_K) {
    float max = 0, amax = 0;
    for (int j = 0; j < kQK_K; ++j) {
      const float ax = std::fabs(x[j]);
      if (ax > amax) {
        amax = ax;
        max = x[j];
      }
    }
    if (amax == 0.0f) {
      std::memset(&y[i], 0, sizeof(BlockQ8_K));
      continue;
    }
    const float iscale = -127.f / max;
    for (int j = 0; j < kQK_K; ++j)
      y[i].qs[j] = static_cast<int8_t>(std::min(127, nearest_int(iscale * x[j])));
    for (int j = 0; j < kQK_K / 16; ++j) {
      int sum = 0;
      for (int ii = 0; ii < 16; ++ii) sum += y[i].qs[j * 16 + ii];
      y[i].bsums[j] = static_cast<int16_t>(sum);
    }
    y[i].d = 1 / iscale;
  }
}

void quantize_f16(const float* x, void* vy, int64_t n) {
  auto* y = static_cast<uint16_t*>(vy);
  for (int64_t i = 0; i < n; ++i) y[i] = fp32_to_fp16(x[i]);
}

void quantize_bf16(const float* x, void* vy, int64_t n) {
  auto* y = static_cast<uint16_t*>(vy);
  for (int64_t i = 0; i < n; ++i) y[i] = fp32_to_bf16(x[i]);
}

void quantize_f32(const float* x, void* vy, int64_t n) {
  std::memcpy(vy, x, static_cast<size_t>(n) * sizeof(float));
}

// ---------------------------------------------------------------------------------------------- decoders

// The 32-element formats share one decoder: y = d * q (+ m for Q4_1 / Q5_1), q from for_each_quant().
template <class B>
void dequantize_32(const void* vx, float* y, int64_t n) {
  const auto* x = static_cast<const B*>(vx);
  for (int64_t i = 0; i < n / 32; ++i, y += 32) {
    const float d = h2f(x[i].d);
    for_each_quant(x[i], [&](int e, int q) {
      if constexpr (kHasMin<B>) {
        y[e] = static_cast<float>(q) * d + h2f(x[i].m);
      } else {
        y[e] = static_cast<float>(q) * d;
      }
    });
  }
}

void dequantize_q4_0(const void* vx, float* y, int64_t n) {
  dequantize_32<BlockQ4_0>(vx, y, n);
}

void dequantize_q4_1(const void* vx, float* y, int64_t n) {
  dequantize_32<BlockQ4_1>(vx, y, n);
}

void dequantize_q5_0(const void* vx, float* y, int64_t n) {
  dequantize_32<BlockQ5_0>(vx, y, n);
}

void dequantize_q5_1(const void* vx, float* y, int64_t n) {
  dequantize_32<BlockQ5_1>(vx, y, n);
}

void dequantize_q8_0(const void* vx, float* y, int64_t n) {
  dequantize_32<BlockQ8_0>(vx, y, n);
}

void dequantize_q8_1(const void* vx, float* y, int64_t n) {
  const auto* x = static_cast<const BlockQ8_1*>(vx);
  for (int64_t i = 0; i < n / kQK8_1; ++i, y += kQK8_1) {
    const float d = h2f(x[i].d);
    for (int j = 0; j < kQK8_1; ++j) y[j] = static_cast<float>(x[i].qs[j]) * d;
  }
}

// Q4_K and Q5_K share one decoder: sub-block values are the nibble plus, for Q5_K, 16 * bit of qh.
template <class B>
void dequantize_k4(const void* vx, float* y, int64_t n) {
  constexpr bool kFifth = std::is_same_v<B, BlockQ5_K>;
  const auto* x = static_cast<const B*>(vx);
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const uint8_t* ql = x[i].qs;
    const float d = h2f(x[i].d);
    const float min = h2f(x[i].dmin);
    int is = 0;
    uint8_t sc, m;
    uint8_t u1 = 1, u2 = 2;
    for (int j = 0; j < kQK_K; j += 64, ql += 32, is += 2) {
      get_scale_min_k4(is + 0, x[i].scales, &sc, &m);
      const float d1 = d * sc, m1 = min * m;
      get_scale_min_k4(is + 1, x[i].scales, &sc, &m);
      const float d2 = d * sc, m2 = min * m;
      for (int l = 0; l < 32; ++l) {
        int hi = 0;
        if constexpr (kFifth) hi = x[i].qh[l] & u1 ? 16 : 0;
        *y++ = d1 * static_cast<float>((ql[l] & 0xF) + hi) - m1;
      }
      for (int l = 0; l < 32; ++l) {
        int hi = 0;
        if constexpr (kFifth) hi = x[i].qh[l] & u2 ? 16 : 0;
        *y++ = d2 * static_cast<float>((ql[l] >> 4) + hi) - m2;
      }
      u1 = static_cast<uint8_t>(u1 << 2);
      u2 = static_cast<uint8_t>(u2 << 2);
    }
  }
}

void dequantize_q4_K(const void* vx, float* y, int64_t n) {
  dequantize_k4<BlockQ4_K>(vx, y, n);
}

void dequantize_q5_K(const void* vx, float* y, int64_t n) {
  dequantize_k4<BlockQ5_K>(vx, y, n);
}

void dequantize_q6_K(const void* vx, float* y, int64_t n) {
  const auto* x = static_cast<const BlockQ6_K*>(vx);
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const float d = h2f(x[i].d);
    const uint8_t* ql = x[i].ql;
    const uint8_t* qh = x[i].qh;
    const int8_t* sc = x[i].scales;
    for (int base = 0; base < kQK_K; base += 128, y += 128, ql += 64, qh += 32, sc += 8) {
      for (int l = 0; l < 32; ++l) {
        const int is = l / 16;
        const int q1 = ((ql[l + 0] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
        const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int q3 = ((ql[l + 0] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        y[l + 0] = d * sc[is + 0] * static_cast<float>(q1);
        y[l + 32] = d * sc[is + 2] * static_cast<float>(q2);
        y[l + 64] = d * sc[is + 4] * static_cast<float>(q3);
        y[l + 96] = d * sc[is + 6] * static_cast<float>(q4);
      }
    }
  }
}

void dequantize_q8_K(const void* vx, float* y, int64_t n) {
  const auto* x = static_cast<const BlockQ8_K*>(vx);
  for (int64_t i = 0; i < n / kQK_K; ++i, y += kQK_K) {
    for (int j = 0; j < kQK_K; ++j) y[j] = x[i].d * static_cast<float>(x[i].qs[j]);
  }
}

void dequantize_f16(const void* vx, float* y, int64_t n) {
  const auto* x = static_cast<const uint16_t*>(vx);
  for (int64_t i = 0; i < n; ++i) y[i] = fp16_to_fp32(x[i]);
}

void dequantize_bf16(const void* vx, float* y, int64_t n) {
  const auto* x = static_cast<const uint16_t*>(vx);
  for (int64_t i = 0; i < n; ++i) y[i] = bf16_to_fp32(x[i]);
}

void dequantize_f32(const void* vx, float* y, int64_t n) {
  std::memcpy(y, vx, static_cast<size_t>(n) * sizeof(float));
}

// ---------------------------------------------------------------------------- activation quantizers

void act_q8_0(const float* x, void* vy, int64_t n) {
  auto* y = static_cast<BlockQ8_0*>(vy);
  for (int64_t i = 0; i < n / kQK8_0; ++i, x += kQK8_0) {
    float amax = 0.0f;
    for (int j = 0; j < kQK8_0; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / 127.f;
    y[i].d = f2h(d);
    const float id = amax != 0.0f ? 127.f / amax : 0.0f;
    for (int j = 0; j < kQK8_0; ++j) y[i].qs[j] = static_cast<int8_t>(std::nearbyint(x[j] * id));
  }
}

void act_q8_1(const float* x, void* vy, int64_t n) {
  auto* y = static_cast<BlockQ8_1*>(vy);
  for (int64_t i = 0; i < n / kQK8_1; ++i, x += kQK8_1) {
    float amax = 0.0f;
    for (int j = 0; j < kQK8_1; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / 127.f;
    y[i].d = f2h(d);
    const float id = amax != 0.0f ? 127.f / amax : 0.0f;
    int sum = 0;
    for (int j = 0; j < kQK8_1; ++j) {
      y[i].qs[j] = static_cast<int8_t>(std::nearbyint(x[j] * id));
      sum += y[i].qs[j];
    }
    y[i].s = f2h(d * static_cast<float>(sum));
  }
}

void act_q8_K(const float* x, void* y, int64_t n) {
  quantize_q8_K(x, y, n);
}
void act_f16(const float* x, void* y, int64_t n) {
  quantize_f16(x, y, n);
}
void act_bf16(const float* x, void* y, int64_t n) {
  quantize_bf16(x, y, n);
}
void act_f32(const float* x, void* y, int64_t n) {
  quantize_f32(x, y, n);
}

// ---------------------------------------------------------------------------------------------- dots

// The 32-element formats share one dot: per block the exact sum of q * x, then
// sumf += (float)sumi * (d_w * d_x) (+ m_w * s_x against Q8_1 activations, whose s = d * sum(q)).
template <class WB, class XB>
void vec_dot_32(int64_t n, float* s, const void* vw, const void* vx) {
  const auto* w = static_cast<const WB*>(vw);
  const auto* x = static_cast<const XB*>(vx);
  float sumf = 0;
  for (int64_t ib = 0; ib < n / 32; ++ib) {
    int sumi = 0;
    for_each_quant(w[ib], [&](int e, int q) { sumi += q * x[ib].qs[e]; });
    if constexpr (kHasMin<WB>) {
      sumf += static_cast<float>(sumi) * (h2f(w[ib].d) * h2f(x[ib].d)) + h2f(w[ib].m) * h2f(x[ib].s);
    } else {
      sumf += static_cast<float>(sumi) * (h2f(w[ib].d) * h2f(x[ib].d));
    }
  }
  *s = sumf;
}

void vec_dot_q4_0_q8_0(int64_t n, float* s, const void* vw, const void* vx) {
  vec_dot_32<BlockQ4_0, BlockQ8_0>(n, s, vw, vx);
}

void vec_dot_q4_1_q8_1(int64_t n, float* s, const void* vw, const void* vx) {
  vec_dot_32<BlockQ4_1, BlockQ8_1>(n, s, vw, vx);
}

void vec_dot_q5_0_q8_0(int64_t n, float* s, const void* vw, const void* vx) {
  vec_dot_32<BlockQ5_0, BlockQ8_0>(n, s, vw, vx);
}

void vec_dot_q5_1_q8_1(int64_t n, float* s, const void* vw, const void* vx) {
  vec_dot_32<BlockQ5_1, BlockQ8_1>(n, s, vw, vx);
}

void vec_dot_q8_0_q8_0(int64_t n, float* s, const void* vw, const void* vx) {
  vec_dot_32<BlockQ8_0, BlockQ8_0>(n, s, vw, vx);
}

// K-quants: per super-block, exact integer sums of scale * (q . x) and min * bsum, then
// sumf += d * sumi - dmin * summ with d = fp16(w.d) * x.d. Q4_K and Q5_K share it: a value is the
// nibble plus, for Q5_K, 16 * bit j of qh[l].
template <class B>
void vec_dot_k4(int64_t n, float* s, const void* vw, const void* vx) {
  constexpr bool kFifth = std::is_same_v<B, BlockQ5_K>;
  const auto* w = static_cast<const B*>(vw);
  const auto* x = static_cast<const BlockQ8_K*>(vx);
  float sumf = 0;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    int32_t sumi = 0, summ = 0;
    for (int j = 0; j < 8; ++j) {
      uint8_t sc, m;
      get_scale_min_k4(j, w[i].scales, &sc, &m);
      const uint8_t* q = w[i].qs + 32 * (j / 2);
      const int8_t* a = x[i].qs + 32 * j;
      int32_t dot = 0;
      for (int l = 0; l < 32; ++l) {
        const int lo = (j & 1) ? (q[l] >> 4) : (q[l] & 0xF);
        int hi = 0;
        if constexpr (kFifth) hi = (w[i].qh[l] >> j) & 1;
        dot += (lo | (hi << 4)) * a[l];
      }
      sumi += sc * dot;
      summ += m * (x[i].bsums[2 * j] + x[i].bsums[2 * j + 1]);
    }
    const float d = h2f(w[i].d) * x[i].d;
    const float dmin = h2f(w[i].dmin) * x[i].d;
    sumf += d * static_cast<float>(sumi) - dmin * static_cast<float>(summ);
  }
  *s = sumf;
}

void vec_dot_q4_K_q8_K(int64_t n, float* s, const void* vw, const void* vx) {
  vec_dot_k4<BlockQ4_K>(n, s, vw, vx);
}

void vec_dot_q5_K_q8_K(int64_t n, float* s, const void* vw, const void* vx) {
  vec_dot_k4<BlockQ5_K>(n, s, vw, vx);
}

void vec_dot_q6_K_q8_K(int64_t n, float* s, const void* vw, const void* vx) {
  const auto* w = static_cast<const BlockQ6_K*>(vw);
  const auto* x = static_cast<const BlockQ8_K*>(vx);
  float sumf = 0;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    int32_t sumi = 0;
    for (int half = 0; half < 2; ++half) {
      const uint8_t* ql = w[i].ql + 64 * half;
      const uint8_t* qh = w[i].qh + 32 * half;
      const int8_t* sc = w[i].scales + 8 * half;
      const int8_t* a = x[i].qs + 128 * half;
      for (int g = 0; g < 8; ++g) {  // 16-element groups: g/2 selects the 32-quarter, g%2 the half of it
        const int quarter = g / 2;
        int32_t dot = 0;
        for (int l = 16 * (g % 2); l < 16 * (g % 2) + 16; ++l) {
          const int lo = quarter == 0   ? (ql[l] & 0xF)
                         : quarter == 1 ? (ql[l + 32] & 0xF)
                         : quarter == 2 ? (ql[l] >> 4)
                                        : (ql[l + 32] >> 4);
          const int hi = (qh[l] >> (2 * quarter)) & 3;
          dot += ((lo | (hi << 4)) - 32) * a[32 * quarter + l];
        }
        sumi += sc[2 * quarter + g % 2] * dot;
      }
    }
    sumf += h2f(w[i].d) * x[i].d * static_cast<float>(sumi);
  }
  *s = sumf;
}

void vec_dot_f16_f16(int64_t n, float* s, const void* vw, const void* vx) {
  const auto* w = static_cast<const uint16_t*>(vw);
  const auto* x = static_cast<const uint16_t*>(vx);
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(fp16_to_fp32(w[i]) * fp16_to_fp32(x[i]));
  *s = static_cast<float>(sum);
}

void vec_dot_bf16_bf16(int64_t n, float* s, const void* vw, const void* vx) {
  const auto* w = static_cast<const uint16_t*>(vw);
  const auto* x = static_cast<const uint16_t*>(vx);
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(bf16_to_fp32(w[i]) * bf16_to_fp32(x[i]));
  *s = static_cast<float>(sum);
}

void vec_dot_f32_f32(int64_t n, float* s, const void* vw, const void* vx) {
  const auto* w = static_cast<const float*>(vw);
  const auto* x = static_cast<const float*>(vx);
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(w[i] * x[i]);
  *s = static_cast<float>(sum);
}

}  // namespace minfer::quant::ref
