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

#include "quant/kernels/x86_avx512/v512.inc"

}  // namespace

void fill_repack(CpuKernels& k) {
  fill_vnni_repack<V256, V512>(k);
}

// Intel Xeon (family 6 model 167, AMX; docs/KERNELS.md "Decode on the Intel Xeon"): a one-token GEMV at
// the plain kernels reached 10-12 GB/s per thread against the 19 GB/s one thread streams, with the
// unpack far from compute-bound (the same kernel ran 38-47 GB/s from L2): the hardware prefetcher alone
// kept too few lines in flight. 4 KiB ahead in each group's stream and 16-row pairs from one token took
// the 0.5B Q4_0's decode from 60-63 to 72-75 tok/s on 2 threads.
void fill_repack_xeon(CpuKernels& k) {
  fill_vnni_repack<V256, V512, /*kPrefetch=*/4096, /*kPairMinTokens=*/1>(k);
}

}  // namespace minfer::kernels::avx512
