// Pre-tokenization: splitting text into the words BPE runs on, by hand-written matchers that reproduce
// llama.cpp's regex semantics for the pre-tokenizer named by tokenizer.ggml.pre.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/status.h"

namespace minfer::tokenizer {

// qwen2 (alias deepseek-r1-qwen), as llama.cpp's LLAMA_VOCAB_PRE_TYPE_QWEN2:
//   (?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|
//    ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
// qwen35 (LLAMA_VOCAB_PRE_TYPE_QWEN35): the same with [\p{L}\p{M}]+ for \p{L}+ and \p{M} added to the
// excluded set of the punctuation run.
// llama3 (alias llama-bpe, llama-v3; LLAMA_VOCAB_PRE_TYPE_LLAMA3): qwen2's with \p{N}{1,3} for \p{N}; llama.cpp
// also sets ignore_merges for it (a word that is a whole token is that token, see Tokenizer) and adds BOS
// unless tokenizer.ggml.add_bos_token says otherwise.
enum class PreTokenizer : uint8_t { kQwen2, kQwen35, kLlama3 };

// "qwen2" and "deepseek-r1-qwen" -> kQwen2, "qwen35" -> kQwen35, "llama-bpe", "llama3", "llama-v3" ->
// kLlama3; anything else is kUnsupported naming it.
Result<PreTokenizer> pre_tokenizer_from_name(std::string_view name);
std::string_view pre_tokenizer_name(PreTokenizer kind);

// Iterates over the words of one text fragment (a piece between special tokens: `\s+(?!\S)` treats
// the fragment end as the end of input). Words are non-empty and cover the text exactly, in order.
//
//   WordSplitter split(PreTokenizer::kQwen2, text);
//   for (std::string_view w; split.next(&w);) ...
class WordSplitter {
 public:
  WordSplitter(PreTokenizer kind, std::string_view text)
      : text_(text), marks_(kind == PreTokenizer::kQwen35), max_digits_(kind == PreTokenizer::kLlama3 ? 3 : 1) {}
  // Stores the next word and returns true, or returns false at the end of the text.
  bool next(std::string_view* word);

 private:
  std::string_view text_;
  size_t pos_ = 0;
  bool marks_;  // \p{M} joins letters (qwen35)
  int max_digits_;  // \p{N}{1,max_digits_}
};

}  // namespace minfer::tokenizer
