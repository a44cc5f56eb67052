#include "core/utf8.h"

#include <gtest/gtest.h>

#include "core/byte_unicode.h"

namespace minfer {
namespace {

TEST(Utf8, AcceptsValidAndRejectsMalformedSequences) {
  EXPECT_TRUE(utf8_valid("hello"));
  EXPECT_TRUE(utf8_valid("caf\xc3\xa9 \xe4\xb8\xad \xf0\x9f\x98\x80"));
  EXPECT_EQ(utf8_valid_prefix("ab\xc3"), 2u);                 // truncated
  EXPECT_EQ(utf8_valid_prefix("a\xc0\xaf"), 1u);              // overlong '/'
  EXPECT_EQ(utf8_valid_prefix("a\xe0\x80\xaf"), 1u);          // overlong 3-byte
  EXPECT_EQ(utf8_valid_prefix("a\xed\xa0\x80"), 1u);          // surrogate
  EXPECT_EQ(utf8_valid_prefix("a\xf4\x90\x80\x80"), 1u);      // > U+10FFFF
  EXPECT_EQ(utf8_valid_prefix("a\x80"), 1u);                  // stray continuation
}

TEST(Utf8, DecodesCodePoints) {
  size_t len = 0;
  EXPECT_EQ(utf8_decode("\xf0\x9f\x98\x80", 0, &len), 0x1f600);
  EXPECT_EQ(len, 4u);
  EXPECT_EQ(utf8_decode("\xff", 0, &len), -1);
  EXPECT_EQ(len, 1u);
}

TEST(ByteUnicode, IsABijectionMatchingGpt2) {
  EXPECT_EQ(byte_to_codepoint(' '), 0x120u);   // 'Ġ'
  EXPECT_EQ(byte_to_codepoint('\n'), 0x10au);  // 'Ċ'
  EXPECT_EQ(byte_to_codepoint('A'), static_cast<uint32_t>('A'));
  for (int b = 0; b < 256; ++b) EXPECT_EQ(codepoint_to_byte(byte_to_codepoint(static_cast<uint8_t>(b))), b);
  EXPECT_EQ(codepoint_to_byte(0x4e2d), -1);
}

}  // namespace
}  // namespace minfer
