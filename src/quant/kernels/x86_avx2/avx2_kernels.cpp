// AVX2 + FMA + F16C kernels (this file alone is compiled with -mavx2 -mfma -mf16c).
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

#define MINFER_X86_VNNI 0
#define MINFER_X86_MAX_NC 2  // 16 ymm registers: 4 rows x 2 tokens of accumulators

namespace minfer::kernels::avx2 {
#include "quant/kernels/x86_avx2/vec16_x86.inc"
#include "quant/kernels/x86_avx2/attention_x86.inc"
#include "quant/kernels/x86_avx2/x86_kernels.inc"
}  // namespace minfer::kernels::avx2
