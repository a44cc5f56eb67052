#include "core/utf8.h"

namespace minfer {

int utf8_sequence_length(uint8_t lead) {
  if (lead < 0x80) return 1;
  if (lead >= 0xc2 && lead <= 0xdf) return 2;
  if (lead >= 0xe0 && lead <= 0xef) return 3;
  if (lead >= 0xf0 && lead <= 0xf4) return 4;
  return 0;
}

int32_t utf8_decode(std::string_view s, size_t pos, size_t* len) {
  *len = 1;
  const auto b0 = static_cast<uint8_t>(s[pos]);
  const int n = utf8_sequence_length(b0);
  if (n == 0 || pos + n > s.size()) return -1;
  if (n == 1) return b0;
  uint32_t cp = b0 & (0x7f >> n);
  for (int i = 1; i < n; ++i) {
    const auto b = static_cast<uint8_t>(s[pos + i]);
    if ((b & 0xc0) != 0x80) return -1;
    cp = (cp << 6) | (b & 0x3f);
  }
  // Overlong 3/4-byte forms, surrogates and > U+10FFFF (2-byte overlongs are excluded by the lead range).
  if ((n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) || (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff) {
    return -1;
  }
  *len = n;
  return static_cast<int32_t>(cp);
}

size_t utf8_valid_prefix(std::string_view s) {
  size_t pos = 0;
  while (pos < s.size()) {
    if (static_cast<uint8_t>(s[pos]) < 0x80) {
      ++pos;
      continue;
    }
    size_t len = 0;
    if (utf8_decode(s, pos, &len) < 0) return pos;
    pos += len;
  }
  return pos;
}

}  // namespace minfer
