// The repacked ("x8") GEMM at the avxvnni level: repack_vnni.inc's skeleton on 256-bit vectors with the
// VEX-encoded vpdpbusd of AVX-VNNI, for CPUs that have it without AVX-512 (Intel client cores since Alder
// Lake; AMD Zen 5 has both). The rest of the level is the avx2 kernels. This file alone gets -mavxvnni.
#include <immintrin.h>

#include <cstring>
#include <type_traits>

#include "quant/blocks.h"
#include "quant/kernels/kernels.h"

namespace minfer::kernels::avxvnni {
namespace {

#include "quant/kernels/x86_avx2/repack_layouts.inc"

inline __m256i dpbusd256(__m256i acc, __m256i w, __m256i x) {
  return _mm256_dpbusd_avx_epi32(acc, w, x);
}
// Nibbles are < 16, so or-ing 0x10 adds 16.
inline __m256i add_0x10_256(__m256i w, uint32_t mask) {
  return _mm256_or_si256(w, high_bits_0x10(mask));
}

constexpr int kVectorRegs = 16;  // ymm0-15 without AVX-512

#include "quant/kernels/x86_avx2/repack_vnni.inc"

}  // namespace

void fill_repack(CpuKernels& k) {
  fill_vnni_repack<V256, void>(k);
}

}  // namespace minfer::kernels::avxvnni
