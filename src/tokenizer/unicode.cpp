// Two-stage code point class table built once from utf8proc's general categories.
#include "tokenizer/unicode.h"

#include <array>
#include <map>
#include <string>
#include <vector>

#include <utf8proc.h>

namespace minfer::tokenizer {
namespace {

constexpr uint32_t kMaxCodepoint = 0x110000;
constexpr uint32_t kBlockBits = 8;
constexpr uint32_t kBlockSize = 1u << kBlockBits;

CharClass class_from_category(uint32_t cp) {
  if (is_white_space(cp)) return CharClass::kSpace;
  // llama.cpp's tables are Unicode 15.1; Debian 12's utf8proc is 15.0. The one class-changing 15.1
  // addition is CJK Extension I (Lo); the others (U+2FFC..U+2FFF, U+31EF) are symbols, "other" either way.
  if (cp >= 0x2ebf0 && cp <= 0x2ee5d) return CharClass::kLetter;
  switch (utf8proc_category(static_cast<utf8proc_int32_t>(cp))) {
    case UTF8PROC_CATEGORY_LU:
    case UTF8PROC_CATEGORY_LL:
    case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO:
      return CharClass::kLetter;
    case UTF8PROC_CATEGORY_MN:
    case UTF8PROC_CATEGORY_MC:
    case UTF8PROC_CATEGORY_ME:
      return CharClass::kMark;
    case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_NL:
    case UTF8PROC_CATEGORY_NO:
      return CharClass::kNumber;
    default:
      return CharClass::kOther;
  }
}

// stage1[cp >> 8] selects a deduplicated 256-entry block of classes (about 60 KB in all).
struct ClassTable {
  std::vector<uint16_t> stage1;
  std::vector<CharClass> blocks;

  ClassTable() {
    stage1.resize(kMaxCodepoint / kBlockSize);
    std::map<std::array<CharClass, kBlockSize>, uint16_t> seen;
    std::array<CharClass, kBlockSize> block{};
    for (uint32_t b = 0; b < kMaxCodepoint / kBlockSize; ++b) {
      for (uint32_t i = 0; i < kBlockSize; ++i) block[i] = class_from_category((b << kBlockBits) | i);
      auto [it, inserted] = seen.emplace(block, static_cast<uint16_t>(seen.size()));
      if (inserted) blocks.insert(blocks.end(), block.begin(), block.end());
      stage1[b] = it->second;
    }
  }
};

const ClassTable& class_table() {
  static const ClassTable table;
  return table;
}

}  // namespace

bool is_white_space(uint32_t cp) {
  if (cp <= 0x20) return cp == 0x20 || (cp >= 0x09 && cp <= 0x0d);
  if (cp < 0x85) return false;
  return cp == 0x85 || cp == 0xa0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200a) || cp == 0x2028 ||
         cp == 0x2029 || cp == 0x202f || cp == 0x205f || cp == 0x3000;
}

CharClass char_class(uint32_t cp) {
  if (cp >= kMaxCodepoint) return CharClass::kOther;
  const ClassTable& t = class_table();
  return t.blocks[(static_cast<size_t>(t.stage1[cp >> kBlockBits]) << kBlockBits) | (cp & (kBlockSize - 1))];
}

void append_utf8(uint32_t cp, std::string& out) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xc0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xe0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else {
    out += static_cast<char>(0xf0 | ((cp >> 18) & 0x07));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  }
}

}  // namespace minfer::tokenizer
