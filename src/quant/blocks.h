// Block layouts of ggml's quantized types, byte for byte (GGUF tensor data is used in place).
// `d`/`m`/`dmin` fields hold IEEE half bits (convert with core/fp16.h). Kept C++17-clean for CUDA.
//
//   type  block  bytes  layout (per block)
//   Q4_0    32    18    d, qs[16]: x[j] = d*((qs[j] & 15) - 8), x[j+16] = d*((qs[j] >> 4) - 8)
//   Q4_1    32    20    d, m, qs[16]: x = d*q + m
//   Q5_0    32    22    d, qh[4] (bit j = 5th bit of element j), qs[16]: x = d*(q - 16)
//   Q5_1    32    24    d, m, qh[4], qs[16]: x = d*q + m
//   Q8_0    32    34    d, qs[32] int8
//   Q8_1    32    36    d, s = d*sum(qs), qs[32] int8 (activation format of Q4_1/Q5_1 dots)
//   Q4_K   256   144    d, dmin, scales[12] (8 x 6-bit scale + 6-bit min), qs[128]
//   Q5_K   256   176    d, dmin, scales[12], qh[32], qs[128]
//   Q6_K   256   210    ql[128], qh[64], scales[16] int8, d
//   Q8_K   256   292    float d, qs[256] int8, bsums[16] int16 (sums of 16 quants; activations only)
#pragma once

#include <cstdint>

namespace minfer::quant {

inline constexpr int kQK4_0 = 32;
inline constexpr int kQK4_1 = 32;
inline constexpr int kQK5_0 = 32;
inline constexpr int kQK5_1 = 32;
inline constexpr int kQK8_0 = 32;
inline constexpr int kQK8_1 = 32;
inline constexpr int kQK_K = 256;
inline constexpr int kKScaleSize = 12;

struct BlockQ4_0 {
  uint16_t d;
  uint8_t qs[kQK4_0 / 2];
};
static_assert(sizeof(BlockQ4_0) == 18, "wrong q4_0 block size");

struct BlockQ4_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qs[kQK4_1 / 2];
};
static_assert(sizeof(BlockQ4_1) == 20, "wrong q4_1 block size");

struct BlockQ5_0 {
  uint16_t d;
  uint8_t qh[4];
  uint8_t qs[kQK5_0 / 2];
};
static_assert(sizeof(BlockQ5_0) == 22, "wrong q5_0 block size");

struct BlockQ5_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qh[4];
  uint8_t qs[kQK5_1 / 2];
};
static_assert(sizeof(BlockQ5_1) == 24, "wrong q5_1 block size");

struct BlockQ8_0 {
  uint16_t d;
  int8_t qs[kQK8_0];
};
static_assert(sizeof(BlockQ8_0) == 34, "wrong q8_0 block size");

struct BlockQ8_1 {
  uint16_t d;
  uint16_t s;  // d * sum(qs)
  int8_t qs[kQK8_1];
};
static_assert(sizeof(BlockQ8_1) == 36, "wrong q8_1 block size");

struct BlockQ4_K {
  uint16_t d;     // super-block scale of the 6-bit scales
  uint16_t dmin;  // super-block scale of the 6-bit mins
  uint8_t scales[kKScaleSize];
  uint8_t qs[kQK_K / 2];  // 4 groups of 64: low nibbles = first 32, high nibbles = next 32
};
static_assert(sizeof(BlockQ4_K) == 144, "wrong q4_K block size");

struct BlockQ5_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[kKScaleSize];
  uint8_t qh[kQK_K / 8];
  uint8_t qs[kQK_K / 2];
};
static_assert(sizeof(BlockQ5_K) == 176, "wrong q5_K block size");

struct BlockQ6_K {
  uint8_t ql[kQK_K / 2];      // low 4 bits
  uint8_t qh[kQK_K / 4];      // high 2 bits
  int8_t scales[kQK_K / 16];  // 8-bit scales of 16-element groups
  uint16_t d;
};
static_assert(sizeof(BlockQ6_K) == 210, "wrong q6_K block size");

struct BlockQ8_K {
  float d;
  int8_t qs[kQK_K];
  int16_t bsums[kQK_K / 16];
};
static_assert(sizeof(BlockQ8_K) == 292, "wrong q8_K block size");

}  // namespace minfer::quant
