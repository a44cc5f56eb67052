// SentencePiece tokenization of one escaped text piece, as llama.cpp's llm_tokenizer_spm applies it: the
// text starts as one symbol per UTF-8 character; the adjacent pair whose concatenation is a token with the
// highest score merges first (equal scores: the leftmost pair), until no pair is a token; each symbol is
// then its token, or its bytes as `<0xNN>` tokens.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "tokenizer/vocab.h"

namespace minfer::tokenizer {

// Reusable buffers (one per thread): no allocation per call once warm.
struct SpmScratch {
  struct Symbol {
    uint32_t off;  // byte offset in the text
    uint32_t len;  // bytes; 0 once merged into its left neighbour
    int32_t prev;
    int32_t next;
  };
  struct Bigram {
    float score;
    int32_t left;
    int32_t right;
    uint32_t size;  // bytes of the pair when queued; a mismatch later means one side changed
  };
  std::vector<Symbol> symbols;
  std::vector<Bigram> heap;
};

// Byte length of the UTF-8 character whose first byte is b, as llama.cpp's unicode_len_utf8 reads it
// (continuation and invalid bytes count as 1, 0xF8-0xFF as 4).
inline size_t spm_char_len(uint8_t b) {
  static constexpr uint8_t kLen[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return kLen[b >> 4];
}

// Appends the ids of `text` (spaces already replaced by `▁`) to out. O(n log n) in the characters.
void spm_tokenize(const Vocab& vocab, std::string_view text, SpmScratch& scratch, std::vector<int32_t>& out);

}  // namespace minfer::tokenizer
