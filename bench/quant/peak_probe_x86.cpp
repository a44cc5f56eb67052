// Machine-limit probes for reading kernel numbers: int8 multiply-add peak (vpdpbusd / vpmaddubsw chains
// held in registers). Only called after a runtime check that the CPU has the instructions.
#include <immintrin.h>

#include <cstdint>

namespace minfer::bench {

// Runs `iters` x 12 independent 512-bit vpdpbusd; returns a value so the work is not optimised away.
int64_t int8_peak_avx512_vnni(int64_t iters) {
  __m512i acc[12];
  for (int i = 0; i < 12; ++i) acc[i] = _mm512_set1_epi32(i);
  const __m512i a = _mm512_set1_epi8(3);
  const __m512i b = _mm512_set1_epi8(-2);
  for (int64_t it = 0; it < iters; ++it) {
    for (int i = 0; i < 12; ++i) acc[i] = _mm512_dpbusd_epi32(acc[i], a, b);
    __asm__ volatile("" : "+v"(acc[0]), "+v"(acc[1]), "+v"(acc[2]), "+v"(acc[3]), "+v"(acc[4]), "+v"(acc[5]));
  }
  __m512i s = acc[0];
  for (int i = 1; i < 12; ++i) s = _mm512_add_epi32(s, acc[i]);
  alignas(64) int32_t v[16];
  _mm512_store_si512(v, s);
  int64_t t = 0;
  for (int32_t x : v) t += x;
  return t;
}

// Same with AVX2 vpmaddubsw + vpmaddwd + vpaddd (the non-VNNI int8 path), 8 chains.
int64_t int8_peak_avx2(int64_t iters) {
  __m256i acc[8];
  for (int i = 0; i < 8; ++i) acc[i] = _mm256_set1_epi32(i);
  const __m256i a = _mm256_set1_epi8(3);
  const __m256i b = _mm256_set1_epi8(-2);
  const __m256i ones = _mm256_set1_epi16(1);
  for (int64_t it = 0; it < iters; ++it) {
    for (int i = 0; i < 8; ++i)
      acc[i] = _mm256_add_epi32(acc[i], _mm256_madd_epi16(_mm256_maddubs_epi16(a, b), ones));
    __asm__ volatile("" : "+x"(acc[0]), "+x"(acc[1]), "+x"(acc[2]), "+x"(acc[3]));
  }
  __m256i s = acc[0];
  for (int i = 1; i < 8; ++i) s = _mm256_add_epi32(s, acc[i]);
  alignas(32) int32_t v[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(v), s);
  int64_t t = 0;
  for (int32_t x : v) t += x;
  return t;
}

// Sums n bytes (n a multiple of 256) with 512-bit loads and 4 independent accumulators: a read-bandwidth
// probe that is not limited by instruction throughput.
uint64_t stream_sum_avx512(const uint8_t* p, size_t n) {
  __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0;
  for (size_t i = 0; i < n; i += 256) {
    a0 = _mm512_add_epi64(a0, _mm512_loadu_si512(p + i));
    a1 = _mm512_add_epi64(a1, _mm512_loadu_si512(p + i + 64));
    a2 = _mm512_add_epi64(a2, _mm512_loadu_si512(p + i + 128));
    a3 = _mm512_add_epi64(a3, _mm512_loadu_si512(p + i + 192));
  }
  alignas(64) uint64_t v[8];
  _mm512_store_si512(v, _mm512_add_epi64(_mm512_add_epi64(a0, a1), _mm512_add_epi64(a2, a3)));
  uint64_t t = 0;
  for (uint64_t x : v) t += x;
  return t;
}

}  // namespace minfer::bench
