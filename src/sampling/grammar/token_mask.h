// TokenTrie: every token's bytes in one preorder trie (flat arrays; a dead prefix skips its whole subtree),
// and compute_mask, which walks it through the Automaton to get the set of tokens allowed in a state.
// Built once per vocabulary and shared; mask computation is per run (it grows the run's Automaton).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "sampling/grammar/automaton.h"
#include "sampling/vocab_view.h"

namespace minfer::sampling::grammar {

class TokenTrie {
 public:
  // Tokens with empty bytes (control tokens) and EOG ids are not in the trie.
  explicit TokenTrie(const VocabView& vocab);
  // Shared per VocabView object: built on first use, reused while the vocab lives.
  static std::shared_ptr<const TokenTrie> for_vocab(const std::shared_ptr<const VocabView>& vocab);

  // Preorder layout (structure of arrays): a node's subtree is [node, subtree_end(node)), so a dead
  // prefix skips its whole subtree; depth(node) >= 1 counts bytes from the root.
  size_t n_nodes() const { return bytes_.size(); }
  uint8_t byte(uint32_t node) const { return bytes_[node]; }
  uint8_t depth(uint32_t node) const { return depths_[node]; }
  uint32_t subtree_end(uint32_t node) const { return subtree_end_[node]; }
  // Token whose bytes end at `node`, or n_vocab() (a spare bit past the last token) when none does.
  int32_t token(uint32_t node) const { return tokens_[node]; }
  size_t max_depth() const { return max_depth_; }
  // Node ranges [begin, end) made of whole top-level subtrees with about equal node counts: the mask
  // walk advances one cursor per range in lockstep so their dependent table loads overlap.
  const std::vector<uint32_t>& partition() const { return partition_; }
  int32_t n_vocab() const { return n_vocab_; }
  const std::vector<int32_t>& eog_ids() const { return eog_ids_; }
  // Other tokens with exactly the same bytes as token(node): (node, token).
  const std::vector<std::pair<uint32_t, int32_t>>& duplicates() const { return duplicates_; }

  static constexpr size_t kMaxDepth = 255;  // longer tokens are refused by the constructor (MINFER_CHECK)
  static constexpr int kCursors = 4;

 private:
  std::vector<uint8_t> bytes_;
  std::vector<uint8_t> depths_;
  std::vector<uint32_t> subtree_end_;
  std::vector<int32_t> tokens_;
  std::vector<uint32_t> partition_;  // kCursors + 1 boundaries
  std::vector<std::pair<uint32_t, int32_t>> duplicates_;
  std::vector<int32_t> eog_ids_;
  size_t max_depth_ = 0;
  int32_t n_vocab_ = 0;
};

// Bitset over token ids (bit i of words[i / 64]).
struct TokenMask {
  std::vector<uint64_t> words;
  bool test(int32_t id) const { return (words[static_cast<size_t>(id) >> 6] >> (id & 63)) & 1; }
  void set(int32_t id) { words[static_cast<size_t>(id) >> 6] |= uint64_t{1} << (id & 63); }
  size_t count() const;
};

// Tokens allowed in `state`: those whose bytes keep some parse alive (a trailing partial UTF-8 character
// must still be completable), plus the EOG ids when the state is accepting.
void compute_mask(const TokenTrie& trie, Automaton& automaton, int32_t state, TokenMask* mask);

}  // namespace minfer::sampling::grammar
