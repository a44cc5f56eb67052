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

// Keeps an integer accumulator's chain in program order. GCC otherwise reassociates the exact sums into
// a tree, which keeps every product of a block live and spills at NC = 4 (about a fifth slower).
inline void pin(__m256i& v) {
  __asm__("" : "+x"(v));
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

// ------------------------------------------------------------------------------------------ the kernel
// One skeleton for every type. A weight block (T::kBlock elements per row) has T::kSubs sub-blocks, each
// with a scale vector (ones where the type has none) and quant vectors that hold 4 consecutive quants of
// each of the 8 rows (activation bytes T::off(sb, t) .. + 3). Vectors are the outer loop and the NC
// columns the inner one, so one unpacked vector and NC sums are live (no spills at NC = 4). T::kSpan
// vectors' maddubs sum in i16 before one madd with the sub-block's scale widens them (each type proves its
// bound); integer sums are exact, so the grouping never changes a result. T::update applies the
// reference's float update once per block.
template <class T, int NC>
void gemm_cols(int64_t k, const typename T::G* grp, int nr, const uint8_t* x, size_t xs,
               const ActBlockInfo* xinfo, size_t xss, float* y, size_t ldy) {
  using XBlock = typename T::XBlock;
  constexpr int kVecs = T::kBlock / T::kSubs / 4;  // quant vectors per sub-block
  const int64_t nb = k / T::kBlock;
  __m256 acc[NC];
  for (int c = 0; c < NC; ++c) acc[c] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const typename T::G& g = grp[b];
    const XBlock* xb[NC];
    for (int c = 0; c < NC; ++c) xb[c] = reinterpret_cast<const XBlock*>(x + c * xs) + b;
    __m256i s[NC];
    for (int c = 0; c < NC; ++c) s[c] = _mm256_setzero_si256();
    for (int sb = 0; sb < T::kSubs; ++sb) {
      const __m256i sc = T::scale(g, sb);
      for (int t0 = 0; t0 < kVecs; t0 += T::kSpan) {
        __m256i p[NC];
        const __m256i w0 = T::vec(g, sb, t0);
        for (int c = 0; c < NC; ++c) {
          p[c] = T::mul(w0, xb[c]->qs + T::off(sb, t0));
          pin(p[c]);
        }
        for (int t = t0 + 1; t < t0 + T::kSpan; ++t) {
          const __m256i w = T::vec(g, sb, t);
          for (int c = 0; c < NC; ++c) {
            p[c] = _mm256_add_epi16(p[c], T::mul(w, xb[c]->qs + T::off(sb, t)));
            pin(p[c]);
          }
        }
        for (int c = 0; c < NC; ++c) {
          s[c] = _mm256_add_epi32(s[c], _mm256_madd_epi16(p[c], sc));
          pin(s[c]);
        }
      }
    }
    for (int c = 0; c < NC; ++c) acc[c] = T::update(acc[c], s[c], g, xb[c], xinfo[c * xss + b]);
  }
  store_rows<NC>(acc, nr, y, ldy);
}

// Nibbles 0..15 of a 32-byte vector: the low ones for even `half`, the high ones for odd.
inline __m256i nibbles(const uint8_t* q, int half) {
  const __m256i v = load256(q);
  return _mm256_and_si256(half % 2 == 0 ? v : _mm256_srli_epi16(v, 4), _mm256_set1_epi8(0x0F));
}
// u8 weights times the activation word (every type but Q8_0).
struct UnsignedMul {
  static __m256i mul(__m256i w, const int8_t* x) { return mul_pairs(w, x); }
};

// ------------------------------------------------------------------------------------ 32-element blocks
// One sub-block with unit scales (the madd only widens); vector j of the block.
struct Block32 {
  static constexpr int kBlock = 32;
  static constexpr int kSubs = 1;
  template <class G>
  static __m256i scale(const G&, int) {
    return _mm256_set1_epi16(1);
  }
};
// x Q8_0 activations: the reference's per-block float update after the offset correction.
struct Q8Update {
  using XBlock = BlockQ8_0;
  template <class G>
  static __m256 update(__m256 acc, __m256i s, const G& g, const XBlock*, const ActBlockInfo& xi) {
    return q8_update(acc, _mm256_add_epi32(s, _mm256_set1_epi32(xi.offset_sum)), load_h8(g.d), xi);
  }
};
// x Q8_1 (Q4_1 / Q5_1): unsigned quants without offset, plus the rows' mins:
// per block, (float)sum(q*x) * (d_w*d_x) + m_w*s_x, as the scalar reference.
struct MinUpdate {
  using XBlock = BlockQ8_1;
  template <class G>
  static __m256 update(__m256 acc, __m256i s, const G& g, const XBlock* xb, const ActBlockInfo&) {
    const __m256 t1 =
        _mm256_mul_ps(_mm256_cvtepi32_ps(s), _mm256_mul_ps(load_h8(g.d), _mm256_set1_ps(h2f(xb->d))));
    const __m256 t2 = _mm256_mul_ps(load_h8(g.m), _mm256_set1_ps(h2f(xb->s)));
    return _mm256_add_ps(acc, _mm256_add_ps(t1, t2));
  }
};

// 4-bit blocks (Q4_0, Q4_1): vector 2i is packed vector i's low nibbles (elements 4i..4i+3), 2i + 1 its high
// ones (16 + 4i..), summed over all 8 vectors in i16: 8 products of |q * x| <= 15 * 128 per lane,
// |sum| <= 30720 < 32767 for any s8 activation.
constexpr int kNibbleOffset[8] = {0, 16, 4, 20, 8, 24, 12, 28};
struct Nibbles32 : Block32, UnsignedMul {
  static constexpr int kSpan = 8;
  static int off(int, int j) { return kNibbleOffset[j]; }
  template <class G>
  static __m256i vec(const G& g, int, int j) {
    return nibbles(g.q[j / 2], j);
  }
};
// Byte blocks (Q8_0, Q5_1): vector j = each row's bytes 4j..4j+3.
struct Bytes32 : Block32 {
  static int off(int, int j) { return 4 * j; }
  template <class G>
  static __m256i vec(const G& g, int, int j) {
    return load256(g.q[j]);
  }
};

// Q4_0 (act_offset 8): nibbles 0..15 (q + 8).
struct TQ4_0 : Nibbles32, Q8Update {
  using G = Q4x8;
};
// Q4_1: nibbles 0..15 without offset, plus the mins.
struct TQ4_1 : Nibbles32, MinUpdate {
  using G = Q4x8m;
};
// Q5_0 (act_offset 16): Q4_0's nibbles plus 16 where the row's 5th bit is set (0..31, q + 16); two i16
// sums of 4 vectors: 8 products of |q * x| <= 31 * 128 per lane, |sum| <= 31744.
struct TQ5_0 : Block32, UnsignedMul, Q8Update {
  using G = Q5x8;
  static constexpr int kSpan = 4;
  static int off(int, int j) { return kNibbleOffset[j]; }
  static __m256i vec(const G& g, int, int j) {
    return _mm256_or_si256(nibbles(g.q[j / 2], j), high_bits_0x10(g.hmask[j / 2 + 4 * (j % 2)]));
  }
};
// Q5_1: bytes 0..31: two sums of 4 vectors (<= 31744), as Q5_0.
struct TQ5_1 : Bytes32, UnsignedMul, MinUpdate {
  using G = Q8x8m;
  static constexpr int kSpan = 4;
};
// Q8_0, stored signed (act_offset 0). maddubs needs an unsigned operand, so it takes |q| and the
// activation with q's sign moved onto it (psignb: x negated where q < 0, zeroed where q == 0):
// |q| * sign(q) x = q x. No saturation: |q| <= 128 and |x| <= 127 (the Q8_0 activation quantizer's range,
// which also keeps psignb away from -128), so a pair sums to at most 2 * 128 * 127 = 32512 < 32767. Two
// pairs could exceed it, so every maddubs is widened on its own (span 1).
struct TQ8_0 : Bytes32, Q8Update {
  using G = Q8x8;
  static constexpr int kSpan = 1;
  static __m256i mul(__m256i w, const int8_t* x) {
    return _mm256_maddubs_epi16(_mm256_abs_epi8(w), _mm256_sign_epi8(bcast4(x), w));
  }
};

// ------------------------------------------------------------------------------------------ K-quants
// Q8_K activations (256 per block, with 16-element bsums); xinfo is unused.

// Q4_K / Q5_K: 8 sub-blocks of 32 with 6-bit scales (vector t of sub-block sb meets activation bytes
// 32 sb + 4 t ..). Mins: summ[r] = sum_j mn[j][r] * (bsums[2j] + bsums[2j+1]), as madd over sub-block pairs.
// |bsums[2j] + bsums[2j+1]| <= 32 * 128 fits i16; the products are exact in i32. Then the reference's
// super-block update: acc += (d_w d_x) * sumi - (dmin_w d_x) * summ.
struct KScalesMins {
  using XBlock = BlockQ8_K;
  static constexpr int kBlock = 256;
  static constexpr int kSubs = 8;
  static int off(int sb, int t) { return 32 * sb + 4 * t; }
  template <class G>
  static __m256i scale(const G& g, int sb) {
    return scale_pairs_u8(g.sc[sb]);
  }
  template <class G>
  static __m256 update(__m256 acc, __m256i sumi, const G& g, const XBlock* xb, const ActBlockInfo&) {
    __m256i summ = _mm256_setzero_si256();
    for (int i = 0; i < 4; ++i) {
      const int16_t pair[2] = {static_cast<int16_t>(xb->bsums[4 * i] + xb->bsums[4 * i + 1]),
                               static_cast<int16_t>(xb->bsums[4 * i + 2] + xb->bsums[4 * i + 3])};
      summ = _mm256_add_epi32(
          summ, _mm256_madd_epi16(interleave_u8(g.mn[2 * i], g.mn[2 * i + 1]), bcast_i16x2(pair)));
    }
    const __m256 xd = _mm256_set1_ps(xb->d);
    const __m256 t1 = _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(g.d), xd), _mm256_cvtepi32_ps(sumi));
    const __m256 t2 = _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(g.dmin), xd), _mm256_cvtepi32_ps(summ));
    return _mm256_add_ps(acc, _mm256_sub_ps(t1, t2));
  }
};
// Q4_K: per 64-element chunk, 8 vectors whose low nibbles are sub-block 2j and high nibbles 2j+1. Each
// sub-block's 8 maddubs sum in i16 (|sum| <= 30720, as Q4_0), then madd with the 6-bit scale.
struct TQ4_K : UnsignedMul, KScalesMins {
  using G = Q4Kx8;
  static constexpr int kSpan = 8;
  static __m256i vec(const G& g, int sb, int t) { return nibbles(g.q[sb / 2][t], sb); }
};
// Q5_K: bytes 0..31, 8 vectors per sub-block: two i16 sums of 4 (<= 31744, as Q5_0), madd with the scale.
struct TQ5_K : UnsignedMul, KScalesMins {
  using G = Q5Kx8;
  static constexpr int kSpan = 4;
  static __m256i vec(const G& g, int sb, int t) { return load256(g.q[8 * sb + t]); }
};
// Q6_K: bytes 0..63 (q + 32), 4 vectors per 16-element group, summed two by two in i16
// (4 products of |q * x| <= 63 * 128 per lane: <= 32256), then madd with the signed 8-bit group scale.
// The offset comes off once per super-block: sum_g sc_g * 32 * bsums[g] (madd over group pairs;
// |bsums| <= 16 * 128 fits i16, the pair is read straight from bsums). Reference order: (d_w * d_x) * sumi.
struct TQ6_K : UnsignedMul {
  using G = Q6Kx8;
  using XBlock = BlockQ8_K;
  static constexpr int kBlock = 256;
  static constexpr int kSubs = 16;
  static constexpr int kSpan = 2;
  static int off(int g16, int t) { return 16 * g16 + 4 * t; }
  static __m256i vec(const G& g, int g16, int t) { return load256(g.q[4 * g16 + t]); }
  static __m256i scale(const G& g, int g16) { return scale_pairs_s8(g.sc[g16]); }
  static __m256 update(__m256 acc, __m256i sumi, const G& g, const XBlock* xb, const ActBlockInfo&) {
    __m256i corr = _mm256_setzero_si256();
    for (int i = 0; i < 8; ++i)
      corr = _mm256_add_epi32(corr, _mm256_madd_epi16(interleave_s8(g.sc[2 * i], g.sc[2 * i + 1]),
                                                      bcast_i16x2(xb->bsums + 2 * i)));
    const __m256i s = _mm256_sub_epi32(sumi, _mm256_slli_epi32(corr, 5));
    return _mm256_add_ps(acc, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(g.d), _mm256_set1_ps(xb->d)),
                                            _mm256_cvtepi32_ps(s)));
  }
};

// Tokens in passes of 4 (the unpacked weight block shared by the pass), the rest in one pass of 1-3:
// small batches (decode steps of a few sequences) unpack each weight block once.
template <class T>
void gemm(int64_t k, const void* group, int nr, const void* vx, size_t xs, const ActBlockInfo* xinfo,
          size_t xss, int nc, float* y, size_t ldy) {
  const auto* g = static_cast<const typename T::G*>(group);
  const auto* x = static_cast<const uint8_t*>(vx);
  int c = 0;
  for (; c + 4 <= nc; c += 4)
    gemm_cols<T, 4>(k, g, nr, x + c * xs, xs, xinfo + c * xss, xss, y + c * ldy, ldy);
  switch (nc - c) {
    case 3:
      gemm_cols<T, 3>(k, g, nr, x + c * xs, xs, xinfo + c * xss, xss, y + c * ldy, ldy);
      break;
    case 2:
      gemm_cols<T, 2>(k, g, nr, x + c * xs, xs, xinfo + c * xss, xss, y + c * ldy, ldy);
      break;
    case 1:
      gemm_cols<T, 1>(k, g, nr, x + c * xs, xs, xinfo + c * xss, xss, y + c * ldy, ldy);
      break;
    default:
      break;
  }
}

// Q8_0 is packed signed here (act_offset 0: the sign trick needs no offset correction).
const RepackKernels kQ8_0x8{packed_bytes<Q8x8>, pack_q8_0<0>, gemm<TQ8_0>, 0};
const RepackKernels kQ5_0x8{packed_bytes<Q5x8>, pack_q5_0, gemm<TQ5_0>, 16};
const RepackKernels kQ4_0x8{packed_bytes<Q4x8>, pack_q4_0, gemm<TQ4_0>, 8};
const RepackKernels kQ4_1x8{packed_bytes<Q4x8m>, pack_q4_1, gemm<TQ4_1>};
const RepackKernels kQ5_1x8{packed_bytes<Q8x8m>, pack_q5_1, gemm<TQ5_1>};
const RepackKernels kQ4_Kx8{packed_bytes_q4_K, pack_q4_K, gemm<TQ4_K>};
const RepackKernels kQ5_Kx8{packed_bytes_q5_K, pack_q5_K, gemm<TQ5_K>};
const RepackKernels kQ6_Kx8{packed_bytes_q6_K, pack_q6_K, gemm<TQ6_K>};

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
