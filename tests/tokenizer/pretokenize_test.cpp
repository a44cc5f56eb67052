// Pre-tokenizer splits: hand-checked cases, and a randomized comparison with std::regex running the
// published qwen2/qwen35 patterns the way llama.cpp does (one byte per code point, categories collapsed).
#include <gtest/gtest.h>

#include <regex>
#include <string>
#include <vector>

#include "core/rng.h"
#include "tokenizer/pretokenize.h"
#include "tokenizer/unicode.h"

namespace minfer::tokenizer {
namespace {

using Words = std::vector<std::string>;

Words split(std::string_view text, PreTokenizer kind = PreTokenizer::kQwen2) {
  Words out;
  WordSplitter s(kind, text);
  for (std::string_view w; s.next(&w);) out.emplace_back(w);
  return out;
}

TEST(PretokenizeTest, HandCheckedQwen2) {
  EXPECT_EQ(split("Hello world"), (Words{"Hello", " world"}));
  EXPECT_EQ(split("  a"), (Words{" ", " a"}));
  EXPECT_EQ(split("a  "), (Words{"a", "  "}));  // trailing run: \s+(?!\S) at the end takes all
  EXPECT_EQ(split("I'm it's"), (Words{"I", "'m", " it", "'s"}));
  EXPECT_EQ(split("'tis"), (Words{"'t", "is"}));
  EXPECT_EQ(split("YOU'RE"), (Words{"YOU", "'RE"}));
  EXPECT_EQ(split("12345"), (Words{"1", "2", "3", "4", "5"}));
  EXPECT_EQ(split("a\n\n b"), (Words{"a", "\n\n", " b"}));
  EXPECT_EQ(split("x \n\t y"), (Words{"x", " \n", "\t", " y"}));
  EXPECT_EQ(split("foo()!\n\nbar"), (Words{"foo", "()!\n\n", "bar"}));
  EXPECT_EQ(split(" ?!x"), (Words{" ?!", "x"}));
  EXPECT_EQ(split("(paren)"), (Words{"(paren", ")"}));
  EXPECT_EQ(split("\xc2\xa0nbsp"), (Words{"\xc2\xa0nbsp"}));  // NBSP is \s and may prefix a word
  EXPECT_EQ(split("\xe4\xb8\xad\xe6\x96\x87 ok"), (Words{"\xe4\xb8\xad\xe6\x96\x87", " ok"}));
}

// llama3 (llama-bpe): numbers in runs of at most three digits, the rest as qwen2.
TEST(PretokenizeTest, Llama3GroupsDigitsByThree) {
  EXPECT_EQ(split("12345", PreTokenizer::kLlama3), (Words{"123", "45"}));
  EXPECT_EQ(split("a1234567b", PreTokenizer::kLlama3), (Words{"a", "123", "456", "7", "b"}));
  EXPECT_EQ(split("I'm 42!", PreTokenizer::kLlama3), (Words{"I", "'m", " ", "42", "!"}));
  EXPECT_EQ(split("Hello world", PreTokenizer::kLlama3), (Words{"Hello", " world"}));
  EXPECT_EQ(*pre_tokenizer_from_name("llama-bpe"), PreTokenizer::kLlama3);
  EXPECT_EQ(pre_tokenizer_name(PreTokenizer::kLlama3), "llama-bpe");
}

TEST(PretokenizeTest, MarksJoinLettersOnlyInQwen35) {
  const std::string cafe = "cafe\xcc\x81s";  // e + U+0301
  EXPECT_EQ(split(cafe, PreTokenizer::kQwen2), (Words{"cafe", "\xcc\x81s"}));
  EXPECT_EQ(split(cafe, PreTokenizer::kQwen35), (Words{cafe}));
}

TEST(PretokenizeTest, InvalidBytesAreSplitNotDropped) {
  EXPECT_EQ(split("\xff\xfeok"), (Words{"\xff\xfe", "ok"}));
  EXPECT_EQ(split("a\xe4"), (Words{"a", "\xe4"}));
}

// --- std::regex reference, following llama.cpp's unicode_regex_split fallback -----------------------

const char* pattern(PreTokenizer kind) {
  return kind == PreTokenizer::kQwen2 ? "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^"
                                        "\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
                                        "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
                                      : "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^"
                                        "\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| "
                                        "?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
}

// \p{X} -> a byte standing for category X plus its ASCII members; brackets added outside a class.
std::string collapse_pattern(const std::string& re) {
  std::string out;
  bool inside = false;
  for (size_t i = 0; i < re.size(); ++i) {
    if (re[i] == '[' && (i == 0 || re[i - 1] != '\\')) inside = true;
    if (inside && re[i] == ']' && re[i - 1] != '\\') inside = false;
    if (re.compare(i, 3, "\\p{") == 0) {
      const char cat = re[i + 3];
      std::string cls = cat == 'L' ? "\xd2\x41-\x5a\x61-\x7a" : cat == 'N' ? "\xd1\x30-\x39" : "\xd4";
      out += inside ? cls : "[" + cls + "]";
      i += 4;
      continue;
    }
    out += re[i];
  }
  return out;
}

// One byte per code point: ASCII as is, White_Space -> \v, letters/numbers/marks -> their category byte.
std::string collapse_text(std::string_view text, std::vector<size_t>* starts) {
  std::string out;
  for (size_t i = 0; i < text.size();) {
    const DecodedChar d = decode_lenient(text, i);
    starts->push_back(i);
    char c = '\xd0';
    if (d.cp < 0x80) {
      c = static_cast<char>(d.cp);
    } else if (is_white_space(d.cp)) {
      c = '\x0b';
    } else if (char_class(d.cp) == CharClass::kLetter) {
      c = '\xd2';
    } else if (char_class(d.cp) == CharClass::kNumber) {
      c = '\xd1';
    } else if (char_class(d.cp) == CharClass::kMark) {
      c = '\xd4';
    }
    out += c;
    i += d.len;
  }
  starts->push_back(text.size());
  return out;
}

Words regex_split(std::string_view text, PreTokenizer kind) {
  static const std::regex qwen2(collapse_pattern(pattern(PreTokenizer::kQwen2)));
  static const std::regex qwen35(collapse_pattern(pattern(PreTokenizer::kQwen35)));
  std::vector<size_t> starts;
  const std::string collapsed = collapse_text(text, &starts);
  Words out;
  size_t prev = 0;
  auto emit = [&](size_t from, size_t to) {
    out.emplace_back(text.substr(starts[from], starts[to] - starts[from]));
  };
  const std::regex& re = kind == PreTokenizer::kQwen2 ? qwen2 : qwen35;
  for (auto it = std::sregex_iterator(collapsed.begin(), collapsed.end(), re); it != std::sregex_iterator();
       ++it) {
    const auto pos = static_cast<size_t>(it->position());
    if (pos > prev) emit(prev, pos);
    emit(pos, pos + static_cast<size_t>(it->length()));
    prev = pos + static_cast<size_t>(it->length());
  }
  if (prev < collapsed.size()) emit(prev, collapsed.size());
  return out;
}

TEST(PretokenizeTest, MatchesStdRegexOnRandomText) {
  const std::string alphabet[] = {"a",
                                  "Z",
                                  "s",
                                  "t",
                                  "re",
                                  "E",
                                  "ll",
                                  "\xc3\xa9",
                                  "\xcc\x81",
                                  "1",
                                  "\xc2\xb2",
                                  "\xd9\xa3",
                                  " ",
                                  "  ",
                                  "\t",
                                  "\n",
                                  "\r",
                                  "\r\n",
                                  "\v",
                                  "\f",
                                  "\x1c",
                                  "\xc2\xa0",
                                  "\xe3\x80\x80",
                                  "\xe2\x80\xa8",
                                  "\xc2\x85",
                                  "'",
                                  "'s",
                                  "'S",
                                  "'re",
                                  "'lL",
                                  "'Ve",
                                  "'d",
                                  "!",
                                  "?",
                                  ".",
                                  "_",
                                  "-",
                                  "(",
                                  "\xe4\xb8\xad",
                                  "\xf0\x9f\x98\x80",
                                  "\xe2\x80\x8d",
                                  "\xe0\xb8\xb4",
                                  "\xff",
                                  "\x80",
                                  "\xe4",
                                  "\xed\xa0\x80"};
  Rng rng(1234);
  for (const PreTokenizer kind : {PreTokenizer::kQwen2, PreTokenizer::kQwen35}) {
    for (int i = 0; i < 3000; ++i) {
      std::string s;
      const uint64_t n = 1 + rng.below(16);
      for (uint64_t j = 0; j < n; ++j) s += alphabet[rng.below(std::size(alphabet))];
      ASSERT_EQ(split(s, kind), regex_split(s, kind)) << pre_tokenizer_name(kind) << " on '" << s << "'";
    }
  }
}

}  // namespace
}  // namespace minfer::tokenizer
