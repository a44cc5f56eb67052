// Shared helpers for the quant tests: deterministic random data, quantized buffers, tolerances.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "core/dtype.h"
#include "core/rng.h"
#include "quant/quant.h"

namespace minfer::quant::test {

inline const DType kComputeTypes[] = {DType::F32,  DType::F16,  DType::BF16, DType::Q4_0,
                                      DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q8_0,
                                      DType::Q4_K, DType::Q5_K, DType::Q6_K};

inline std::vector<float> random_floats(int64_t n, uint64_t seed, float scale = 1.0f) {
  Rng rng(seed);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& f : v) f = scale * static_cast<float>(rng.normal());
  return v;
}

// Bytes of `rows` rows of `n` elements in `t`, plus `pad` spare bytes (to place data misaligned).
inline std::vector<uint8_t> quantized(DType t, const std::vector<float>& x, int64_t rows, int64_t n,
                                      size_t offset = 0) {
  const size_t rb = *row_bytes(t, n);
  std::vector<uint8_t> out(rb * static_cast<size_t>(rows) + offset + 64);
  for (int64_t r = 0; r < rows; ++r) quantize_row(t, x.data() + r * n, out.data() + offset + r * rb, n);
  return out;
}

// Lengths to test for a type: multiples of its block, and odd lengths for the plain float types.
inline std::vector<int64_t> test_lengths(DType t) {
  const int64_t bs = traits(t).block_size;
  if (bs == 1) return {1, 7, 8, 13, 64, 100, 257, 1024};
  if (bs == 32) return {32, 64, 96, 256, 800, 4096};
  return {256, 512, 1280, 4096};
}

}  // namespace minfer::quant::test
