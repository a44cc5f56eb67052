// Row-interleaved ("x8") layouts of every quantized compute type and their AVX-512 VNNI GEMM (256-bit
// vectors with vpdpbusd: on Zen 4 as fast per element as 512-bit, and 32 registers for 8 rows x 4 tokens).
// Quants are stored unsigned (q + offset) so vpdpbusd(u8 weights, s8 activations) needs no sign trick;
// the offset is removed with the activation block sums: sum((q+o)*x) - o*sum(x).
#include <immintrin.h>

#include <cstring>
#include <type_traits>

#include "quant/blocks.h"
#include "quant/kernels/kernels.h"

// GCC 12's AVX-512 intrinsic headers start some results from _mm512_undefined_*(), which its
// -Wmaybe-uninitialized misreads once inlined; the values are fully written by the instruction.
// (GCC only: clang, which builds the fuzzers, has no such warning group.)
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

namespace minfer::kernels::avx512 {
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

inline __m256i bcast4(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm256_set1_epi32(v);
}

template <int NC>
void gemm_q8_0_cols(int64_t k, const Q8x8* grp, int nr, const uint8_t* x, size_t xs,
                    const ActBlockInfo* xinfo, size_t xss, float* y, size_t ldy) {
  const int64_t nb = k / 32;
  __m256 acc[NC];
  for (int c = 0; c < NC; ++c) acc[c] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const Q8x8& g = grp[b];
    __m256i w[8];
    for (int j = 0; j < 8; ++j) w[j] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(g.q[j]));
    const __m256 dw = load_h8(g.d);
    for (int c = 0; c < NC; ++c) {
      const auto* xb = reinterpret_cast<const BlockQ8_0*>(x + c * xs) + b;
      const ActBlockInfo& xi = xinfo[c * xss + b];
      __m256i s = _mm256_set1_epi32(xi.offset_sum);  // starts at -offset * sum(x)
      for (int j = 0; j < 8; ++j) s = _mm256_dpbusd_epi32(s, w[j], bcast4(xb->qs + 4 * j));
      const __m256 d = _mm256_mul_ps(dw, _mm256_set1_ps(xi.d));
      acc[c] = _mm256_add_ps(acc[c], _mm256_mul_ps(_mm256_cvtepi32_ps(s), d));
    }
  }
  alignas(32) float out[R];
  for (int c = 0; c < NC; ++c) {
    _mm256_store_ps(out, acc[c]);
    std::memcpy(y + c * ldy, out, static_cast<size_t>(nr) * sizeof(float));
  }
}

template <int NC>
void gemm_q4_0_cols(int64_t k, const Q4x8* grp, int nr, const uint8_t* x, size_t xs,
                    const ActBlockInfo* xinfo, size_t xss, float* y, size_t ldy) {
  const int64_t nb = k / 32;
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  __m256 acc[NC];
  for (int c = 0; c < NC; ++c) acc[c] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const Q4x8& g = grp[b];
    __m256i lo[4], hi[4];
    for (int j = 0; j < 4; ++j) {
      const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(g.q[j]));
      lo[j] = _mm256_and_si256(v, m4);
      hi[j] = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
    }
    const __m256 dw = load_h8(g.d);
    for (int c = 0; c < NC; ++c) {
      const auto* xb = reinterpret_cast<const BlockQ8_0*>(x + c * xs) + b;
      const ActBlockInfo& xi = xinfo[c * xss + b];
      __m256i s = _mm256_set1_epi32(xi.offset_sum);  // starts at -offset * sum(x)
      for (int j = 0; j < 4; ++j) {
        s = _mm256_dpbusd_epi32(s, lo[j], bcast4(xb->qs + 4 * j));
        s = _mm256_dpbusd_epi32(s, hi[j], bcast4(xb->qs + 16 + 4 * j));
      }
      const __m256 d = _mm256_mul_ps(dw, _mm256_set1_ps(xi.d));
      acc[c] = _mm256_add_ps(acc[c], _mm256_mul_ps(_mm256_cvtepi32_ps(s), d));
    }
  }
  alignas(32) float out[R];
  for (int c = 0; c < NC; ++c) {
    _mm256_store_ps(out, acc[c]);
    std::memcpy(y + c * ldy, out, static_cast<size_t>(nr) * sizeof(float));
  }
}

// One block's 8 row sums of unsigned weights x signed activations, for either interleaving.
inline __m256i block_dot_q8(const uint8_t (*q)[32], const int8_t* xq) {
  __m256i s = _mm256_setzero_si256();
  for (int j = 0; j < 8; ++j) {
    s = _mm256_dpbusd_epi32(s, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q[j])),
                            bcast4(xq + 4 * j));
  }
  return s;
}

template <class G, int NC>
void gemm_min_cols(int64_t k, const G* grp, int nr, const uint8_t* x, size_t xs, const ActBlockInfo*, size_t,
                   float* y, size_t ldy) {
  const int64_t nb = k / 32;
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  __m256 acc[NC];
  for (int c = 0; c < NC; ++c) acc[c] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const G& g = grp[b];
    const __m256 dw = load_h8(g.d);
    const __m256 mw = load_h8(g.m);
    __m256i lo[4], hi[4];
    if constexpr (sizeof(g.q) == 4 * 32) {
      for (int j = 0; j < 4; ++j) {
        const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(g.q[j]));
        lo[j] = _mm256_and_si256(v, m4);
        hi[j] = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
      }
    }
    for (int c = 0; c < NC; ++c) {
      const auto* xb = reinterpret_cast<const BlockQ8_1*>(x + c * xs) + b;
      __m256i s;
      if constexpr (sizeof(g.q) == 4 * 32) {
        s = _mm256_setzero_si256();
        for (int j = 0; j < 4; ++j) {
          s = _mm256_dpbusd_epi32(s, lo[j], bcast4(xb->qs + 4 * j));
          s = _mm256_dpbusd_epi32(s, hi[j], bcast4(xb->qs + 16 + 4 * j));
        }
      } else {
        s = block_dot_q8(g.q, xb->qs);
      }
      const __m256 t1 = _mm256_mul_ps(_mm256_cvtepi32_ps(s), _mm256_mul_ps(dw, _mm256_set1_ps(h2f(xb->d))));
      const __m256 t2 = _mm256_mul_ps(mw, _mm256_set1_ps(h2f(xb->s)));
      acc[c] = _mm256_add_ps(acc[c], _mm256_add_ps(t1, t2));
    }
  }
  alignas(32) float out[R];
  for (int c = 0; c < NC; ++c) {
    _mm256_store_ps(out, acc[c]);
    std::memcpy(y + c * ldy, out, static_cast<size_t>(nr) * sizeof(float));
  }
}

inline __m256i load_u8x8_epi32(const uint8_t* p) {
  return _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
}

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
    for (int j = 0; j < 4; ++j) {
      __m256i lo[8], hi[8];
      for (int t = 0; t < 8; ++t) {
        const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(g.q[j][t]));
        lo[t] = _mm256_and_si256(v, m4);
        hi[t] = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
      }
      const __m256i s_lo = load_u8x8_epi32(g.sc[2 * j]);
      const __m256i s_hi = load_u8x8_epi32(g.sc[2 * j + 1]);
      for (int c = 0; c < NC; ++c) {
        const int8_t* xq = xb[c]->qs + 64 * j;
        __m256i a = _mm256_setzero_si256(), h = _mm256_setzero_si256();
        for (int t = 0; t < 8; ++t) {
          a = _mm256_dpbusd_epi32(a, lo[t], bcast4(xq + 4 * t));
          h = _mm256_dpbusd_epi32(h, hi[t], bcast4(xq + 32 + 4 * t));
        }
        sumi[c] = _mm256_add_epi32(
            sumi[c], _mm256_add_epi32(_mm256_mullo_epi32(a, s_lo), _mm256_mullo_epi32(h, s_hi)));
      }
    }
    const __m256 dw = _mm256_loadu_ps(g.d);
    const __m256 dmw = _mm256_loadu_ps(g.dmin);
    for (int c = 0; c < NC; ++c) {
      __m256i summ = _mm256_setzero_si256();
      for (int j = 0; j < 8; ++j) {
        const int32_t bs = xb[c]->bsums[2 * j] + xb[c]->bsums[2 * j + 1];
        summ = _mm256_add_epi32(summ, _mm256_mullo_epi32(load_u8x8_epi32(g.mn[j]), _mm256_set1_epi32(bs)));
      }
      const __m256 xd = _mm256_set1_ps(xb[c]->d);
      const __m256 t1 = _mm256_mul_ps(_mm256_mul_ps(dw, xd), _mm256_cvtepi32_ps(sumi[c]));
      const __m256 t2 = _mm256_mul_ps(_mm256_mul_ps(dmw, xd), _mm256_cvtepi32_ps(summ));
      acc[c] = _mm256_add_ps(acc[c], _mm256_sub_ps(t1, t2));
    }
  }
  alignas(32) float out[R];
  for (int c = 0; c < NC; ++c) {
    _mm256_store_ps(out, acc[c]);
    std::memcpy(y + c * ldy, out, static_cast<size_t>(nr) * sizeof(float));
  }
}

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
    for (int j = 0; j < 8; ++j) {
      __m256i w[8];
      for (int t = 0; t < 8; ++t) w[t] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(g.q[8 * j + t]));
      const __m256i sc = load_u8x8_epi32(g.sc[j]);
      for (int c = 0; c < NC; ++c) {
        const int8_t* xq = xb[c]->qs + 32 * j;
        __m256i a = _mm256_setzero_si256();
        for (int t = 0; t < 8; ++t) a = _mm256_dpbusd_epi32(a, w[t], bcast4(xq + 4 * t));
        sumi[c] = _mm256_add_epi32(sumi[c], _mm256_mullo_epi32(a, sc));
      }
    }
    const __m256 dw = _mm256_loadu_ps(g.d);
    const __m256 dmw = _mm256_loadu_ps(g.dmin);
    for (int c = 0; c < NC; ++c) {
      __m256i summ = _mm256_setzero_si256();
      for (int j = 0; j < 8; ++j) {
        const int32_t bs = xb[c]->bsums[2 * j] + xb[c]->bsums[2 * j + 1];
        summ = _mm256_add_epi32(summ, _mm256_mullo_epi32(load_u8x8_epi32(g.mn[j]), _mm256_set1_epi32(bs)));
      }
      const __m256 xd = _mm256_set1_ps(xb[c]->d);
      const __m256 t1 = _mm256_mul_ps(_mm256_mul_ps(dw, xd), _mm256_cvtepi32_ps(sumi[c]));
      const __m256 t2 = _mm256_mul_ps(_mm256_mul_ps(dmw, xd), _mm256_cvtepi32_ps(summ));
      acc[c] = _mm256_add_ps(acc[c], _mm256_sub_ps(t1, t2));
    }
  }
  alignas(32) float out[R];
  for (int c = 0; c < NC; ++c) {
    _mm256_store_ps(out, acc[c]);
    std::memcpy(y + c * ldy, out, static_cast<size_t>(nr) * sizeof(float));
  }
}

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
    for (int grp16 = 0; grp16 < 16; ++grp16) {
      __m256i w[4];
      for (int t = 0; t < 4; ++t)
        w[t] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(g.q[4 * grp16 + t]));
      const __m256i sc = _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(g.sc[grp16])));
      for (int c = 0; c < NC; ++c) {
        const int8_t* xq = xb[c]->qs + 16 * grp16;
        __m256i a = _mm256_setzero_si256();
        for (int t = 0; t < 4; ++t) a = _mm256_dpbusd_epi32(a, w[t], bcast4(xq + 4 * t));
        a = _mm256_sub_epi32(a, _mm256_set1_epi32(32 * xb[c]->bsums[grp16]));
        sumi[c] = _mm256_add_epi32(sumi[c], _mm256_mullo_epi32(a, sc));
      }
    }
    const __m256 dw = _mm256_loadu_ps(g.d);
    for (int c = 0; c < NC; ++c) {
      // Reference order: (d_w * d_x) * sumi.
      const __m256 t =
          _mm256_mul_ps(_mm256_mul_ps(dw, _mm256_set1_ps(xb[c]->d)), _mm256_cvtepi32_ps(sumi[c]));
      acc[c] = _mm256_add_ps(acc[c], t);
    }
  }
  alignas(32) float out[R];
  for (int c = 0; c < NC; ++c) {
    _mm256_store_ps(out, acc[c]);
    std::memcpy(y + c * ldy, out, static_cast<size_t>(nr) * sizeof(float));
  }
}

template <int NC>
void gemm_q5_0_cols(int64_t k, const Q5x8* grp, int nr, const uint8_t* x, size_t xs,
                    const ActBlockInfo* xinfo, size_t xss, float* y, size_t ldy) {
  const int64_t nb = k / 32;
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  const __m256i b4 = _mm256_set1_epi8(0x10);
  __m256 acc[NC];
  for (int c = 0; c < NC; ++c) acc[c] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const Q5x8& g = grp[b];
    __m256i lo[4], hi[4];
    for (int j = 0; j < 4; ++j) {
      const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(g.q[j]));
      lo[j] = _mm256_and_si256(v, m4);
      hi[j] = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
      lo[j] = _mm256_mask_add_epi8(lo[j], _load_mask32(const_cast<__mmask32*>(&g.hmask[j])), lo[j], b4);
      hi[j] = _mm256_mask_add_epi8(hi[j], _load_mask32(const_cast<__mmask32*>(&g.hmask[4 + j])), hi[j], b4);
    }
    const __m256 dw = load_h8(g.d);
    for (int c = 0; c < NC; ++c) {
      const auto* xb = reinterpret_cast<const BlockQ8_0*>(x + c * xs) + b;
      const ActBlockInfo& xi = xinfo[c * xss + b];
      __m256i s = _mm256_set1_epi32(xi.offset_sum);  // starts at -offset * sum(x)
      for (int j = 0; j < 4; ++j) {
        s = _mm256_dpbusd_epi32(s, lo[j], bcast4(xb->qs + 4 * j));
        s = _mm256_dpbusd_epi32(s, hi[j], bcast4(xb->qs + 16 + 4 * j));
      }
      const __m256 d = _mm256_mul_ps(dw, _mm256_set1_ps(xi.d));
      acc[c] = _mm256_add_ps(acc[c], _mm256_mul_ps(_mm256_cvtepi32_ps(s), d));
    }
  }
  alignas(32) float out[R];
  for (int c = 0; c < NC; ++c) {
    _mm256_store_ps(out, acc[c]);
    std::memcpy(y + c * ldy, out, static_cast<size_t>(nr) * sizeof(float));
  }
}

// Two consecutive row groups at once in 512-bit registers (group g in the low half, g + 1 in the high):
// the same operations per row as the 8-row kernels (bitwise), with one instruction stream, one set of
// activation broadcasts and one float update for 16 rows. On Zen 4 the 8-row kernels were bound by
// instruction issue and loads, not by vpdpbusd: Q8_0 / Q4_0 / Q5_0 / Q4_K / Q6_K, used from 4 tokens up.
inline __m512i load_pair(const uint8_t* a, const uint8_t* b) {
  return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a))),
                            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b)), 1);
}
inline __m512 load_h16(const uint16_t* a, const uint16_t* b) {
  const __m256i h =
      _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a))),
                              _mm_loadu_si128(reinterpret_cast<const __m128i*>(b)), 1);
  return _mm512_cvtph_ps(h);
}
inline __m512i bcast4z(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm512_set1_epi32(v);
}
inline void store_rows16(const __m512* acc, int nc, int nr, float* y, size_t ldy) {
  alignas(64) float out[2 * R];
  for (int c = 0; c < nc; ++c) {
    _mm512_store_ps(out, acc[c]);
    std::memcpy(y + c * ldy, out, static_cast<size_t>(nr) * sizeof(float));
  }
}

// Unpacks block b of two row groups into 8 vectors of unsigned quants, vector j to be multiplied with
// the activation bytes at kQ8Offset<G>[j] (Q8_0: bytes; Q4_0/Q5_0: nibbles, plus Q5_0's 5th bits added
// with one masked byte add per vector).
template <class G>
constexpr int kQ8Offset[8] = {0, 4, 8, 12, 16, 20, 24, 28};
template <>
constexpr int kQ8Offset<Q4x8>[8] = {0, 16, 4, 20, 8, 24, 12, 28};
template <>
constexpr int kQ8Offset<Q5x8>[8] = {0, 16, 4, 20, 8, 24, 12, 28};

template <class G>
__attribute__((always_inline)) inline void unpack_pair(const G& g0, const G& g1, __m512i* w) {
  if constexpr (std::is_same_v<G, Q8x8>) {
    for (int j = 0; j < 8; ++j) w[j] = load_pair(g0.q[j], g1.q[j]);
  } else {
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    for (int j = 0; j < 4; ++j) {
      const __m512i v = load_pair(g0.q[j], g1.q[j]);
      w[2 * j] = _mm512_and_si512(v, m4);
      w[2 * j + 1] = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
      if constexpr (std::is_same_v<G, Q5x8>) {
        const __m512i b4 = _mm512_set1_epi8(0x10);
        const __mmask64 mlo = _cvtu64_mask64(g0.hmask[j] | (static_cast<uint64_t>(g1.hmask[j]) << 32));
        const __mmask64 mhi =
            _cvtu64_mask64(g0.hmask[4 + j] | (static_cast<uint64_t>(g1.hmask[4 + j]) << 32));
        w[2 * j] = _mm512_mask_add_epi8(w[2 * j], mlo, w[2 * j], b4);
        w[2 * j + 1] = _mm512_mask_add_epi8(w[2 * j + 1], mhi, w[2 * j + 1], b4);
      }
    }
  }
}

// Q8_0 / Q4_0 / Q5_0 (Q8_0 activations, ActBlockInfo): 16 rows x NC tokens.
template <class G, int NC>
void gemm16_q8_cols(int64_t k, const G* grp, int nr, const uint8_t* x, size_t xs, const ActBlockInfo* xinfo,
                    size_t xss, float* y, size_t ldy) {
  const int64_t nb = k / 32;
  const G* grp1 = grp + nb;
  __m512 acc[NC];
  for (int c = 0; c < NC; ++c) acc[c] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    __m512i w[8];
    unpack_pair(grp[b], grp1[b], w);
    const __m512 dw = load_h16(grp[b].d, grp1[b].d);
    for (int c = 0; c < NC; ++c) {
      const auto* xb = reinterpret_cast<const BlockQ8_0*>(x + c * xs) + b;
      const ActBlockInfo& xi = xinfo[c * xss + b];
      __m512i s = _mm512_set1_epi32(xi.offset_sum);  // starts at -offset * sum(x)
      for (int j = 0; j < 8; ++j) s = _mm512_dpbusd_epi32(s, w[j], bcast4z(xb->qs + kQ8Offset<G>[j]));
      const __m512 d = _mm512_mul_ps(dw, _mm512_set1_ps(xi.d));
      acc[c] = _mm512_add_ps(acc[c], _mm512_mul_ps(_mm512_cvtepi32_ps(s), d));
    }
  }
  store_rows16(acc, NC, nr, y, ldy);
}

inline __m512 load_f32x2(const float* a, const float* b) {  // 8 floats of each group
  return _mm512_castpd_ps(_mm512_insertf64x4(_mm512_castpd256_pd512(_mm256_castps_pd(_mm256_loadu_ps(a))),
                                             _mm256_castps_pd(_mm256_loadu_ps(b)), 1));
}
inline __m128i load_8x2(const void* a, const void* b) {  // 8 bytes of each group
  return _mm_unpacklo_epi64(_mm_loadl_epi64(static_cast<const __m128i*>(a)),
                            _mm_loadl_epi64(static_cast<const __m128i*>(b)));
}

template <int NC>
void gemm16_q4_K_cols(int64_t k, const Q4Kx8* grp, int nr, const uint8_t* x, size_t xs, const ActBlockInfo*,
                      size_t, float* y, size_t ldy) {
  const int64_t nb = k / 256;
  const Q4Kx8* grp1 = grp + nb;
  const __m512i m4 = _mm512_set1_epi8(0x0F);
  __m512 acc[NC];
  for (int c = 0; c < NC; ++c) acc[c] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const Q4Kx8& g0 = grp[b];
    const Q4Kx8& g1 = grp1[b];
    const BlockQ8_K* xb[NC];
    for (int c = 0; c < NC; ++c) xb[c] = reinterpret_cast<const BlockQ8_K*>(x + c * xs) + b;
    __m512i sumi[NC];
    for (int c = 0; c < NC; ++c) sumi[c] = _mm512_setzero_si512();
    for (int j = 0; j < 4; ++j) {
      __m512i lo[8], hi[8];
      for (int t = 0; t < 8; ++t) {
        const __m512i v = load_pair(g0.q[j][t], g1.q[j][t]);
        lo[t] = _mm512_and_si512(v, m4);
        hi[t] = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
      }
      const __m512i s_lo = _mm512_cvtepu8_epi32(load_8x2(g0.sc[2 * j], g1.sc[2 * j]));
      const __m512i s_hi = _mm512_cvtepu8_epi32(load_8x2(g0.sc[2 * j + 1], g1.sc[2 * j + 1]));
      for (int c = 0; c < NC; ++c) {
        const int8_t* xq = xb[c]->qs + 64 * j;
        __m512i a = _mm512_setzero_si512(), h = _mm512_setzero_si512();
        for (int t = 0; t < 8; ++t) {
          a = _mm512_dpbusd_epi32(a, lo[t], bcast4z(xq + 4 * t));
          h = _mm512_dpbusd_epi32(h, hi[t], bcast4z(xq + 32 + 4 * t));
        }
        sumi[c] = _mm512_add_epi32(
            sumi[c], _mm512_add_epi32(_mm512_mullo_epi32(a, s_lo), _mm512_mullo_epi32(h, s_hi)));
      }
    }
    const __m512 dw = load_f32x2(g0.d, g1.d);
    const __m512 dmw = load_f32x2(g0.dmin, g1.dmin);
    for (int c = 0; c < NC; ++c) {
      __m512i summ = _mm512_setzero_si512();
      for (int j = 0; j < 8; ++j) {
        const int32_t bs = xb[c]->bsums[2 * j] + xb[c]->bsums[2 * j + 1];
        summ = _mm512_add_epi32(summ, _mm512_mullo_epi32(_mm512_cvtepu8_epi32(load_8x2(g0.mn[j], g1.mn[j])),
                                                         _mm512_set1_epi32(bs)));
      }
      const __m512 xd = _mm512_set1_ps(xb[c]->d);
      const __m512 t1 = _mm512_mul_ps(_mm512_mul_ps(dw, xd), _mm512_cvtepi32_ps(sumi[c]));
      const __m512 t2 = _mm512_mul_ps(_mm512_mul_ps(dmw, xd), _mm512_cvtepi32_ps(summ));
      acc[c] = _mm512_add_ps(acc[c], _mm512_sub_ps(t1, t2));
    }
  }
  store_rows16(acc, NC, nr, y, ldy);
}

template <int NC>
void gemm16_q6_K_cols(int64_t k, const Q6Kx8* grp, int nr, const uint8_t* x, size_t xs, const ActBlockInfo*,
                      size_t, float* y, size_t ldy) {
  const int64_t nb = k / 256;
  const Q6Kx8* grp1 = grp + nb;
  __m512 acc[NC];
  for (int c = 0; c < NC; ++c) acc[c] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const Q6Kx8& g0 = grp[b];
    const Q6Kx8& g1 = grp1[b];
    const BlockQ8_K* xb[NC];
    for (int c = 0; c < NC; ++c) xb[c] = reinterpret_cast<const BlockQ8_K*>(x + c * xs) + b;
    __m512i sumi[NC];
    for (int c = 0; c < NC; ++c) sumi[c] = _mm512_setzero_si512();
    for (int grp16 = 0; grp16 < 16; ++grp16) {
      __m512i w[4];
      for (int t = 0; t < 4; ++t) w[t] = load_pair(g0.q[4 * grp16 + t], g1.q[4 * grp16 + t]);
      const __m512i sc = _mm512_cvtepi8_epi32(load_8x2(g0.sc[grp16], g1.sc[grp16]));
      for (int c = 0; c < NC; ++c) {
        const int8_t* xq = xb[c]->qs + 16 * grp16;
        __m512i a = _mm512_set1_epi32(-32 * xb[c]->bsums[grp16]);  // removes the +32 offset
        for (int t = 0; t < 4; ++t) a = _mm512_dpbusd_epi32(a, w[t], bcast4z(xq + 4 * t));
        sumi[c] = _mm512_add_epi32(sumi[c], _mm512_mullo_epi32(a, sc));
      }
    }
    const __m512 dw = load_f32x2(g0.d, g1.d);
    for (int c = 0; c < NC; ++c) {
      // Reference order: (d_w * d_x) * sumi.
      const __m512 t =
          _mm512_mul_ps(_mm512_mul_ps(dw, _mm512_set1_ps(xb[c]->d)), _mm512_cvtepi32_ps(sumi[c]));
      acc[c] = _mm512_add_ps(acc[c], t);
    }
  }
  store_rows16(acc, NC, nr, y, ldy);
}

// Tokens in passes of 8, then 4, then 1: the unpacked weight block is shared by all tokens of a pass
// (Q4_K's 16 unpacked vectors plus 8 accumulator pairs would spill, so it stops at 4).
template <class G, template <int> class K, int kMaxNC = 8>
void gemm(int64_t k, const void* group, int nr, const void* vx, size_t xs, const ActBlockInfo* xinfo,
          size_t xss, int nc, float* y, size_t ldy) {
  const auto* g = static_cast<const G*>(group);
  const auto* x = static_cast<const uint8_t*>(vx);
  int c = 0;
  if constexpr (kMaxNC >= 8) {
    for (; c + 8 <= nc; c += 8) K<8>::run(k, g, nr, x + c * xs, xs, xinfo + c * xss, xss, y + c * ldy, ldy);
  }
  for (; c + 4 <= nc; c += 4) K<4>::run(k, g, nr, x + c * xs, xs, xinfo + c * xss, xss, y + c * ldy, ldy);
  for (; c < nc; ++c) K<1>::run(k, g, nr, x + c * xs, xs, xinfo + c * xss, xss, y + c * ldy, ldy);
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
MINFER_COLS_KERNEL(KQ8_0x16, (gemm16_q8_cols<Q8x8, NC>))
MINFER_COLS_KERNEL(KQ4_0x16, (gemm16_q8_cols<Q4x8, NC>))
MINFER_COLS_KERNEL(KQ4_Kx16, gemm16_q4_K_cols<NC>)
MINFER_COLS_KERNEL(KQ5_0x16, (gemm16_q8_cols<Q5x8, NC>))
MINFER_COLS_KERNEL(KQ6_Kx16, gemm16_q6_K_cols<NC>)
MINFER_COLS_KERNEL(KQ4_0, gemm_q4_0_cols<NC>)
MINFER_COLS_KERNEL(KQ5_0, gemm_q5_0_cols<NC>)
MINFER_COLS_KERNEL(KQ4_1, (gemm_min_cols<Q4x8m, NC>))
MINFER_COLS_KERNEL(KQ5_1, (gemm_min_cols<Q8x8m, NC>))
MINFER_COLS_KERNEL(KQ4_K, gemm_q4_K_cols<NC>)
MINFER_COLS_KERNEL(KQ5_K, gemm_q5_K_cols<NC>)
MINFER_COLS_KERNEL(KQ6_K, gemm_q6_K_cols<NC>)
#undef MINFER_COLS_KERNEL

const RepackKernels kQ8_0x8{packed_bytes<Q8x8>, pack_q8_0<128>, gemm<Q8x8, KQ8_0>, 128, gemm<Q8x8, KQ8_0x16>};
const RepackKernels kQ5_0x8{packed_bytes<Q5x8>, pack_q5_0, gemm<Q5x8, KQ5_0>, 16, gemm<Q5x8, KQ5_0x16>};
const RepackKernels kQ4_0x8{packed_bytes<Q4x8>, pack_q4_0, gemm<Q4x8, KQ4_0>, 8, gemm<Q4x8, KQ4_0x16>};

const RepackKernels kQ4_Kx8{packed_bytes_q4_K, pack_q4_K, gemm<Q4Kx8, KQ4_K, 4>, 0, gemm<Q4Kx8, KQ4_Kx16, 4>};
const RepackKernels kQ5_Kx8{packed_bytes_q5_K, pack_q5_K, gemm<Q5Kx8, KQ5_K>};
const RepackKernels kQ4_1x8{packed_bytes<Q4x8m>, pack_q4_1, gemm<Q4x8m, KQ4_1>};
const RepackKernels kQ5_1x8{packed_bytes<Q8x8m>, pack_q5_1, gemm<Q8x8m, KQ5_1>};
const RepackKernels kQ6_Kx8{packed_bytes_q6_K, pack_q6_K, gemm<Q6Kx8, KQ6_K>, 0, gemm<Q6Kx8, KQ6_Kx16>};

}  // namespace

void fill_repack(CpuKernels& k) {
  k.types[static_cast<uint32_t>(DType::Q8_0)].repack = &kQ8_0x8;
  k.types[static_cast<uint32_t>(DType::Q4_0)].repack = &kQ4_0x8;
  k.types[static_cast<uint32_t>(DType::Q5_0)].repack = &kQ5_0x8;
  k.types[static_cast<uint32_t>(DType::Q4_K)].repack = &kQ4_Kx8;
  k.types[static_cast<uint32_t>(DType::Q6_K)].repack = &kQ6_Kx8;
  k.types[static_cast<uint32_t>(DType::Q5_K)].repack = &kQ5_Kx8;
  k.types[static_cast<uint32_t>(DType::Q4_1)].repack = &kQ4_1x8;
  k.types[static_cast<uint32_t>(DType::Q5_1)].repack = &kQ5_1x8;
}

}  // namespace minfer::kernels::avx512
