// Repacked ("x8") GEMM at the AVX2 level (no VNNI): the row-interleaved layouts of repack_layouts.inc,
// with vpmaddubsw (u8 x s8 -> pairs summed into i16, saturating) and vpmaddwd (i16 pairs -> i32) in
// place of vpdpbusd. A 32-byte vector holds 4 consecutive quants of each of 8 rows, so one maddubs with a
// broadcast activation word gives each row two i16 partial sums and one madd folds them into that row's
// i32 lane. Integer sums are exact (the bounds are proved at each kernel), and the float part is
// the AVX-512 kernels' (i.e. the scalar reference's) operation for operation, so results are bitwise
// equal to reference.cpp at every level. This file alone is compiled with -mavx2 -mfma -mf16c.
#include <immintrin.h>

#include <cstring>

#include "quant/blocks.h"
#include "quant/kernels/kernels.h"

namespace minfer::kernels::avx2 {
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

#include "quant/kernels/x86_avx2/repack_layouts.inc"

// 8 fp16 scales -> 8 floats (exact).
inline __m256 load_h8(const uint16_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
inline __m256i load256(const void* p) {
  return _mm256_loadu_si256(static_cast<const __m256i*>(p));
}
inline __m256i bcast4(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm256_set1_epi32(v);
}
// u8 weights (8 rows x 4) times the broadcast activation word: per row, two i16 sums of two products.
inline __m256i mul_pairs(__m256i w, const int8_t* x) {
  return _mm256_maddubs_epi16(w, bcast4(x));
}
// i16 lane pairs -> one i32 per row.
inline __m256i sum_pairs(__m256i p) {
  return _mm256_madd_epi16(p, _mm256_set1_epi16(1));
}
// 8 per-row u8 (or s8) scales -> the scale in both i16 halves of each row's 32-bit lane, for
// madd(i16 pair sums, scale) = scale * (sum of the pair).
inline __m256i scale_pairs_u8(const uint8_t* p) {
  const __m256i v = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
  return _mm256_or_si256(v, _mm256_slli_epi32(v, 16));
}
inline __m256i scale_pairs_s8(const int8_t* p) {
  const __m256i v = _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
  return _mm256_or_si256(_mm256_and_si256(v, _mm256_set1_epi32(0xFFFF)), _mm256_slli_epi32(v, 16));
}
// Two sub-blocks' per-row u8 (or s8) values, a[r] and b[r], as row r's i16 pair (a[r], b[r]).
inline __m256i interleave_u8(const uint8_t* a, const uint8_t* b) {
  const __m128i lo = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(a));
  const __m128i hi = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(b));
  return _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(lo, hi));
}
inline __m256i interleave_s8(const int8_t* a, const int8_t* b) {
  const __m128i lo = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(a));
  const __m128i hi = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(b));
  return _mm256_cvtepi8_epi16(_mm_unpacklo_epi8(lo, hi));
}
// Two consecutive i16 values as one broadcast 32-bit word (madd's second operand).
inline __m256i bcast_i16x2(const int16_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm256_set1_epi32(v);
}

// Q5_0's 32-bit mask of 5th bits (bit i = byte i of the quant vector) -> 0x10 in the bytes whose bit is set.
inline __m256i high_bits_0x10(uint32_t mask) {
  const __m256i byte_of_bit = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2,
                                               2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
  const __m256i bit = _mm256_set1_epi64x(0x8040201008040201);
  const __m256i v =
      _mm256_and_si256(_mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int32_t>(mask)), byte_of_bit), bit);
  return _mm256_and_si256(_mm256_cmpeq_epi8(v, bit), _mm256_set1_epi8(0x10));
}

template <int NC>
inline void store_rows(const __m256* acc, int nr, float* y, size_t ldy) {
  alignas(32) float out[R];
  for (int c = 0; c < NC; ++c) {
    _mm256_store_ps(out, acc[c]);
    std::memcpy(y + c * ldy, out, static_cast<size_t>(nr) * sizeof(float));
  }
}

// Q8_0 activations (ActBlockInfo) with the per-block float update of the reference:
// acc += (float)sumi * (d_w * d_x).
inline __m256 q8_update(__m256 acc, __m256i sumi, __m256 dw, const ActBlockInfo& xi) {
  const __m256 d = _mm256_mul_ps(dw, _mm256_set1_ps(xi.d));
  return _mm256_add_ps(acc, _mm256_mul_ps(_mm256_cvtepi32_ps(sumi), d));
}

// Q4_0: nibbles 0..15 (q + 8), activation byte offsets of the 8 unpacked vectors (lo/hi interleaved).
constexpr int kNibbleOffset[8] = {0, 16, 4, 20, 8, 24, 12, 28};

template <int NC>
void gemm_q4_0_cols(int64_t k, const Q4x8* grp, int nr, const uint8_t* x, size_t xs,
                    const ActBlockInfo* xinfo, size_t xss, float* y, size_t ldy) {
  const int64_t nb = k / 32;
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  __m256 acc[NC];
  for (int c = 0; c < NC; ++c) acc[c] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const Q4x8& g = grp[b];
    __m256i w[8];
    for (int j = 0; j < 4; ++j) {
      const __m256i v = load256(g.q[j]);
      w[2 * j] = _mm256_and_si256(v, m4);
      w[2 * j + 1] = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
    }
    const __m256 dw = load_h8(g.d);
    for (int c = 0; c < NC; ++c) {
      const int8_t* xq = reinterpret_cast<const BlockQ8_0*>(x + c * xs)[b].qs;
      // No saturation or wrap: a lane sums 2 products per maddubs, 16 over the 8 vectors, each
      // |q * x| <= 15 * 128, so |sum| <= 30720 < 32767 for any s8 activation.
      __m256i p = mul_pairs(w[0], xq);
      for (int j = 1; j < 8; ++j) p = _mm256_add_epi16(p, mul_pairs(w[j], xq + kNibbleOffset[j]));
      const __m256i s = _mm256_add_epi32(sum_pairs(p), _mm256_set1_epi32(xinfo[c * xss + b].offset_sum));
      acc[c] = q8_update(acc[c], s, dw, xinfo[c * xss + b]);
    }
  }
  store_rows<NC>(acc, nr, y, ldy);
}

// Q5_0: Q4_0's nibbles plus 16 where the row's 5th bit is set (0..31, q + 16).
template <int NC>
void gemm_q5_0_cols(int64_t k, const Q5x8* grp, int nr, const uint8_t* x, size_t xs,
                    const ActBlockInfo* xinfo, size_t xss, float* y, size_t ldy) {
  const int64_t nb = k / 32;
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  __m256 acc[NC];
  for (int c = 0; c < NC; ++c) acc[c] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const Q5x8& g = grp[b];
    __m256i w[8];
    for (int j = 0; j < 4; ++j) {
      const __m256i v = load256(g.q[j]);
      w[2 * j] = _mm256_or_si256(_mm256_and_si256(v, m4), high_bits_0x10(g.hmask[j]));
      w[2 * j + 1] =
          _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(v, 4), m4), high_bits_0x10(g.hmask[4 + j]));
    }
    const __m256 dw = load_h8(g.d);
    for (int c = 0; c < NC; ++c) {
      const int8_t* xq = reinterpret_cast<const BlockQ8_0*>(x + c * xs)[b].qs;
      // Two i16 sums of 4 vectors each: 8 products of |q * x| <= 31 * 128 per lane, |sum| <= 31744.
      __m256i p0 = mul_pairs(w[0], xq);
      __m256i p1 = mul_pairs(w[4], xq + kNibbleOffset[4]);
      for (int j = 1; j < 4; ++j) {
        p0 = _mm256_add_epi16(p0, mul_pairs(w[j], xq + kNibbleOffset[j]));
        p1 = _mm256_add_epi16(p1, mul_pairs(w[4 + j], xq + kNibbleOffset[4 + j]));
      }
      __m256i s = _mm256_add_epi32(sum_pairs(p0), sum_pairs(p1));
      s = _mm256_add_epi32(s, _mm256_set1_epi32(xinfo[c * xss + b].offset_sum));
      acc[c] = q8_update(acc[c], s, dw, xinfo[c * xss + b]);
    }
  }
  store_rows<NC>(acc, nr, y, ldy);
}

// Q8_0, stored signed (offset 0). maddubs needs an unsigned operand, so it takes |q| and the activation
// with q's sign moved onto it (psignb: x negated where q < 0, zeroed where q == 0): |q| * sign(q) x = q x.
// No saturation: |q| <= 128 and |x| <= 127 (the Q8_0 activation quantizer's range, which also keeps
// psignb away from -128), so a pair sums to at most 2 * 128 * 127 = 32512 < 32767. Two pairs could
// exceed it, so every maddubs is widened to i32 by its own madd.
template <int NC>
void gemm_q8_0_cols(int64_t k, const Q8x8* grp, int nr, const uint8_t* x, size_t xs,
                    const ActBlockInfo* xinfo, size_t xss, float* y, size_t ldy) {
  const int64_t nb = k / 32;
  __m256 acc[NC];
  for (int c = 0; c < NC; ++c) acc[c] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const Q8x8& g = grp[b];
    __m256i aw[8];
    for (int j = 0; j < 8; ++j) aw[j] = _mm256_abs_epi8(load256(g.q[j]));
    const __m256 dw = load_h8(g.d);
    for (int c = 0; c < NC; ++c) {
      const int8_t* xq = reinterpret_cast<const BlockQ8_0*>(x + c * xs)[b].qs;
      __m256i s = _mm256_setzero_si256();
      for (int j = 0; j < 8; ++j) {
        const __m256i sx = _mm256_sign_epi8(bcast4(xq + 4 * j), load256(g.q[j]));
        s = _mm256_add_epi32(s, sum_pairs(_mm256_maddubs_epi16(aw[j], sx)));
      }
      acc[c] = q8_update(acc[c], s, dw, xinfo[c * xss + b]);
    }
  }
  store_rows<NC>(acc, nr, y, ldy);
}

// Q4_1 / Q5_1 (x Q8_1): unsigned quants without offset, plus the rows' mins:
// per block, (float)sum(q*x) * (d_w*d_x) + m_w*s_x, as the scalar reference.
template <class G, int NC>
void gemm_min_cols(int64_t k, const G* grp, int nr, const uint8_t* x, size_t xs, const ActBlockInfo*, size_t,
                   float* y, size_t ldy) {
  constexpr bool kNibbles = sizeof(G::q) == 4 * 32;
  const int64_t nb = k / 32;
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  __m256 acc[NC];
  for (int c = 0; c < NC; ++c) acc[c] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const G& g = grp[b];
    const __m256 dw = load_h8(g.d);
    const __m256 mw = load_h8(g.m);
    __m256i w[8];
    if constexpr (kNibbles) {
      for (int j = 0; j < 4; ++j) {
        const __m256i v = load256(g.q[j]);
        w[2 * j] = _mm256_and_si256(v, m4);
        w[2 * j + 1] = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
      }
    } else {
      for (int j = 0; j < 8; ++j) w[j] = load256(g.q[j]);
    }
    for (int c = 0; c < NC; ++c) {
      const auto* xb = reinterpret_cast<const BlockQ8_1*>(x + c * xs) + b;
      __m256i s;
      if constexpr (kNibbles) {  // |sum| <= 16 * 15 * 128 = 30720, as Q4_0
        __m256i p = mul_pairs(w[0], xb->qs);
        for (int j = 1; j < 8; ++j) p = _mm256_add_epi16(p, mul_pairs(w[j], xb->qs + kNibbleOffset[j]));
        s = sum_pairs(p);
      } else {  // Q5_1 bytes 0..31, vector j = elements 4j..4j+3: two sums of 4 vectors (<= 31744), as Q5_0
        __m256i p0 = mul_pairs(w[0], xb->qs);
        __m256i p1 = mul_pairs(w[4], xb->qs + 16);
        for (int j = 1; j < 4; ++j) {
          p0 = _mm256_add_epi16(p0, mul_pairs(w[j], xb->qs + 4 * j));
          p1 = _mm256_add_epi16(p1, mul_pairs(w[4 + j], xb->qs + 16 + 4 * j));
        }
        s = _mm256_add_epi32(sum_pairs(p0), sum_pairs(p1));
      }
      const __m256 t1 = _mm256_mul_ps(_mm256_cvtepi32_ps(s), _mm256_mul_ps(dw, _mm256_set1_ps(h2f(xb->d))));
      const __m256 t2 = _mm256_mul_ps(mw, _mm256_set1_ps(h2f(xb->s)));
      acc[c] = _mm256_add_ps(acc[c], _mm256_add_ps(t1, t2));
    }
  }
  store_rows<NC>(acc, nr, y, ldy);
}

// ------------------------------------------------------------------------------------------ K-quants
// Q8_K activations (256 per block, with 16-element bsums); xinfo is unused.

// Q4_K / Q5_K mins: summ[r] = sum_j mn[j][r] * (bsums[2j] + bsums[2j+1]), as madd over sub-block pairs.
// |bsums[2j] + bsums[2j+1]| <= 32 * 128 fits i16; the products are exact in i32.
struct MinPairs {
  __m256i v[4];  // row r's (mn[2i][r], mn[2i+1][r]) as i16
};
inline MinPairs min_pairs(const uint8_t (*mn)[R]) {
  MinPairs m;
  for (int i = 0; i < 4; ++i) m.v[i] = interleave_u8(mn[2 * i], mn[2 * i + 1]);
  return m;
}
inline __m256i min_sum(const MinPairs& m, const BlockQ8_K* xb) {
  __m256i summ = _mm256_setzero_si256();
  for (int i = 0; i < 4; ++i) {
    const int16_t pair[2] = {static_cast<int16_t>(xb->bsums[4 * i] + xb->bsums[4 * i + 1]),
                             static_cast<int16_t>(xb->bsums[4 * i + 2] + xb->bsums[4 * i + 3])};
    summ = _mm256_add_epi32(summ, _mm256_madd_epi16(m.v[i], bcast_i16x2(pair)));
  }
  return summ;
}
// The reference's super-block update: acc += (d_w d_x) * sumi - (dmin_w d_x) * summ.
inline __m256 k_update(__m256 acc, __m256 dw, __m256 dmw, float xd_s, __m256i sumi, __m256i summ) {
  const __m256 xd = _mm256_set1_ps(xd_s);
  const __m256 t1 = _mm256_mul_ps(_mm256_mul_ps(dw, xd), _mm256_cvtepi32_ps(sumi));
  const __m256 t2 = _mm256_mul_ps(_mm256_mul_ps(dmw, xd), _mm256_cvtepi32_ps(summ));
  return _mm256_add_ps(acc, _mm256_sub_ps(t1, t2));
}

// Q4_K: per 64-element chunk, 8 vectors whose low nibbles are sub-block 2j and high nibbles 2j+1.
// Each sub-block's 8 maddubs sum in i16 (|sum| <= 30720, as Q4_0), then madd with the 6-bit scale.
template <int NC>
void gemm_q4_K_cols(int64_t k, const Q4Kx8* grp, int nr, const uint8_t* x, size_t xs, const ActBlockInfo*,
                    size_t, float* y, size_t ldy) {
  const int64_t nb = k / 256;
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  __m256 acc[NC];
  for (int c = 0; c < NC; ++c) acc[c] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const Q4Kx8& g = grp[b];
    const BlockQ8_K* xb[NC];
    for (int c = 0; c < NC; ++c) xb[c] = reinterpret_cast<const BlockQ8_K*>(x + c * xs) + b;
    __m256i sumi[NC];
    for (int c = 0; c < NC; ++c) sumi[c] = _mm256_setzero_si256();
    for (int sb = 0; sb < 8; ++sb) {
      const int j = sb / 2;
      __m256i w[8];
      for (int t = 0; t < 8; ++t) {
        const __m256i v = load256(g.q[j][t]);
        w[t] = _mm256_and_si256(sb % 2 == 0 ? v : _mm256_srli_epi16(v, 4), m4);
      }
      const __m256i sc = scale_pairs_u8(g.sc[sb]);
      for (int c = 0; c < NC; ++c) {
        const int8_t* xq = xb[c]->qs + 32 * sb;
        __m256i p = mul_pairs(w[0], xq);
        for (int t = 1; t < 8; ++t) p = _mm256_add_epi16(p, mul_pairs(w[t], xq + 4 * t));
        sumi[c] = _mm256_add_epi32(sumi[c], _mm256_madd_epi16(p, sc));
      }
    }
    const MinPairs mins = min_pairs(g.mn);
    const __m256 dw = _mm256_loadu_ps(g.d);
    const __m256 dmw = _mm256_loadu_ps(g.dmin);
    for (int c = 0; c < NC; ++c) acc[c] = k_update(acc[c], dw, dmw, xb[c]->d, sumi[c], min_sum(mins, xb[c]));
  }
  store_rows<NC>(acc, nr, y, ldy);
}

// Q5_K: bytes 0..31, 8 vectors per sub-block: two i16 sums of 4 (<= 31744, as Q5_0), madd with the scale.
template <int NC>
void gemm_q5_K_cols(int64_t k, const Q5Kx8* grp, int nr, const uint8_t* x, size_t xs, const ActBlockInfo*,
                    size_t, float* y, size_t ldy) {
  const int64_t nb = k / 256;
  __m256 acc[NC];
  for (int c = 0; c < NC; ++c) acc[c] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const Q5Kx8& g = grp[b];
    const BlockQ8_K* xb[NC];
    for (int c = 0; c < NC; ++c) xb[c] = reinterpret_cast<const BlockQ8_K*>(x + c * xs) + b;
    __m256i sumi[NC];
    for (int c = 0; c < NC; ++c) sumi[c] = _mm256_setzero_si256();
    for (int sb = 0; sb < 8; ++sb) {
      const __m256i sc = scale_pairs_u8(g.sc[sb]);
      for (int c = 0; c < NC; ++c) {
        const int8_t* xq = xb[c]->qs + 32 * sb;
        __m256i p0 = mul_pairs(load256(g.q[8 * sb]), xq);
        __m256i p1 = mul_pairs(load256(g.q[8 * sb + 4]), xq + 16);
        for (int t = 1; t < 4; ++t) {
          p0 = _mm256_add_epi16(p0, mul_pairs(load256(g.q[8 * sb + t]), xq + 4 * t));
          p1 = _mm256_add_epi16(p1, mul_pairs(load256(g.q[8 * sb + 4 + t]), xq + 16 + 4 * t));
        }
        sumi[c] =
            _mm256_add_epi32(sumi[c], _mm256_add_epi32(_mm256_madd_epi16(p0, sc), _mm256_madd_epi16(p1, sc)));
      }
    }
    const MinPairs mins = min_pairs(g.mn);
    const __m256 dw = _mm256_loadu_ps(g.d);
    const __m256 dmw = _mm256_loadu_ps(g.dmin);
    for (int c = 0; c < NC; ++c) acc[c] = k_update(acc[c], dw, dmw, xb[c]->d, sumi[c], min_sum(mins, xb[c]));
  }
  store_rows<NC>(acc, nr, y, ldy);
}

// Q6_K: bytes 0..63 (q + 32), 4 vectors per 16-element group, summed two by two in i16
// (4 products of |q * x| <= 63 * 128 per lane: <= 32256), then madd with the signed 8-bit group scale.
// The offset comes off once per super-block: sum_g sc_g * 32 * bsums[g] (madd over group pairs).
template <int NC>
void gemm_q6_K_cols(int64_t k, const Q6Kx8* grp, int nr, const uint8_t* x, size_t xs, const ActBlockInfo*,
                    size_t, float* y, size_t ldy) {
  const int64_t nb = k / 256;
  __m256 acc[NC];
  for (int c = 0; c < NC; ++c) acc[c] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const Q6Kx8& g = grp[b];
    const BlockQ8_K* xb[NC];
    for (int c = 0; c < NC; ++c) xb[c] = reinterpret_cast<const BlockQ8_K*>(x + c * xs) + b;
    __m256i sumi[NC];
    for (int c = 0; c < NC; ++c) sumi[c] = _mm256_setzero_si256();
    for (int g16 = 0; g16 < 16; ++g16) {
      __m256i w[4];
      for (int t = 0; t < 4; ++t) w[t] = load256(g.q[4 * g16 + t]);
      const __m256i sc = scale_pairs_s8(g.sc[g16]);
      for (int c = 0; c < NC; ++c) {
        const int8_t* xq = xb[c]->qs + 16 * g16;
        const __m256i p0 = _mm256_add_epi16(mul_pairs(w[0], xq), mul_pairs(w[1], xq + 4));
        const __m256i p1 = _mm256_add_epi16(mul_pairs(w[2], xq + 8), mul_pairs(w[3], xq + 12));
        sumi[c] =
            _mm256_add_epi32(sumi[c], _mm256_add_epi32(_mm256_madd_epi16(p0, sc), _mm256_madd_epi16(p1, sc)));
      }
    }
    // sum_g sc_g * bsums[g]: |bsums| <= 16 * 128 fits i16 (the pair is read straight from bsums).
    __m256i scp[8];
    for (int i = 0; i < 8; ++i) scp[i] = interleave_s8(g.sc[2 * i], g.sc[2 * i + 1]);
    const __m256 dw = _mm256_loadu_ps(g.d);
    for (int c = 0; c < NC; ++c) {
      __m256i corr = _mm256_setzero_si256();
      for (int i = 0; i < 8; ++i)
        corr = _mm256_add_epi32(corr, _mm256_madd_epi16(scp[i], bcast_i16x2(xb[c]->bsums + 2 * i)));
      const __m256i s = _mm256_sub_epi32(sumi[c], _mm256_slli_epi32(corr, 5));
      // Reference order: (d_w * d_x) * sumi.
      acc[c] = _mm256_add_ps(
          acc[c], _mm256_mul_ps(_mm256_mul_ps(dw, _mm256_set1_ps(xb[c]->d)), _mm256_cvtepi32_ps(s)));
    }
  }
  store_rows<NC>(acc, nr, y, ldy);
}

// Tokens in passes of 4 (the unpacked weight block shared by the pass), the rest in one pass of 1-3:
// small batches (decode steps of a few sequences) unpack each weight block once.
template <class G, template <int> class K>
void gemm(int64_t k, const void* group, int nr, const void* vx, size_t xs, const ActBlockInfo* xinfo,
          size_t xss, int nc, float* y, size_t ldy) {
  const auto* g = static_cast<const G*>(group);
  const auto* x = static_cast<const uint8_t*>(vx);
  int c = 0;
  for (; c + 4 <= nc; c += 4) K<4>::run(k, g, nr, x + c * xs, xs, xinfo + c * xss, xss, y + c * ldy, ldy);
  switch (nc - c) {
    case 3:
      K<3>::run(k, g, nr, x + c * xs, xs, xinfo + c * xss, xss, y + c * ldy, ldy);
      break;
    case 2:
      K<2>::run(k, g, nr, x + c * xs, xs, xinfo + c * xss, xss, y + c * ldy, ldy);
      break;
    case 1:
      K<1>::run(k, g, nr, x + c * xs, xs, xinfo + c * xss, xss, y + c * ldy, ldy);
      break;
    default:
      break;
  }
}

#define MINFER_COLS_KERNEL(Name, Fn)                                                                       \
  template <int NC>                                                                                        \
  struct Name {                                                                                            \
    template <class G>                                                                                     \
    static void run(int64_t k, const G* g, int nr, const uint8_t* x, size_t xs, const ActBlockInfo* xinfo, \
                    size_t xss, float* y, size_t ldy) {                                                    \
      Fn(k, g, nr, x, xs, xinfo, xss, y, ldy);                                                             \
    }                                                                                                      \
  };
MINFER_COLS_KERNEL(KQ8_0, gemm_q8_0_cols<NC>)
MINFER_COLS_KERNEL(KQ4_0, gemm_q4_0_cols<NC>)
MINFER_COLS_KERNEL(KQ5_0, gemm_q5_0_cols<NC>)
MINFER_COLS_KERNEL(KQ4_1, (gemm_min_cols<Q4x8m, NC>))
MINFER_COLS_KERNEL(KQ5_1, (gemm_min_cols<Q8x8m, NC>))
MINFER_COLS_KERNEL(KQ4_K, gemm_q4_K_cols<NC>)
MINFER_COLS_KERNEL(KQ5_K, gemm_q5_K_cols<NC>)
MINFER_COLS_KERNEL(KQ6_K, gemm_q6_K_cols<NC>)
#undef MINFER_COLS_KERNEL

// Q8_0 is packed signed here (act_offset 0: the sign trick needs no offset correction).
const RepackKernels kQ8_0x8{packed_bytes<Q8x8>, pack_q8_0<0>, gemm<Q8x8, KQ8_0>, 0};
const RepackKernels kQ5_0x8{packed_bytes<Q5x8>, pack_q5_0, gemm<Q5x8, KQ5_0>, 16};
const RepackKernels kQ4_0x8{packed_bytes<Q4x8>, pack_q4_0, gemm<Q4x8, KQ4_0>, 8};
const RepackKernels kQ4_1x8{packed_bytes<Q4x8m>, pack_q4_1, gemm<Q4x8m, KQ4_1>};
const RepackKernels kQ5_1x8{packed_bytes<Q8x8m>, pack_q5_1, gemm<Q8x8m, KQ5_1>};
const RepackKernels kQ4_Kx8{packed_bytes_q4_K, pack_q4_K, gemm<Q4Kx8, KQ4_K>};
const RepackKernels kQ5_Kx8{packed_bytes_q5_K, pack_q5_K, gemm<Q5Kx8, KQ5_K>};
const RepackKernels kQ6_Kx8{packed_bytes_q6_K, pack_q6_K, gemm<Q6Kx8, KQ6_K>};

}  // namespace

void fill_repack(CpuKernels& k) {
  k.types[static_cast<uint32_t>(DType::Q8_0)].repack = &kQ8_0x8;
  k.types[static_cast<uint32_t>(DType::Q4_0)].repack = &kQ4_0x8;
  k.types[static_cast<uint32_t>(DType::Q5_0)].repack = &kQ5_0x8;
  k.types[static_cast<uint32_t>(DType::Q4_1)].repack = &kQ4_1x8;
  k.types[static_cast<uint32_t>(DType::Q5_1)].repack = &kQ5_1x8;
  k.types[static_cast<uint32_t>(DType::Q4_K)].repack = &kQ4_Kx8;
  k.types[static_cast<uint32_t>(DType::Q5_K)].repack = &kQ5_Kx8;
  k.types[static_cast<uint32_t>(DType::Q6_K)].repack = &kQ6_Kx8;
}

}  // namespace minfer::kernels::avx2
