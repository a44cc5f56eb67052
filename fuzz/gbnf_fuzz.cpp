// libFuzzer target: GBNF grammars (user input: --grammar, the server's "grammar" field). Bytes up to the
// first NUL are the grammar, the rest a text to match. Parse must return a Status or a grammar whose
// printed form (to_gbnf) parses again to the same rules (the same lines; reparsing numbers rules in
// order of first use, so the order may change), and matching must not crash or hang.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "sampling/grammar/grammar.h"
#include "sampling/grammar/matcher.h"

namespace {

std::vector<std::string> sorted_lines(const std::string& text) {
  std::vector<std::string> lines;
  size_t start = 0;
  while (start < text.size()) {
    const size_t end = text.find('\n', start);
    lines.push_back(text.substr(start, end - start));
    if (end == std::string::npos) break;
    start = end + 1;
  }
  std::sort(lines.begin(), lines.end());
  return lines;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > (size_t{1} << 14)) return 0;
  const std::string_view all(reinterpret_cast<const char*>(data), size);
  const size_t nul = all.find('\0');
  const std::string_view gbnf = all.substr(0, nul);
  const std::string_view text = nul == std::string_view::npos ? std::string_view() : all.substr(nul + 1, 256);
  namespace g = minfer::sampling::grammar;
  auto grammar = g::Grammar::parse(gbnf);
  if (!grammar.ok()) return 0;
  const std::string printed = (*grammar)->to_gbnf();
  auto again = g::Grammar::parse(printed, (*grammar)->rule_name((*grammar)->root()));
  if (!again.ok()) __builtin_trap();  // our own printout must parse
  if (sorted_lines((*again)->to_gbnf()) != sorted_lines(printed)) __builtin_trap();  // the same rules
  (void)g::grammar_accepts(*grammar, text);
  return 0;
}
