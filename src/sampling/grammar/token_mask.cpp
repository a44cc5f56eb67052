// Token trie construction (sorted bytes -> preorder nodes) and the trie walk that computes a state's mask.
#include "sampling/grammar/token_mask.h"

#include "core/check.h"

#include <algorithm>
#include <bit>
#include <mutex>
#include <numeric>

namespace minfer::sampling::grammar {

TokenTrie::TokenTrie(const VocabView& vocab) : eog_ids_(vocab.eog_ids), n_vocab_(vocab.n_vocab()) {
  // EOG tokens are never matched as text (some, like `</s>`, have bytes): they mean end of input.
  std::vector<int32_t> ids;
  for (int32_t id = 0; id < n_vocab_; ++id) {
    const std::string& b = vocab.token_bytes[static_cast<size_t>(id)];
    if (b.empty() || vocab.is_eog(id)) continue;
    MINFER_CHECK(b.size() <= kMaxDepth, "token {} has {} bytes; the mask trie supports {}", id, b.size(),
                 kMaxDepth);
    ids.push_back(id);
  }
  std::stable_sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) {
    return vocab.token_bytes[static_cast<size_t>(a)] < vocab.token_bytes[static_cast<size_t>(b)];
  });
  // 1. Preorder trie from the sorted strings (a node per new byte past the common prefix).
  struct Pre {
    uint32_t subtree_end;
    int32_t token;
    uint8_t byte;
  };
  std::vector<Pre> pre;
  std::vector<std::pair<uint32_t, int32_t>> pre_dups;
  std::vector<uint32_t> open;  // open[d] = node at depth d+1 on the current path
  const std::string* prev = nullptr;
  for (int32_t id : ids) {
    const std::string& s = vocab.token_bytes[static_cast<size_t>(id)];
    size_t lcp = 0;
    if (prev != nullptr) {
      const size_t m = std::min(prev->size(), s.size());
      while (lcp < m && (*prev)[lcp] == s[lcp]) ++lcp;
    }
    while (open.size() > lcp) {
      pre[open.back()].subtree_end = static_cast<uint32_t>(pre.size());
      open.pop_back();
    }
    for (size_t k = lcp; k < s.size(); ++k) {
      open.push_back(static_cast<uint32_t>(pre.size()));
      pre.push_back(Pre{0, -1, static_cast<uint8_t>(s[k])});
    }
    Pre& end = pre[open.back()];
    if (end.token < 0) {
      end.token = id;
    } else {
      pre_dups.emplace_back(open.back(), id);
    }
    prev = &s;
  }
  while (!open.empty()) {
    pre[open.back()].subtree_end = static_cast<uint32_t>(pre.size());
    open.pop_back();
  }
  // 2. Structure of arrays, and the cursor partition at top-level subtree boundaries.
  const auto n = static_cast<uint32_t>(pre.size());
  bytes_.resize(n);
  depths_.resize(n);
  subtree_end_.resize(n);
  tokens_.resize(n);
  std::vector<uint32_t> stack;
  for (uint32_t i = 0; i < n; ++i) {
    while (!stack.empty() && subtree_end_[stack.back()] <= i) stack.pop_back();
    bytes_[i] = pre[i].byte;
    subtree_end_[i] = pre[i].subtree_end;
    tokens_[i] = pre[i].token >= 0 ? pre[i].token : n_vocab_;
    depths_[i] = static_cast<uint8_t>(stack.size() + 1);
    max_depth_ = std::max(max_depth_, stack.size() + 1);
    stack.push_back(i);
  }
  partition_.push_back(0);
  for (int k = 1; k < kCursors; ++k) {
    const uint64_t target = static_cast<uint64_t>(n) * static_cast<uint64_t>(k) / kCursors;
    uint32_t b = partition_.back();
    while (b < n && b < target) b = subtree_end_[b];
    partition_.push_back(b);
  }
  partition_.push_back(n);
  duplicates_ = std::move(pre_dups);
  std::sort(duplicates_.begin(), duplicates_.end());
}

std::shared_ptr<const TokenTrie> TokenTrie::for_vocab(const std::shared_ptr<const VocabView>& vocab) {
  static std::mutex mu;
  static std::vector<std::pair<std::weak_ptr<const VocabView>, std::shared_ptr<const TokenTrie>>> cache;
  std::lock_guard<std::mutex> lock(mu);
  cache.erase(std::remove_if(cache.begin(), cache.end(), [](const auto& e) { return e.first.expired(); }),
              cache.end());
  for (const auto& e : cache) {
    if (e.first.lock() == vocab) return e.second;
  }
  auto trie = std::make_shared<const TokenTrie>(*vocab);
  cache.emplace_back(vocab, trie);
  return trie;
}

size_t TokenMask::count() const {
  size_t n = 0;
  for (uint64_t w : words) n += static_cast<size_t>(std::popcount(w));
  return n;
}

void compute_mask(const TokenTrie& trie, Automaton& automaton, int32_t state, TokenMask* mask) {
  // One spare bit past the last token absorbs nodes that end no token, so marking is branch-free.
  const size_t n_words = (static_cast<size_t>(trie.n_vocab()) + 1 + 63) / 64;
  mask->words.assign(n_words, 0);
  uint64_t* words = mask->words.data();

  struct Cursor {
    uint32_t i;
    uint32_t end;
    int32_t at_depth[TokenTrie::kMaxDepth + 1];  // state after the first d bytes of the current path
  };
  constexpr int kN = TokenTrie::kCursors;
  Cursor cursors[kN];
  for (int k = 0; k < kN; ++k) {
    cursors[k].i = trie.partition()[static_cast<size_t>(k)];
    cursors[k].end = trie.partition()[static_cast<size_t>(k) + 1];
    cursors[k].at_depth[0] = state;
  }
  const int32_t* trans = automaton.transitions();
  // One node of one cursor. Returns false when the cursor is done.
  auto advance = [&](Cursor& c) {
    const uint32_t i = c.i;
    const uint8_t d = trie.depth(i);
    const int32_t from = c.at_depth[d - 1];
    int32_t to = trans[static_cast<size_t>(from) * 256 + trie.byte(i)];
    if (to == Automaton::kUnknown) [[unlikely]] {
      to = automaton.step(from, trie.byte(i));
      trans = automaton.transitions();  // the table may have grown
    }
    if (to < 0) {
      c.i = trie.subtree_end(i);  // no token under this prefix can be allowed
      return;
    }
    c.at_depth[d] = to;
    const auto tok = static_cast<uint32_t>(trie.token(i));
    words[tok >> 6] |= uint64_t{1} << (tok & 63);
    c.i = i + 1;
  };
  for (;;) {
    bool all_live = true;
    for (int k = 0; k < kN; ++k) all_live = all_live && cursors[k].i < cursors[k].end;
    if (!all_live) break;
    // Lockstep: the four dependent load chains are independent of each other.
    for (int k = 0; k < kN; ++k) advance(cursors[k]);
  }
  for (int k = 0; k < kN; ++k) {
    while (cursors[k].i < cursors[k].end) advance(cursors[k]);
  }
  // Drop the spare bit.
  const auto spare = static_cast<uint32_t>(trie.n_vocab());
  words[spare >> 6] &= ~(uint64_t{1} << (spare & 63));
  for (const auto& [node, token] : trie.duplicates()) {
    if (mask->test(trie.token(node))) mask->set(token);
  }
  if (automaton.accepting(state)) {
    for (int32_t id : trie.eog_ids()) {
      if (id >= 0 && id < trie.n_vocab()) mask->set(id);
    }
  }
}

}  // namespace minfer::sampling::grammar
