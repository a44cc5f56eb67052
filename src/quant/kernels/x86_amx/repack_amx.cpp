// The repacked GEMM's prefill on AMX int8 tiles (the amx level: the avx512 level plus these kernels).
// A call takes a pair of row groups (16 weight rows, the avx512 pair kernels' lanes) and a multiple of 16
// tokens (A: 16 tokens x the dot's activation bytes, laid out by pack_tiles).
//   - 32-element types: the pair's quants are unpacked once per call into signed bytes in the tile "VNNI"
//     layout (B: 8 rows of 16 weight rows x 4 bytes); per 16 tokens each block is one tdpbssd, stored as
//     16 x 16 int32 sums and applied with AVX-512 exactly as the pair kernels apply theirs.
//   - K-quants: the weights are unpacked per super-block already multiplied by their integer scales, as
//     two byte planes; two full-depth dot chains per super-block give the scaled sum (KScaled below).
// Integer sums are exact, so the signed unpack (the offset removed from the weights instead of through
// the activation sums), the scaling at unpack and the order of the dots never change a sum, and the float
// update is the scalar reference's operation for operation: outputs are bitwise equal to reference.cpp
// and to the avx512 level. This file alone gets -mamx-tile -mamx-int8; dispatch.cpp requests the tile
// state.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "quant/blocks.h"
#include "quant/kernels/kernels.h"

// GCC 12's AVX-512 intrinsic headers start some results from _mm512_undefined_*(), which its
// -Wmaybe-uninitialized misreads once inlined; the values are fully written by the instruction.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

namespace minfer::kernels::amx {
namespace {

// The layouts only: the packers come with them, unused here (the avx512 tables this level copies pack).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#include "quant/kernels/x86_avx2/repack_layouts.inc"
#pragma GCC diagnostic pop
// V512's loads: a field of the pair's two groups as one zmm (quants, fp16 and f32 scales, scale bytes).
#include "quant/kernels/x86_avx512/v512.inc"

constexpr int kTok = kTileTokens;  // tokens per tile (A and C rows)
constexpr int kCols = 2 * R;       // weight rows per tile (C columns): the pair

// The tile configuration (palette 1): tmm0/1 = C (16 tokens x 16 rows of i32), tmm2/3 = A (16 tokens x kK
// activation bytes), tmm4/5 = B (kK / 4 rows of 16 weight rows x 4 bytes). Two of each, used alternately,
// so a dot does not wait for the previous one's store.
struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

// GCC 12's tile intrinsics are inline asm that does not tell the compiler what memory they read:
// ldtilecfg names only the configuration's first 8 bytes, tileloadd no memory at all. Without this, the
// rest of a configuration built on the stack was dropped as dead stores (a zeroed config: SIGILL at the
// first tile instruction), and stores to a buffer a tile load reads could be moved past the load.
template <class M>
inline void memory_read_by_tiles(const M& m) {
  __asm__ volatile("" : : "m"(m) : "memory");
}

// The dot depth this thread's tiles are configured for (0: not yet). Each worker configures its own.
thread_local int tls_tile_k = 0;

template <int kK>
void configure_tiles() {
  if (tls_tile_k == kK) return;
  TileConfig c;
  for (int t = 0; t < 2; ++t) {
    c.rows[t] = kTok;
    c.colsb[t] = kCols * 4;
    c.rows[2 + t] = kTok;
    c.colsb[2 + t] = kK;
    c.rows[4 + t] = kK / 4;
    c.colsb[4 + t] = kCols * 4;
  }
  for (int t = 6; t < 8; ++t) {  // the scaled K-quants' second pair of C tiles
    c.rows[t] = kTok;
    c.colsb[t] = kCols * 4;
  }
  memory_read_by_tiles(c);
  _tile_loadconfig(&c);
  tls_tile_k = kK;
}

// This thread's unpacked weights (grown, never shrunk: one pair's k elements x 16 rows).
int8_t* weight_buffer(size_t bytes) {
  thread_local std::vector<int8_t> buf;
  if (buf.size() < bytes) buf.resize(bytes);
  return buf.data();
}

inline void store_row(int8_t* dst, __m512i v) {
  _mm512_storeu_si512(dst, v);
}
inline __m512i minus(__m512i v, int8_t offset) {
  return _mm512_sub_epi8(v, _mm512_set1_epi8(offset));
}

// The per-token 16 x 16 int32 sums of one dot, as tilestored: row c = token c, lane r = weight row r.
using Sums = int32_t[kTok][kCols];

// ---------------------------------------------------------------------------------------------- traits
// Per type: G (the packed group block), XBlock (the activation block), kBlock (elements per block), kK
// (bytes per dot: 32; the K-quants' 64), kDots (dots per block), x_off(d) (dot d's activation bytes within
// XBlock), unpack (a block pair's kDots B tiles of kK / 4 rows x 64 signed bytes; the K-quants'
// unpack_scaled) and update (the pair kernels' float update of 16 tokens from the block's sums).

// 32-element blocks x Q8_0: acc += (float)sumi * (d_w * d_x), d_x from the activation block info.
struct Q8Update {
  using XBlock = BlockQ8_0;
  static constexpr int kBlock = 32;
  static constexpr int kK = 32;
  static constexpr int kDots = 1;
  static constexpr int x_off(int) { return offsetof(BlockQ8_0, qs); }
  template <class G>
  static void update(__m512* acc, const Sums* s, const G* g, size_t gs, const uint8_t*, size_t,
                     const ActBlockInfo* xi, size_t xss) {
    const __m512 dw = V512::load_h(g->d, gs);
    for (int c = 0; c < kTok; ++c) {
      const __m512 d = _mm512_mul_ps(dw, _mm512_set1_ps(xi[c * xss].d));
      const __m512 v = _mm512_cvtepi32_ps(_mm512_load_si512(s[0][c]));
      acc[c] = _mm512_add_ps(acc[c], _mm512_mul_ps(v, d));
    }
  }
};
// 32-element blocks x Q8_1 (unsigned quants and mins): acc += (float)sumi * (d_w * d_x) + m_w * s_x.
struct MinUpdate {
  using XBlock = BlockQ8_1;
  static constexpr int kBlock = 32;
  static constexpr int kK = 32;
  static constexpr int kDots = 1;
  static constexpr int x_off(int) { return offsetof(BlockQ8_1, qs); }
  template <class G>
  static void update(__m512* acc, const Sums* s, const G* g, size_t gs, const uint8_t* xb, size_t xs,
                     const ActBlockInfo*, size_t) {
    const __m512 dw = V512::load_h(g->d, gs);
    const __m512 mw = V512::load_h(g->m, gs);
    for (int c = 0; c < kTok; ++c) {
      const auto* x = reinterpret_cast<const XBlock*>(xb + c * xs);
      const __m512 t1 =
          _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_load_si512(s[0][c])), _mm512_mul_ps(dw, _mm512_set1_ps(h2f(x->d))));
      const __m512 t2 = _mm512_mul_ps(mw, _mm512_set1_ps(h2f(x->s)));
      acc[c] = _mm512_add_ps(acc[c], _mm512_add_ps(t1, t2));
    }
  }
};

// Q8_0 (stored + 128): the signed byte is the stored one with its top bit flipped.
struct TQ8_0 : Q8Update {
  using G = Q8x8;
  static void unpack(const G* g, size_t gs, int8_t* b) {
    for (int j = 0; j < 8; ++j) store_row(b + 64 * j, _mm512_xor_si512(V512::load_q(g->q[j], gs), _mm512_set1_epi8(-128)));
  }
};
// Nibble layouts: packed vector j's low nibbles are elements 4j..4j+3 (B row j), its high ones 16+4j..
// (B row 4 + j).
template <int kOffset>
void unpack_nibbles32(const uint8_t (*q)[32], size_t gs, int8_t* b) {
  for (int j = 0; j < 4; ++j) {
    const __m512i v = V512::load_q(q[j], gs);
    store_row(b + 64 * j, minus(V512::low_nibbles(v), kOffset));
    store_row(b + 64 * (4 + j), minus(V512::high_nibbles(v), kOffset));
  }
}
struct TQ4_0 : Q8Update {  // stored + 8
  using G = Q4x8;
  static void unpack(const G* g, size_t gs, int8_t* b) { unpack_nibbles32<8>(g->q, gs, b); }
};
struct TQ4_1 : MinUpdate {  // unsigned 0..15
  using G = Q4x8m;
  static void unpack(const G* g, size_t gs, int8_t* b) { unpack_nibbles32<0>(g->q, gs, b); }
};
struct TQ5_1 : MinUpdate {  // unsigned 0..31, bytes
  using G = Q8x8m;
  static void unpack(const G* g, size_t gs, int8_t* b) {
    for (int j = 0; j < 8; ++j) store_row(b + 64 * j, V512::load_q(g->q[j], gs));
  }
};
// Q5_0 (stored + 16): Q4_0's nibbles plus 16 where the fifth bit is set (hmask: lo0..lo3, hi0..hi3).
struct TQ5_0 : Q8Update {
  using G = Q5x8;
  static void unpack(const G* g, size_t gs, int8_t* b) {
    for (int j = 0; j < 4; ++j) {
      const __m512i v = V512::load_q(g->q[j], gs);
      store_row(b + 64 * j, minus(V512::add_0x10(V512::low_nibbles(v), &g->hmask[j], gs), 16));
      store_row(b + 64 * (4 + j), minus(V512::add_0x10(V512::high_nibbles(v), &g->hmask[4 + j], gs), 16));
    }
  }
};

// K-quants x Q8_K (256 per block, 16-element bsums; xinfo unused), on scaled weights. Their sub-block
// sums are weighted by integer scales (6-bit, or Q6_K's signed 8-bit per 16 elements) before the float
// update; dots per sub-block would each need a store and 16 vpmulld per token. Instead the pair's weights
// are multiplied by their scales at unpack, w = q * sc (exact in i16: |w| <= 31 * 63, or 32 * 128), and
// split as w = 64 * hi + lo with lo in 0..63: per super-block two full-depth chains of 4 dots, tdpbsud on
// the lo bytes (unsigned) and tdpbssd on the hi bytes (signed), each accumulating in its tile, give
// sumi = 64 * C_hi + C_lo, the integer sum_j sc_j * sumi_j of the reference.
//   unpack_scaled: a super-block pair's B tiles, lo [4 dots][16 B rows][64] then hi (kScaledBytes); dot d
//   meets activation bytes 64d..64d+63, its B row kr elements 64d + 4kr .. +3 of the 16 weight rows.
constexpr size_t kScaledBytes = 2 * 4 * 16 * 64;

// Row scales (lane r = row r's scale, i32) as i16 words in the B row layout, for one B row's first 8
// weight rows (words 4c..4c+3 = row c) and its last 8.
struct ScaleWords {
  __m512i first, last;
};
inline ScaleWords scale_words(__m512i s32) {
  alignas(64) static constexpr int16_t kIdx[2][32] = {
      {0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 6, 6, 6, 6, 7, 7, 7, 7},
      {8,  8,  8,  8,  9,  9,  9,  9,  10, 10, 10, 10, 11, 11, 11, 11,
       12, 12, 12, 12, 13, 13, 13, 13, 14, 14, 14, 14, 15, 15, 15, 15}};
  const __m512i w = _mm512_castsi256_si512(_mm512_cvtepi32_epi16(s32));
  return {_mm512_permutexvar_epi16(_mm512_load_si512(kIdx[0]), w),
          _mm512_permutexvar_epi16(_mm512_load_si512(kIdx[1]), w)};
}
// One B row of 16 weight rows x 4 quants (signed, or unsigned bytes), times the rows' scales, stored as
// its lo and hi bytes.
template <bool kSigned>
inline void store_scaled(__m512i q, const ScaleWords& s, int8_t* lo, int8_t* hi) {
  const __m256i q0 = _mm512_castsi512_si256(q), q1 = _mm512_extracti64x4_epi64(q, 1);
  const __m512i w0 =
      _mm512_mullo_epi16(kSigned ? _mm512_cvtepi8_epi16(q0) : _mm512_cvtepu8_epi16(q0), s.first);
  const __m512i w1 =
      _mm512_mullo_epi16(kSigned ? _mm512_cvtepi8_epi16(q1) : _mm512_cvtepu8_epi16(q1), s.last);
  const __m512i m63 = _mm512_set1_epi16(63);
  auto bytes = [](__m512i a, __m512i b) {  // i16 -> i8 (every value fits: the bytes are the value)
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm512_cvtepi16_epi8(a)), _mm512_cvtepi16_epi8(b), 1);
  };
  store_row(lo, bytes(_mm512_and_si512(w0, m63), _mm512_and_si512(w1, m63)));
  store_row(hi, bytes(_mm512_srai_epi16(w0, 6), _mm512_srai_epi16(w1, 6)));
}
// B row v (0..63) of a super-block: dot v / 16, row v % 16.
template <bool kSigned>
inline void store_scaled_row(int8_t* b, int v, const ScaleWords& s, __m512i q) {
  int8_t* lo = b + 64 * v;
  store_scaled<kSigned>(q, s, lo, lo + kScaledBytes / 2);
}

struct KScaled {
  using XBlock = BlockQ8_K;
  static constexpr int kBlock = 256;
  static constexpr int kK = 64;
  static constexpr int kDots = 4;
  static constexpr bool kScaledTiles = true;
  static constexpr int x_off(int d) { return offsetof(BlockQ8_K, qs) + 64 * d; }
};
// The sums of one tile: [0][c][r] lo, [1][c][r] hi.
inline __m512i scaled_sumi(const int32_t* s, int c) {
  return _mm512_add_epi32(_mm512_slli_epi32(_mm512_load_si512(s + 256 + 16 * c), 6),
                          _mm512_load_si512(s + 16 * c));
}
// Q4_K / Q5_K: mins as summ = sum_j mn_j * (bsums[2j] + bsums[2j+1]), exact in i32 (vpdpwssd on i16 pairs
// of sub-blocks: mn <= 63, the pair sums <= 2 * 16 * 128); then the reference's super-block update
// acc += (d_w d_x) * sumi - (dmin_w d_x) * summ.
struct KScalesMins : KScaled {
  template <class G>
  static void update(__m512* acc, const int32_t* s, const G* g, size_t gs, const uint8_t* xb, size_t xs) {
    __m512i mn[4];
    for (int i = 0; i < 4; ++i)
      mn[i] = _mm512_or_si512(V512::load_u8(g->mn[2 * i], gs),
                              _mm512_slli_epi32(V512::load_u8(g->mn[2 * i + 1], gs), 16));
    const __m512 dw = V512::load_f32(g->d, gs);
    const __m512 dmin = V512::load_f32(g->dmin, gs);
    for (int c = 0; c < kTok; ++c) {
      const auto* x = reinterpret_cast<const XBlock*>(xb + c * xs);
      __m512i summ = _mm512_setzero_si512();
      for (int i = 0; i < 4; ++i) {
        const auto b0 = static_cast<uint16_t>(x->bsums[4 * i] + x->bsums[4 * i + 1]);
        const auto b1 = static_cast<uint16_t>(x->bsums[4 * i + 2] + x->bsums[4 * i + 3]);
        summ = _mm512_dpwssd_epi32(summ, mn[i],
                                   _mm512_set1_epi32(static_cast<int32_t>(b0 | (uint32_t{b1} << 16))));
      }
      const __m512 xd = _mm512_set1_ps(x->d);
      const __m512 t1 = _mm512_mul_ps(_mm512_mul_ps(dw, xd), _mm512_cvtepi32_ps(scaled_sumi(s, c)));
      const __m512 t2 = _mm512_mul_ps(_mm512_mul_ps(dmin, xd), _mm512_cvtepi32_ps(summ));
      acc[c] = _mm512_add_ps(acc[c], _mm512_sub_ps(t1, t2));
    }
  }
};
// Q4_K: chunk u's packed vector t holds sub-block 2u's elements 4t..4t+3 in its low nibbles (dot u, B row
// t) and sub-block 2u+1's in its high ones (B row 8 + t).
struct TQ4_K : KScalesMins {
  using G = Q4Kx8;
  static void unpack_scaled(const G* g, size_t gs, int8_t* b) {
    for (int u = 0; u < 4; ++u) {
      const ScaleWords s0 = scale_words(V512::load_u8(g->sc[2 * u], gs));
      const ScaleWords s1 = scale_words(V512::load_u8(g->sc[2 * u + 1], gs));
      for (int t = 0; t < 8; ++t) {
        const __m512i v = V512::load_q(g->q[u][t], gs);
        store_scaled_row<false>(b, 16 * u + t, s0, V512::low_nibbles(v));
        store_scaled_row<false>(b, 16 * u + 8 + t, s1, V512::high_nibbles(v));
      }
    }
  }
};
struct TQ5_K : KScalesMins {  // bytes 0..31, vector v = elements 4v..4v+3, sub-block v / 8
  using G = Q5Kx8;
  static void unpack_scaled(const G* g, size_t gs, int8_t* b) {
    for (int j = 0; j < 8; ++j) {
      const ScaleWords s = scale_words(V512::load_u8(g->sc[j], gs));
      for (int v = 8 * j; v < 8 * j + 8; ++v) store_scaled_row<false>(b, v, s, V512::load_q(g->q[v], gs));
    }
  }
};
// Q6_K: 16 groups of 16 (stored + 32) with signed 8-bit scales; acc += (d_w d_x) * sum_j sc_j * sumi_j.
struct TQ6_K : KScaled {
  using G = Q6Kx8;
  static void unpack_scaled(const G* g, size_t gs, int8_t* b) {
    for (int j = 0; j < 16; ++j) {
      const ScaleWords s = scale_words(V512::load_s8(g->sc[j], gs));
      for (int v = 4 * j; v < 4 * j + 4; ++v)
        store_scaled_row<true>(b, v, s, minus(V512::load_q(g->q[v], gs), 32));
    }
  }
  static void update(__m512* acc, const int32_t* s, const G* g, size_t gs, const uint8_t* xb, size_t xs) {
    const __m512 dw = V512::load_f32(g->d, gs);
    for (int c = 0; c < kTok; ++c) {
      const auto* x = reinterpret_cast<const XBlock*>(xb + c * xs);
      acc[c] = _mm512_add_ps(acc[c], _mm512_mul_ps(_mm512_mul_ps(dw, _mm512_set1_ps(x->d)),
                                                   _mm512_cvtepi32_ps(scaled_sumi(s, c))));
    }
  }
};

// ---------------------------------------------------------------------------------------------- kernel
// One dot on tile set 0 or 1: 16 tokens' kK activation bytes (kK apart) against B, into s. GCC's tile
// intrinsics paste their register numbers into the assembly text, so each set is its own function, with
// literal register numbers.
#define MINFER_TILE_DOT(NAME, C, A, B)                               \
  template <int kK>                                                  \
  inline void NAME(const int8_t* a, const int8_t* b, Sums& s) {      \
    _tile_zero(C);                                                   \
    _tile_loadd(A, a, kK);                                           \
    _tile_loadd(B, b, kCols * 4);                                    \
    _tile_dpbssd(C, A, B);                                           \
    _tile_stored(C, s, kCols * 4);                                   \
  }
MINFER_TILE_DOT(tile_dot0, 0, 2, 4)
MINFER_TILE_DOT(tile_dot1, 1, 3, 5)
#undef MINFER_TILE_DOT

// The activation tiles gemm_tiles reads: per 16 tokens, block and dot, the tokens' kK quant bytes back to
// back, so one tile load reads kK / 4 consecutive cache lines instead of 16 rows a row stride apart.
template <class T>
void pack_tiles(const void* vx, size_t xs, int nc, int64_t k, int8_t* out) {
  using XBlock = typename T::XBlock;
  const auto* x = static_cast<const uint8_t*>(vx);
  const int64_t nb = k / T::kBlock;
  for (int c0 = 0; c0 + kTok <= nc; c0 += kTok) {
    for (int64_t b = 0; b < nb; ++b) {
      for (int d = 0; d < T::kDots; ++d) {
        for (int c = 0; c < kTok; ++c, out += T::kK)
          std::memcpy(out, x + static_cast<size_t>(c0 + c) * xs + static_cast<size_t>(b) * sizeof(XBlock) + T::x_off(d),
                      T::kK);
      }
    }
  }
}

template <class T>
void gemm_tiles(int64_t k, const void* group, int nr, const void* vx, size_t xs, const ActBlockInfo* xinfo,
                size_t xss, int nc, float* y, size_t ldy, const int8_t* xtiles) {
  using G = typename T::G;
  using XBlock = typename T::XBlock;
  constexpr size_t kDotBytes = static_cast<size_t>(T::kK / 4) * kCols * 4;  // one B tile
  constexpr size_t kBlockBytes = T::kDots * kDotBytes;
  configure_tiles<T::kK>();
  const auto* g = static_cast<const G*>(group);
  const int64_t nb = k / T::kBlock;
  const size_t gs = static_cast<size_t>(nb) * sizeof(G);  // the pair's second group follows the first
  int8_t* wb = weight_buffer(static_cast<size_t>(nb) * kBlockBytes);
  for (int64_t b = 0; b < nb; ++b) T::unpack(g + b, gs, wb + static_cast<size_t>(b) * kBlockBytes);
  memory_read_by_tiles(*wb);
  // Software pipelined: block b + 1's dots are issued before block b's float update, so the tile unit
  // works while the vector units apply the previous sums (their tile stores have landed by then). Two
  // blocks' sums, alternating; consecutive dots alternate between the two tile sets.
  alignas(64) Sums sums[2][T::kDots];
  const auto* x = static_cast<const uint8_t*>(vx);
  const __mmask16 rows = static_cast<__mmask16>((1u << nr) - 1);
  for (int c0 = 0; c0 + kTok <= nc; c0 += kTok) {
    const uint8_t* xt = x + static_cast<size_t>(c0) * xs;
    const int8_t* at = xtiles + static_cast<size_t>(c0) * static_cast<size_t>(k);
    auto dots = [&](int64_t b) {
      const int8_t* ablock = at + static_cast<size_t>(b) * T::kBlock * kTok;
      const int8_t* wblock = wb + static_cast<size_t>(b) * kBlockBytes;
      Sums* out = sums[b % 2];
      for (int d = 0; d < T::kDots; ++d) {
        const int8_t* a = ablock + d * T::kK * kTok;
        if (((b * T::kDots + d) & 1) == 0)
          tile_dot0<T::kK>(a, wblock + d * kDotBytes, out[d]);
        else
          tile_dot1<T::kK>(a, wblock + d * kDotBytes, out[d]);
      }
    };
    __m512 acc[kTok];
    for (__m512& a : acc) a = _mm512_setzero_ps();
    dots(0);
    for (int64_t b = 0; b < nb; ++b) {
      if (b + 1 < nb) dots(b + 1);
      T::update(acc, sums[b % 2], g + b, gs, xt + static_cast<size_t>(b) * sizeof(XBlock), xs,
                xinfo + static_cast<size_t>(c0) * xss + b, xss);
    }
    for (int c = 0; c < kTok; ++c) _mm512_mask_storeu_ps(y + static_cast<size_t>(c0 + c) * ldy, rows, acc[c]);
  }
}

// The K-quants' kernel: super-blocks outer (one unpack of the pair's scaled weights, 8 KiB, shared by every
// tile of tokens), tiles inner, with the tiles' float sums in a thread-local buffer. Software pipelined as
// gemm_tiles: a tile's dots are issued before the previous tile's update, on the other C tiles.
#define MINFER_TILE_SCALED_DOTS(NAME, CLO, CHI)                    \
  inline void NAME(const int8_t* a, const int8_t* b, int32_t* s) { \
    _tile_zero(CLO);                                               \
    _tile_zero(CHI);                                               \
    for (int d = 0; d < 4; ++d) {                                  \
      if (d % 2 == 0)                                              \
        _tile_loadd(2, a + 1024 * d, 64);                          \
      else                                                         \
        _tile_loadd(3, a + 1024 * d, 64);                          \
      _tile_loadd(4, b + 1024 * d, 64);                            \
      _tile_loadd(5, b + kScaledBytes / 2 + 1024 * d, 64);         \
      if (d % 2 == 0) {                                            \
        _tile_dpbsud(CLO, 2, 4);                                   \
        _tile_dpbssd(CHI, 2, 5);                                   \
      } else {                                                     \
        _tile_dpbsud(CLO, 3, 4);                                   \
        _tile_dpbssd(CHI, 3, 5);                                   \
      }                                                            \
    }                                                              \
    _tile_stored(CLO, s, 64);                                      \
    _tile_stored(CHI, s + 256, 64);                                \
  }
MINFER_TILE_SCALED_DOTS(scaled_dots0, 0, 1)
MINFER_TILE_SCALED_DOTS(scaled_dots1, 6, 7)
#undef MINFER_TILE_SCALED_DOTS

template <class T>
void gemm_tiles_scaled(int64_t k, const void* group, int nr, const void* vx, size_t xs, const ActBlockInfo*,
                       size_t, int nc, float* y, size_t ldy, const int8_t* xtiles) {
  using G = typename T::G;
  using XBlock = typename T::XBlock;
  configure_tiles<64>();
  const auto* g = static_cast<const G*>(group);
  const int64_t nb = k / T::kBlock;
  const size_t gs = static_cast<size_t>(nb) * sizeof(G);  // the pair's second group follows the first
  const int n_tiles = nc / kTok;
  int8_t* wb = weight_buffer(kScaledBytes);
  // The tiles' float sums: 16 floats per token (64-byte aligned: the vector holds 64-byte elements).
  struct alignas(64) Acc {
    float v[kCols];
  };
  thread_local std::vector<Acc> acc_buf;
  if (acc_buf.size() < static_cast<size_t>(n_tiles * kTok))
    acc_buf.resize(static_cast<size_t>(n_tiles * kTok));
  auto* acc = reinterpret_cast<__m512*>(acc_buf.data());
  for (int i = 0; i < n_tiles * kTok; ++i) acc[i] = _mm512_setzero_ps();
  alignas(64) int32_t sums[2][2 * kTok * kCols];
  const auto* x = static_cast<const uint8_t*>(vx);
  for (int64_t b = 0; b < nb; ++b) {
    T::unpack_scaled(g + b, gs, wb);
    memory_read_by_tiles(*wb);
    auto dots = [&](int t) {
      const int8_t* a = xtiles + static_cast<size_t>(t) * kTok * static_cast<size_t>(k) +
                        static_cast<size_t>(b) * T::kBlock * kTok;
      if (t % 2 == 0)
        scaled_dots0(a, wb, sums[0]);
      else
        scaled_dots1(a, wb, sums[1]);
    };
    auto update = [&](int t) {
      T::update(acc + t * kTok, sums[t % 2], g + b, gs,
                x + static_cast<size_t>(t) * kTok * xs + static_cast<size_t>(b) * sizeof(XBlock), xs);
    };
    dots(0);
    for (int t = 0; t < n_tiles; ++t) {
      if (t + 1 < n_tiles) dots(t + 1);
      update(t);
    }
  }
  const __mmask16 rows = static_cast<__mmask16>((1u << nr) - 1);
  for (int c = 0; c < n_tiles * kTok; ++c)
    _mm512_mask_storeu_ps(y + static_cast<size_t>(c) * ldy, rows, acc[c]);
}

}  // namespace

void fill(CpuKernels& k) {
  // The avx512 level's tables (already filled) plus the tile kernels: one copy per type, made once.
  auto add = [&]<class T>(DType t, RepackKernels& copy, T) {
    TypeKernels& tk = k.types[static_cast<uint32_t>(t)];
    copy = *tk.repack;
    if constexpr (requires { T::kScaledTiles; })
      copy.gemm_tiles = gemm_tiles_scaled<T>;
    else
      copy.gemm_tiles = gemm_tiles<T>;
    copy.pack_tiles = pack_tiles<T>;
    tk.repack = &copy;
  };
  static RepackKernels q8_0, q4_0, q5_0, q4_1, q5_1, q4_K, q5_K, q6_K;
  add(DType::Q8_0, q8_0, TQ8_0{});
  add(DType::Q4_0, q4_0, TQ4_0{});
  add(DType::Q5_0, q5_0, TQ5_0{});
  add(DType::Q4_1, q4_1, TQ4_1{});
  add(DType::Q5_1, q5_1, TQ5_1{});
  add(DType::Q4_K, q4_K, TQ4_K{});
  add(DType::Q5_K, q5_K, TQ5_K{});
  add(DType::Q6_K, q6_K, TQ6_K{});
}

}  // namespace minfer::kernels::amx
