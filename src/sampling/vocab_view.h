// VocabView: what the sampler needs from a tokenizer (raw token bytes, end-of-generation ids, optionally a
// tokenize function for DRY's multi-token sequence breakers). Filled by the engine; sampling never reads
// GGUF.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace minfer::sampling {

struct VocabView {
  // token_bytes[id]: the raw bytes the token decodes to (GPT-2 byte-unicode already undone); empty for
  // control tokens, which a grammar never allows (except EOG ids, allowed in an accepting state).
  std::vector<std::string> token_bytes;
  std::vector<int32_t> eog_ids;
  // Optional: plain-text tokenization without special tokens. DRY uses it for the tail of a sequence breaker
  // that starts inside a token (llama.cpp semantics); without it only breakers contained in one token count.
  std::function<std::vector<int32_t>(std::string_view)> tokenize;

  int32_t n_vocab() const { return static_cast<int32_t>(token_bytes.size()); }
  bool is_eog(int32_t id) const {
    for (int32_t e : eog_ids) {
      if (e == id) return true;
    }
    return false;
  }
};

}  // namespace minfer::sampling
