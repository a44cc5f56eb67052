// The repacked GEMM's prefill on AMX int8 tiles (the amx level: the avx512 level plus these kernels).
// A call takes a pair of row groups (16 weight rows, the avx512 pair kernels' lanes) and a multiple of 16
// tokens. The pair's quants are unpacked once per call into signed bytes in the tile "VNNI" layout; then,
// per 16 tokens, each block (or sub-block) is one tdpbssd of the tokens' activation bytes (A: 16 tokens x
// 32 bytes, read in place with the activation row stride) against the unpacked weights (B: 8 rows of 16
// weight rows x 4 bytes), stored as 16 x 16 int32 sums and applied with AVX-512 exactly as the pair kernels
// apply theirs. Integer sums are exact, so the signed unpack (the offset removed from the weights instead
// of through the activation sums) and the order of the dots never change a sum, and the float update is
// the scalar reference's operation for operation: outputs are bitwise equal to reference.cpp and to the
// avx512 level. This file alone gets -mamx-tile -mamx-int8; dispatch.cpp requests the tile state.
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
// (bytes per dot: 32, or 16 for Q6_K's groups), kDots (dots per block), x_off(d) (dot d's activation bytes
// within XBlock), unpack (a block pair's kDots B tiles of kK / 4 rows x 64 signed bytes) and update (the
// pair kernels' float update of 16 tokens from the block's kDots sums).

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

// K-quants x Q8_K (256 per block, 16-element bsums; xinfo unused).
// Q4_K / Q5_K: 8 sub-blocks of 32, sumi = sum_j sc_j * sumi_j and summ = sum_j mn_j * (bsums[2j] +
// bsums[2j+1]) exact in i32; then acc += (d_w d_x) * sumi - (dmin_w d_x) * summ.
struct KScalesMins {
  using XBlock = BlockQ8_K;
  static constexpr int kBlock = 256;
  static constexpr int kK = 32;
  static constexpr int kDots = 8;
  static constexpr int x_off(int j) { return offsetof(BlockQ8_K, qs) + 32 * j; }
  template <class G>
  static void update(__m512* acc, const Sums* s, const G* g, size_t gs, const uint8_t* xb, size_t xs,
                     const ActBlockInfo*, size_t) {
    __m512i sc[8], mn[8];
    for (int j = 0; j < 8; ++j) {
      sc[j] = V512::load_u8(g->sc[j], gs);
      mn[j] = V512::load_u8(g->mn[j], gs);
    }
    const __m512 dw = V512::load_f32(g->d, gs);
    const __m512 dmin = V512::load_f32(g->dmin, gs);
    for (int c = 0; c < kTok; ++c) {
      const auto* x = reinterpret_cast<const XBlock*>(xb + c * xs);
      __m512i sumi = _mm512_setzero_si512(), summ = _mm512_setzero_si512();
      for (int j = 0; j < 8; ++j) {
        sumi = _mm512_add_epi32(sumi, _mm512_mullo_epi32(_mm512_load_si512(s[j][c]), sc[j]));
        const int32_t bs = x->bsums[2 * j] + x->bsums[2 * j + 1];
        summ = _mm512_add_epi32(summ, _mm512_mullo_epi32(mn[j], _mm512_set1_epi32(bs)));
      }
      const __m512 xd = _mm512_set1_ps(x->d);
      const __m512 t1 = _mm512_mul_ps(_mm512_mul_ps(dw, xd), _mm512_cvtepi32_ps(sumi));
      const __m512 t2 = _mm512_mul_ps(_mm512_mul_ps(dmin, xd), _mm512_cvtepi32_ps(summ));
      acc[c] = _mm512_add_ps(acc[c], _mm512_sub_ps(t1, t2));
    }
  }
};
// Q4_K: chunk u's packed vector t holds sub-block 2u's elements 4t..4t+3 in its low nibbles and sub-block
// 2u+1's in its high ones.
struct TQ4_K : KScalesMins {
  using G = Q4Kx8;
  static void unpack(const G* g, size_t gs, int8_t* b) {
    for (int u = 0; u < 4; ++u) {
      for (int t = 0; t < 8; ++t) {
        const __m512i v = V512::load_q(g->q[u][t], gs);
        store_row(b + 512 * (2 * u) + 64 * t, V512::low_nibbles(v));
        store_row(b + 512 * (2 * u + 1) + 64 * t, V512::high_nibbles(v));
      }
    }
  }
};
struct TQ5_K : KScalesMins {  // bytes 0..31, vector v = elements 4v..4v+3
  using G = Q5Kx8;
  static void unpack(const G* g, size_t gs, int8_t* b) {
    for (int v = 0; v < 64; ++v) store_row(b + 64 * v, V512::load_q(g->q[v], gs));
  }
};
// Q6_K: 16 groups of 16 (stored + 32) with signed 8-bit scales; acc += (d_w d_x) * sum_j sc_j * sumi_j.
struct TQ6_K {
  using G = Q6Kx8;
  using XBlock = BlockQ8_K;
  static constexpr int kBlock = 256;
  static constexpr int kK = 16;
  static constexpr int kDots = 16;
  static constexpr int x_off(int j) { return offsetof(BlockQ8_K, qs) + 16 * j; }
  static void unpack(const G* g, size_t gs, int8_t* b) {
    for (int v = 0; v < 64; ++v) store_row(b + 64 * v, minus(V512::load_q(g->q[v], gs), 32));
  }
  static void update(__m512* acc, const Sums* s, const G* g, size_t gs, const uint8_t* xb, size_t xs,
                     const ActBlockInfo*, size_t) {
    __m512i sc[16];
    for (int j = 0; j < 16; ++j) sc[j] = V512::load_s8(g->sc[j], gs);
    const __m512 dw = V512::load_f32(g->d, gs);
    for (int c = 0; c < kTok; ++c) {
      const auto* x = reinterpret_cast<const XBlock*>(xb + c * xs);
      __m512i sumi = _mm512_setzero_si512();
      for (int j = 0; j < 16; ++j) sumi = _mm512_add_epi32(sumi, _mm512_mullo_epi32(_mm512_load_si512(s[j][c]), sc[j]));
      acc[c] = _mm512_add_ps(acc[c], _mm512_mul_ps(_mm512_mul_ps(dw, _mm512_set1_ps(x->d)), _mm512_cvtepi32_ps(sumi)));
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

}  // namespace

void fill(CpuKernels& k) {
  // The avx512 level's tables (already filled) plus the tile kernels: one copy per type, made once.
  auto add = [&]<class T>(DType t, RepackKernels& copy, T) {
    TypeKernels& tk = k.types[static_cast<uint32_t>(t)];
    copy = *tk.repack;
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
