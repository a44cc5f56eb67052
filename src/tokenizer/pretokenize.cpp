// Hand-written matchers for the qwen2/qwen35 split regexes, with std::regex's ECMAScript semantics as
// llama.cpp runs them: at each position the first alternative that matches wins, greedy with backtracking.
#include "tokenizer/pretokenize.h"

#include <array>

#include "tokenizer/unicode.h"

namespace minfer::tokenizer {
namespace {

// Classes seen by the matcher. kEnd stands for "past the fragment" so that no class test matches it.
enum Cls : uint8_t { kOther, kLetter, kNumber, kSpace, kEnd };

struct Char {
  uint32_t cp;
  uint32_t len;
  Cls cls;
};

constexpr std::array<Cls, 128> kAsciiClass = [] {
  std::array<Cls, 128> t{};
  for (int c = 0; c < 128; ++c) {
    Cls k = kOther;
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) k = kLetter;
    if (c >= '0' && c <= '9') k = kNumber;
    if (c == ' ' || (c >= 0x09 && c <= 0x0d)) k = kSpace;
    t[c] = k;
  }
  return t;
}();

class Matcher {
 public:
  Matcher(std::string_view s, bool marks, int max_digits) : s_(s), marks_(marks), max_digits_(max_digits) {}

  Char at(size_t pos) const {
    if (pos >= s_.size()) return {0, 0, kEnd};
    const auto b = static_cast<uint8_t>(s_[pos]);
    if (b < 0x80) return {b, 1, kAsciiClass[b]};
    const DecodedChar d = decode_lenient(s_, pos);
    // llama.cpp classifies the decoded value (an overlong form classifies as the character it spells).
    if (d.cp < 0x80) return {d.cp, d.len, kAsciiClass[d.cp]};
    switch (char_class(d.cp)) {
      case CharClass::kLetter:
        return {d.cp, d.len, kLetter};
      case CharClass::kNumber:
        return {d.cp, d.len, kNumber};
      case CharClass::kSpace:
        return {d.cp, d.len, kSpace};
      case CharClass::kMark:
        return {d.cp, d.len, marks_ ? kLetter : kOther};
      case CharClass::kOther:
        break;
    }
    return {d.cp, d.len, kOther};
  }

  // End of the run of `cls` characters starting at pos.
  size_t run(size_t pos, Cls cls) const {
    for (;;) {
      const Char c = at(pos);
      if (c.cls != cls) return pos;
      pos += c.len;
    }
  }

  size_t crlf_run(size_t pos) const {
    while (pos < s_.size() && (s_[pos] == '\r' || s_[pos] == '\n')) ++pos;
    return pos;
  }

  // Length of the longest match at pos (pos < size).
  size_t match(size_t pos) const {
    const Char c = at(pos);
    const size_t after = pos + c.len;

    // (?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])
    if (c.cp == '\'') {
      const Char c1 = at(after);
      const uint32_t l1 = lower_ascii(c1.cp);
      if (l1 == 's' || l1 == 't' || l1 == 'm' || l1 == 'd') return after + c1.len;
      if (l1 == 'r' || l1 == 'v' || l1 == 'l') {
        const Char c2 = at(after + c1.len);
        const uint32_t l2 = lower_ascii(c2.cp);
        if (c2.cls != kEnd &&
            ((l1 == 'r' && l2 == 'e') || (l1 == 'v' && l2 == 'e') || (l1 == 'l' && l2 == 'l'))) {
          return after + c1.len + c2.len;
        }
      }
    }
    // [^\r\n\p{L}\p{N}]?\p{L}+   (qwen35: [\p{L}\p{M}]+, marks are kLetter here)
    if (c.cls == kLetter) return run(after, kLetter);
    if ((c.cls == kOther || c.cls == kSpace) && c.cp != '\r' && c.cp != '\n') {
      const Char c1 = at(after);
      if (c1.cls == kLetter) return run(after + c1.len, kLetter);
    }
    // \p{N} (llama3: \p{N}{1,3})
    if (c.cls == kNumber) {
      size_t end = after;
      for (int n = 1; n < max_digits_; ++n) {
        const Char d = at(end);
        if (d.cls != kNumber) break;
        end += d.len;
      }
      return end;
    }
    // ' ?[^\s\p{L}\p{N}]+[\r\n]*'
    if (c.cls == kOther) return crlf_run(run(after, kOther));
    if (c.cp == ' ') {
      const Char c1 = at(after);
      if (c1.cls == kOther) return crlf_run(run(after + c1.len, kOther));
    }
    // Only whitespace is left (c.cls == kSpace): \s*[\r\n]+ | \s+(?!\S) | \s+
    size_t end = pos;
    size_t last_start = pos;  // start of the last whitespace character of the run
    size_t after_crlf = 0;    // end of the last \r or \n in the run
    size_t count = 0;
    for (;;) {
      const Char w = at(end);
      if (w.cls != kSpace) break;
      last_start = end;
      end += w.len;
      ++count;
      if (w.cp == '\r' || w.cp == '\n') after_crlf = end;
    }
    if (after_crlf != 0) return after_crlf;
    if (count > 1 && end < s_.size()) return last_start;  // leave one space for the next word
    return end;
  }

 private:
  static uint32_t lower_ascii(uint32_t cp) { return (cp >= 'A' && cp <= 'Z') ? cp + 32 : cp; }

  std::string_view s_;
  bool marks_;
  int max_digits_;
};

}  // namespace

Result<PreTokenizer> pre_tokenizer_from_name(std::string_view name) {
  if (name == "qwen2" || name == "deepseek-r1-qwen") return PreTokenizer::kQwen2;
  if (name == "qwen35") return PreTokenizer::kQwen35;
  if (name == "llama-bpe" || name == "llama3" || name == "llama-v3") return PreTokenizer::kLlama3;
  return unsupported(
      "tokenizer: pre-tokenizer '{}' (tokenizer.ggml.pre) is not supported; known: qwen2, "
      "deepseek-r1-qwen, qwen35, llama-bpe (llama3, llama-v3)",
      name);
}

std::string_view pre_tokenizer_name(PreTokenizer kind) {
  switch (kind) {
    case PreTokenizer::kQwen35: return "qwen35";
    case PreTokenizer::kLlama3: return "llama-bpe";
    case PreTokenizer::kQwen2: break;
  }
  return "qwen2";
}

bool WordSplitter::next(std::string_view* word) {
  if (pos_ >= text_.size()) return false;
  const size_t end = Matcher(text_, marks_, max_digits_).match(pos_);
  *word = text_.substr(pos_, end - pos_);
  pos_ = end;
  return true;
}

}  // namespace minfer::tokenizer
