// The repacked ("x8") GEMM at the avx512 level: repack_vnni.inc's skeleton with EVEX vpdpbusd on 256-bit
// vectors (8 rows: on Zen 4 as fast per element as 512-bit, and 32 registers for 8 rows x 8 tokens) and
// on 512-bit vectors holding two row groups (16 rows, the pair kernels). On Zen 4 the 8-row kernels were
// bound by instruction issue and loads, not by vpdpbusd: the pairs share one instruction stream, one set
// of activation broadcasts and one float update between 16 rows, from 4 tokens up (matmul.cpp).
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

#include "quant/kernels/x86_avx2/repack_layouts.inc"

inline __m256i dpbusd256(__m256i acc, __m256i w, __m256i x) {
  return _mm256_dpbusd_epi32(acc, w, x);
}
inline __m256i add_0x10_256(__m256i w, uint32_t mask) {
  return _mm256_mask_add_epi8(w, _cvtu32_mask32(mask), w, _mm256_set1_epi8(0x10));
}

constexpr int kVectorRegs = 32;  // zmm0-31 (ymm0-31 with AVX512VL)

#include "quant/kernels/x86_avx2/repack_vnni.inc"

// Two consecutive row groups: the first in the low 256 bits, the second (gs bytes further) in the high.
struct V512 {
  using I = __m512i;
  using F = __m512;
  static constexpr int kMaxTokens = 8;
  static I zero() { return _mm512_setzero_si512(); }
  static I set1(int32_t v) { return _mm512_set1_epi32(v); }
  static F zerof() { return _mm512_setzero_ps(); }
  static F set1f(float v) { return _mm512_set1_ps(v); }
  static I add(I a, I b) { return _mm512_add_epi32(a, b); }
  static I mullo(I a, I b) { return _mm512_mullo_epi32(a, b); }
  static I dot(I acc, I w, const int8_t* x) { return _mm512_dpbusd_epi32(acc, w, _mm512_set1_epi32(word4(x))); }
  static F addf(F a, F b) { return _mm512_add_ps(a, b); }
  static F subf(F a, F b) { return _mm512_sub_ps(a, b); }
  static F mulf(F a, F b) { return _mm512_mul_ps(a, b); }
  static F cvt(I a) { return _mm512_cvtepi32_ps(a); }
  static I load_q(const uint8_t* p, size_t gs) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))),
                              _mm256_loadu_si256(reinterpret_cast<const __m256i*>(second(p, gs))), 1);
  }
  static I low_nibbles(I v) { return _mm512_and_si512(v, _mm512_set1_epi8(0x0F)); }
  static I high_nibbles(I v) { return _mm512_and_si512(_mm512_srli_epi16(v, 4), _mm512_set1_epi8(0x0F)); }
  static __m128i load_8x2(const void* p, size_t gs) {  // 8 bytes of each group
    return _mm_unpacklo_epi64(_mm_loadl_epi64(static_cast<const __m128i*>(p)),
                              _mm_loadl_epi64(static_cast<const __m128i*>(second(p, gs))));
  }
  static I load_u8(const uint8_t* p, size_t gs) { return _mm512_cvtepu8_epi32(load_8x2(p, gs)); }
  static I load_s8(const int8_t* p, size_t gs) { return _mm512_cvtepi8_epi32(load_8x2(p, gs)); }
  static F load_f32(const float* p, size_t gs) {
    return _mm512_castpd_ps(_mm512_insertf64x4(_mm512_castpd256_pd512(_mm256_castps_pd(_mm256_loadu_ps(p))),
                                               _mm256_castps_pd(_mm256_loadu_ps(second(p, gs))), 1));
  }
  static F load_h(const uint16_t* p, size_t gs) {
    const __m256i h =
        _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))),
                                _mm_loadu_si128(reinterpret_cast<const __m128i*>(second(p, gs))), 1);
    return _mm512_cvtph_ps(h);
  }
  static I add_0x10(I w, const uint32_t* mask, size_t gs) {
    const __mmask64 m = _cvtu64_mask64(*mask | (static_cast<uint64_t>(*second(mask, gs)) << 32));
    return _mm512_mask_add_epi8(w, m, w, _mm512_set1_epi8(0x10));
  }
  static void store(const F* acc, int nc, int nr, float* y, size_t ldy) {
    alignas(64) float out[2 * R];
    for (int c = 0; c < nc; ++c) {
      _mm512_store_ps(out, acc[c]);
      std::memcpy(y + c * ldy, out, static_cast<size_t>(nr) * sizeof(float));
    }
  }
};

}  // namespace

void fill_repack(CpuKernels& k) {
  fill_vnni_repack<V256, V512>(k);
}

}  // namespace minfer::kernels::avx512
