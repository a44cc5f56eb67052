#include <gtest/gtest.h>

#include "gguf/reader.h"
#include "sample.h"

namespace minfer::gguf {
namespace {

TEST(Metadata, TypedAccessorsConvertFittingIntegersAndNameMismatches) {
  auto parsed = parse(test::sample_bytes(), "sample");
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  const Metadata& m = parsed->metadata;
  EXPECT_EQ(*m.get_u32("t.u8"), 200u);
  EXPECT_EQ(*m.get_u32("t.u32"), 4000000000u);
  EXPECT_EQ(*m.get_i32("t.i8"), -5);
  EXPECT_EQ(*m.get_i64("t.i64"), -(1ll << 40));
  EXPECT_FLOAT_EQ(*m.get_f32("t.f32"), 0.5f);
  EXPECT_FLOAT_EQ(*m.get_f32("t.f64"), -2.25f);
  EXPECT_TRUE(*m.get_bool("t.bool"));
  EXPECT_EQ(*m.get_string("t.str"), "h\xc3\xa9llo");
  EXPECT_EQ(*m.get_int_array("t.arr_i32"), (std::vector<int64_t>{1, -2, 3}));
  EXPECT_EQ(*m.get_string_array("t.arr_str"), (std::vector<std::string>{"a", "bc", ""}));

  auto wrong = m.get_u32("t.str");
  ASSERT_FALSE(wrong.ok());
  EXPECT_EQ(wrong.status().message(), "gguf: key 't.str' has type string, expected u32");
  auto negative = m.get_u32("t.i32");
  ASSERT_FALSE(negative.ok());
  EXPECT_NE(negative.status().message().find("does not fit u32"), std::string::npos);
  auto too_big = m.get_u32("t.u64");
  EXPECT_FALSE(too_big.ok());
  auto missing = m.get_u32("nope");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(*m.get_u32_or("nope", 9), 9u);
  EXPECT_FALSE(m.get_u32_or("t.str", 9).ok());
  EXPECT_FALSE(m.get_string_array("t.arr_i32").ok());
}

TEST(Metadata, SetKeepsOrderAndReplacesInPlace) {
  Metadata m;
  EXPECT_TRUE(m.set("b", Value::u32(1)));
  EXPECT_TRUE(m.set("a", Value::u32(2)));
  EXPECT_FALSE(m.set("b", Value::u32(3)));
  ASSERT_EQ(m.entries().size(), 2u);
  EXPECT_EQ(m.entries()[0].first, "b");
  EXPECT_EQ(*m.get_u32("b"), 3u);
  EXPECT_TRUE(m.erase("b"));
  EXPECT_EQ(*m.get_u32("a"), 2u);
  EXPECT_FALSE(m.contains("b"));
}

}  // namespace
}  // namespace minfer::gguf
