// llama.cpp's llm_tokenizer_spm_session::tokenize, re-implemented: symbols in a linked list, a max-heap of
// candidate pairs keyed by (score, then smaller left index), stale pairs skipped by their recorded size.
// llama.cpp's resegment() falls back to a reverse-merge map, but only for symbols that are not tokens, and
// every merged symbol is a token, so a symbol is either a token or a run of byte tokens.
#include "tokenizer/spm.h"

#include <algorithm>

namespace minfer::tokenizer {
namespace {

// std::priority_queue order of llama.cpp's llm_bigram_spm::comparator: "a below b" when a's score is
// lower, or equal with a larger left index.
bool heap_less(const SpmScratch::Bigram& a, const SpmScratch::Bigram& b) {
  return a.score < b.score || (a.score == b.score && a.left > b.left);
}

}  // namespace

void spm_tokenize(const Vocab& vocab, std::string_view text, SpmScratch& scratch, std::vector<int32_t>& out) {
  auto& symbols = scratch.symbols;
  auto& heap = scratch.heap;
  symbols.clear();
  heap.clear();
  for (size_t off = 0; off < text.size();) {
    const size_t len = std::min(spm_char_len(static_cast<uint8_t>(text[off])), text.size() - off);
    const auto index = static_cast<int32_t>(symbols.size());
    symbols.push_back({static_cast<uint32_t>(off), static_cast<uint32_t>(len), index - 1,
                       off + len == text.size() ? -1 : index + 1});
    off += len;
  }
  const size_t max_len = vocab.max_token_len();
  auto try_add = [&](int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const auto& l = symbols[static_cast<size_t>(left)];
    const size_t size = l.len + symbols[static_cast<size_t>(right)].len;
    if (size > max_len) return;  // no token is that long
    const int32_t id = vocab.find(text.substr(l.off, size));
    if (id < 0) return;
    heap.push_back({vocab.score(id), left, right, static_cast<uint32_t>(size)});
    std::push_heap(heap.begin(), heap.end(), heap_less);
  };
  for (size_t i = 1; i < symbols.size(); ++i) try_add(static_cast<int32_t>(i) - 1, static_cast<int32_t>(i));

  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), heap_less);
    const SpmScratch::Bigram b = heap.back();
    heap.pop_back();
    auto& l = symbols[static_cast<size_t>(b.left)];
    auto& r = symbols[static_cast<size_t>(b.right)];
    if (l.len == 0 || r.len == 0 || l.len + r.len != b.size) continue;  // stale
    l.len += r.len;
    r.len = 0;
    l.next = r.next;
    if (r.next >= 0) symbols[static_cast<size_t>(r.next)].prev = b.left;
    try_add(l.prev, b.left);
    try_add(b.left, l.next);
  }

  for (int32_t i = symbols.empty() ? -1 : 0; i != -1; i = symbols[static_cast<size_t>(i)].next) {
    const auto& s = symbols[static_cast<size_t>(i)];
    const std::string_view piece = text.substr(s.off, s.len);
    const int32_t id = vocab.find(piece);
    if (id >= 0) {
      out.push_back(id);
      continue;
    }
    for (const char c : piece) out.push_back(vocab.byte_token(static_cast<uint8_t>(c)));
  }
}

}  // namespace minfer::tokenizer
