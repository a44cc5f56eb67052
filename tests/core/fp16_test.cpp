#include "core/fp16.h"

#include <bit>
#include <cmath>
#include <cstring>

#include <gtest/gtest.h>

#include "core/rng.h"

namespace minfer {
namespace {

// The compiler's _Float16 (software-emulated on x86-64, round to nearest even) is the reference.
uint16_t reference_fp32_to_fp16(float f) {
  _Float16 h = static_cast<_Float16>(f);
  uint16_t bits;
  std::memcpy(&bits, &h, 2);
  return bits;
}

TEST(Fp16, EveryHalfConvertsToTheSameFloatAsTheCompiler) {
  for (uint32_t bits = 0; bits < 65536; ++bits) {
    _Float16 h;
    const auto b16 = static_cast<uint16_t>(bits);
    std::memcpy(&h, &b16, 2);
    const float want = static_cast<float>(h);
    const float got = fp16_to_fp32(b16);
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got)) << bits;
    } else {
      EXPECT_EQ(std::bit_cast<uint32_t>(got), std::bit_cast<uint32_t>(want)) << bits;
    }
  }
}

TEST(Fp16, FloatToHalfRoundsToNearestEvenLikeTheCompiler) {
  Rng rng(7);
  for (int i = 0; i < 2000000; ++i) {
    // Random bit patterns cover subnormals, overflow and ties; NaNs checked separately.
    const float f = std::bit_cast<float>(static_cast<uint32_t>(rng.next_u64()));
    if (std::isnan(f)) continue;
    ASSERT_EQ(fp32_to_fp16(f), reference_fp32_to_fp16(f)) << std::bit_cast<uint32_t>(f);
  }
  for (uint32_t bits = 0; bits < 65536; ++bits) {  // every half and the midpoints next to it round-trip
    const float f = fp16_to_fp32(static_cast<uint16_t>(bits));
    if (std::isnan(f)) continue;
    for (int d = -1; d <= 1; ++d) {
      const float g = std::bit_cast<float>(std::bit_cast<uint32_t>(f) + d);
      if (std::isnan(g)) continue;
      ASSERT_EQ(fp32_to_fp16(g), reference_fp32_to_fp16(g)) << bits << " " << d;
    }
  }
  EXPECT_EQ(fp32_to_fp16(std::nanf("")) & 0x7c00, 0x7c00);
  EXPECT_NE(fp32_to_fp16(std::nanf("")) & 0x03ff, 0);
}

TEST(Bf16, RoundsToNearestEvenAndKeepsNanQuiet) {
  EXPECT_EQ(fp32_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(fp32_to_bf16(std::bit_cast<float>(0x3f808000u)), 0x3f80);  // tie, even stays
  EXPECT_EQ(fp32_to_bf16(std::bit_cast<float>(0x3f818000u)), 0x3f82);  // tie, odd rounds up
  EXPECT_EQ(fp32_to_bf16(std::bit_cast<float>(0x3f808001u)), 0x3f81);
  const uint16_t nan = fp32_to_bf16(std::bit_cast<float>(0x7f800001u));  // signalling NaN in
  EXPECT_EQ(nan & 0x7f80, 0x7f80);
  EXPECT_NE(nan & 0x0040, 0);  // quiet bit set
  EXPECT_EQ(bf16_to_fp32(0x3f80), 1.0f);
}

}  // namespace
}  // namespace minfer
