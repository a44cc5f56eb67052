// Code point classes the pre-tokenizers need (letter, number, mark, whitespace, other) and a lenient
// UTF-8 reader that never fails: invalid bytes come back one at a time as class kOther.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace minfer::tokenizer {

// Regex-facing classes: \p{L}, \p{N}, \p{M}, \s, everything else. Whitespace wins over the general
// category (as in llama.cpp, where White_Space code points become `\s` before categories are looked at).
enum class CharClass : uint8_t { kOther = 0, kLetter = 1, kNumber = 2, kMark = 3, kSpace = 4 };

// Class of a code point. Categories are utf8proc's (Debian 12: Unicode 15.0); whitespace is the
// Unicode White_Space property. Values above U+10FFFF, surrogates and unassigned code points are kOther.
// Cost: two table loads after a one-time table build (~1.1M utf8proc lookups, a few ms, thread-safe).
CharClass char_class(uint32_t cp);

// True for the 25 White_Space code points (U+0009..U+000D, U+0020, U+0085, U+00A0, U+1680,
// U+2000..U+200A, U+2028, U+2029, U+202F, U+205F, U+3000).
bool is_white_space(uint32_t cp);

struct DecodedChar {
  uint32_t cp;   // decoded value; 0xFFFD for an invalid byte
  uint32_t len;  // bytes consumed, 1..4
};

// Reads one character at s[pos] (pos < s.size()) the way llama.cpp's unicode_cpt_from_utf8 does:
// a lead byte with enough continuation bytes is one character even if overlong or a surrogate;
// anything else is a single invalid byte (cp 0xFFFD). The caller keeps the original bytes.
inline DecodedChar decode_lenient(std::string_view s, size_t pos) {
  const auto b0 = static_cast<uint8_t>(s[pos]);
  if (b0 < 0x80) return {b0, 1};
  auto cont = [&](size_t i) { return i < s.size() && (static_cast<uint8_t>(s[i]) & 0xc0) == 0x80; };
  auto bits = [&](size_t i) { return static_cast<uint32_t>(static_cast<uint8_t>(s[i]) & 0x3f); };
  if ((b0 & 0x40) == 0) return {0xfffd, 1};
  if ((b0 & 0x20) == 0) {
    if (!cont(pos + 1)) return {0xfffd, 1};
    return {((b0 & 0x1fu) << 6) | bits(pos + 1), 2};
  }
  if ((b0 & 0x10) == 0) {
    if (!cont(pos + 1) || !cont(pos + 2)) return {0xfffd, 1};
    return {((b0 & 0x0fu) << 12) | (bits(pos + 1) << 6) | bits(pos + 2), 3};
  }
  if ((b0 & 0x08) == 0) {
    if (!cont(pos + 1) || !cont(pos + 2) || !cont(pos + 3)) return {0xfffd, 1};
    return {((b0 & 0x07u) << 18) | (bits(pos + 1) << 12) | (bits(pos + 2) << 6) | bits(pos + 3), 4};
  }
  return {0xfffd, 1};
}

// Appends the UTF-8 encoding of cp (no validation beyond the 4-byte limit).
void append_utf8(uint32_t cp, std::string& out);

}  // namespace minfer::tokenizer
