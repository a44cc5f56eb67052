// Merge-rank BPE over one pre-tokenized word: start from one byte token per byte, repeatedly apply the
// lowest-ranked merge present (leftmost first on ties), as llama.cpp's llm_tokenizer_bpe_session does.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace minfer::tokenizer {

// (left id, right id) -> rank, and rank -> merged id. Each slot packs both ids and the rank into 64 bits
// (8 bytes, ~2-4 MB for 151k merges) so that lookups, the hot path of BPE, mostly hit the CPU cache.
class MergeTable {
 public:
  struct Merge {
    int32_t rank = -1;  // -1: the pair never merges
    int32_t result = -1;
  };

  // Sizes the table for ids below n_tokens and up to n_merges ranks; refuses shapes that do not fit.
  Status init(int32_t n_tokens, size_t n_merges);
  // Keeps the first rank inserted for a pair (later duplicates are ignored, returning false).
  bool insert(int32_t left, int32_t right, int32_t rank, int32_t result);
  Merge find(int32_t left, int32_t right) const {
    const uint64_t key = key_of(left, right);
    for (size_t i = slot_of(key);; i = (i + 1) & mask_) {
      const uint64_t s = slots_[i];
      if (s == 0) return {};
      if ((s & ~rank_mask_) == key) {
        const auto rank = static_cast<int32_t>((s & rank_mask_) - 1);
        return {rank, results_[static_cast<size_t>(rank)]};
      }
    }
  }
  size_t size() const { return size_; }

 private:
  uint64_t key_of(int32_t a, int32_t b) const {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << (id_bits_ + rank_bits_)) |
           (static_cast<uint64_t>(static_cast<uint32_t>(b)) << rank_bits_);
  }
  size_t slot_of(uint64_t key) const { return static_cast<size_t>((key * 0x9e3779b97f4a7c15ull) >> shift_); }

  std::vector<uint64_t> slots_;   // 0 = empty, else key | (rank + 1)
  std::vector<int32_t> results_;  // merged id per rank
  uint64_t rank_mask_ = 0;
  int id_bits_ = 0;
  int rank_bits_ = 0;
  size_t mask_ = 0;
  int shift_ = 64;
  size_t size_ = 0;
};

// Reusable buffers for bpe_word (one per thread).
struct BpeScratch {
  struct Symbol {
    int32_t id;
    int32_t prev;
    int32_t next;
  };
  struct Candidate {
    uint64_t order;  // rank << 32 | left position: the heap pops the lowest rank, then the leftmost
    int32_t left_id;
    int32_t right_id;
    int32_t result;
  };
  std::vector<Symbol> symbols;
  std::vector<Candidate> heap;
};

// Appends the ids for `word` (non-empty, raw bytes). byte_ids[b] is the token of byte b.
// O(n log n) in the word length (short words take a scan that is cheaper at that size).
void bpe_word(const MergeTable& merges, const std::array<int32_t, 256>& byte_ids, std::string_view word,
              BpeScratch& scratch, std::vector<int32_t>& out);

}  // namespace minfer::tokenizer
