// GPT-2's reversible byte <-> code point map used by byte-level BPE vocabularies: printable bytes map to
// themselves, the other 68 bytes to U+0100.. in byte order (so ' ' is 'Ġ' U+0120, '\n' is 'Ċ' U+010A).
#pragma once

#include <array>
#include <cstdint>

namespace minfer {

// Code point that represents byte `b` in vocabulary strings.
inline uint32_t byte_to_codepoint(uint8_t b) {
  static const std::array<uint32_t, 256> kTable = [] {
    std::array<uint32_t, 256> t{};
    uint32_t next = 256;
    for (int i = 0; i < 256; ++i) {
      const bool printable = (i >= 33 && i <= 126) || (i >= 161 && i <= 172) || (i >= 174 && i <= 255);
      t[i] = printable ? static_cast<uint32_t>(i) : next++;
    }
    return t;
  }();
  return kTable[b];
}

// Byte represented by code point `cp`, or -1 when `cp` is not in the map.
inline int codepoint_to_byte(uint32_t cp) {
  static const std::array<int16_t, 324> kTable = [] {
    std::array<int16_t, 324> t{};
    t.fill(-1);
    for (int b = 0; b < 256; ++b) t[byte_to_codepoint(static_cast<uint8_t>(b))] = static_cast<int16_t>(b);
    return t;
  }();
  return cp < kTable.size() ? kTable[cp] : -1;
}

}  // namespace minfer
