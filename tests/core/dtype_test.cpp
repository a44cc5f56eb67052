#include "core/dtype.h"

#include <gtest/gtest.h>

namespace minfer {
namespace {

TEST(DType, BlockSizesMatchGgml) {
  EXPECT_EQ(*row_bytes(DType::Q4_0, 64), 36u);
  EXPECT_EQ(*row_bytes(DType::Q4_K, 256), 144u);
  EXPECT_EQ(*row_bytes(DType::Q6_K, 512), 420u);
  EXPECT_EQ(*row_bytes(DType::BF16, 3), 6u);
  EXPECT_FALSE(row_bytes(DType::Q8_0, 33).has_value());
  EXPECT_FALSE(dtype_traits(4).has_value());  // retired Q4_2
  EXPECT_EQ(dtype_from_name("Q4_K"), DType::Q4_K);
  EXPECT_EQ(dtype_from_name("bf16"), DType::BF16);
  EXPECT_FALSE(dtype_from_name("q4_k_m").has_value());
}

}  // namespace
}  // namespace minfer
