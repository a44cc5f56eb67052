// AVX-512 (F/BW/VL/VNNI) kernels: the x86 kernel source rebuilt with EVEX encoding, 32 vector registers
// (4 x 4 tiles) and vpdpbusd for the int8 dots. This file alone gets the AVX-512 flags.
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <utility>
#include <vector>

#include "quant/blocks.h"
#include "quant/kernels/kernel_math.h"
#include "quant/kernels/kernels.h"

#define MINFER_X86_VNNI 1
#define MINFER_X86_MAX_NC 4  // 32 ymm registers: 4 rows x 4 tokens of accumulators

namespace minfer::kernels::avx512 {
void fill_repack(CpuKernels& k);  // repack_avx512.cpp

namespace shared {
// GCC 12's AVX-512 intrinsic headers start some results from _mm512_undefined_*(), which its
// -Wmaybe-uninitialized misreads once inlined; the values are fully written by the instruction.
// (GCC only: clang, which builds the fuzzers, has no such warning group.)
#pragma GCC diagnostic push
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include "quant/kernels/x86_avx2/vec16_x86.inc"
#include "quant/kernels/x86_avx2/attention_x86.inc"
#include "quant/kernels/x86_avx2/x86_kernels.inc"
#pragma GCC diagnostic pop
}  // namespace shared

void fill(CpuKernels& k) {
  shared::fill(k);
  fill_repack(k);
}
}  // namespace minfer::kernels::avx512
