// Code point classes against utf8proc (the table is built from it; this checks the table plumbing and
// whitespace precedence) and a few values fixed by the Unicode standard.
#include <gtest/gtest.h>

#include <utf8proc.h>

#include "tokenizer/unicode.h"

namespace minfer::tokenizer {
namespace {

TEST(UnicodeTest, KnownClasses) {
  EXPECT_EQ(char_class('a'), CharClass::kLetter);
  EXPECT_EQ(char_class('7'), CharClass::kNumber);
  EXPECT_EQ(char_class(' '), CharClass::kSpace);
  EXPECT_EQ(char_class('\n'), CharClass::kSpace);
  EXPECT_EQ(char_class('!'), CharClass::kOther);
  EXPECT_EQ(char_class(0x4e2d), CharClass::kLetter);  // 中
  EXPECT_EQ(char_class(0x00b2), CharClass::kNumber);  // ² (No)
  EXPECT_EQ(char_class(0x2163), CharClass::kNumber);  // Ⅳ (Nl)
  EXPECT_EQ(char_class(0x0663), CharClass::kNumber);  // ٣ (Nd)
  EXPECT_EQ(char_class(0x0301), CharClass::kMark);    // combining acute
  EXPECT_EQ(char_class(0x0e34), CharClass::kMark);    // Thai vowel sign (Mn)
  EXPECT_EQ(char_class(0x00a0), CharClass::kSpace);   // NBSP: White_Space though category Zs
  EXPECT_EQ(char_class(0x3000), CharClass::kSpace);
  EXPECT_EQ(char_class(0x0085), CharClass::kSpace);    // NEL: White_Space though category Cc
  EXPECT_EQ(char_class(0x200b), CharClass::kOther);    // zero width space is not White_Space
  EXPECT_EQ(char_class(0x001c), CharClass::kOther);    // not White_Space (Python's isspace disagrees)
  EXPECT_EQ(char_class(0x1f999), CharClass::kOther);   // 🦙
  EXPECT_EQ(char_class(0x2ebf0), CharClass::kLetter);  // CJK Extension I (Unicode 15.1), as llama.cpp has it
  EXPECT_EQ(char_class(0x2ee5e), CharClass::kOther);
  EXPECT_EQ(char_class(0xd800), CharClass::kOther);  // surrogate
  EXPECT_EQ(char_class(0x110000), CharClass::kOther);
}

TEST(UnicodeTest, TableMatchesUtf8procEverywhere) {
  for (uint32_t cp = 0; cp < 0x110000; ++cp) {
    CharClass want = CharClass::kOther;
    const auto cat = utf8proc_category(static_cast<utf8proc_int32_t>(cp));
    if (cat >= UTF8PROC_CATEGORY_LU && cat <= UTF8PROC_CATEGORY_LO) want = CharClass::kLetter;
    if (cat >= UTF8PROC_CATEGORY_MN && cat <= UTF8PROC_CATEGORY_ME) want = CharClass::kMark;
    if (cat >= UTF8PROC_CATEGORY_ND && cat <= UTF8PROC_CATEGORY_NO) want = CharClass::kNumber;
    if (is_white_space(cp)) want = CharClass::kSpace;
    if (cp >= 0x2ebf0 && cp <= 0x2ee5d) want = CharClass::kLetter;  // Unicode 15.1, newer than utf8proc 2.8
    ASSERT_EQ(char_class(cp), want) << std::hex << cp;
  }
}

TEST(UnicodeTest, WhiteSpaceSet) {
  int n = 0;
  for (uint32_t cp = 0; cp < 0x110000; ++cp) n += is_white_space(cp);
  EXPECT_EQ(n, 25);  // PropList.txt White_Space
}

TEST(UnicodeTest, LenientDecoding) {
  auto dec = [](std::string_view s) { return decode_lenient(s, 0); };
  EXPECT_EQ(dec("a").cp, 'a');
  EXPECT_EQ(dec("\xc3\xa9").cp, 0xe9u);
  EXPECT_EQ(dec("\xc3\xa9").len, 2u);
  EXPECT_EQ(dec("\xf0\x9f\xa6\x99").cp, 0x1f999u);
  EXPECT_EQ(dec("\xff").cp, 0xfffdu);
  EXPECT_EQ(dec("\x80").len, 1u);
  EXPECT_EQ(dec("\xe4\xb8").len, 1u);  // truncated
  EXPECT_EQ(dec("\xe4"
                "a")
                .cp,
            0xfffdu);
  EXPECT_EQ(dec("\xed\xa0\x80").cp, 0xd800u);  // surrogates decode, like llama.cpp
  EXPECT_EQ(dec("\xc1\x81").cp, 0x41u);        // and so do overlong forms
}

}  // namespace
}  // namespace minfer::tokenizer
