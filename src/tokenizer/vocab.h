// Vocab: the token table of a byte-level BPE (`gpt2`) or SentencePiece (`llama`) model (strings, types, raw
// bytes, merges or scores, special ids and llama.cpp's name-based special-token rules), built from plain
// data. No GGUF knowledge here.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "tokenizer/bpe.h"
#include "tokenizer/pretokenize.h"

namespace minfer::tokenizer {

// tokenizer.ggml.token_type values.
enum class TokenType : int32_t {
  kUndefined = 0,
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6,
};

// llama.cpp's token attributes: a type plus overrides (a NORMAL token can gain kAttrControl).
enum TokenAttr : uint8_t {
  kAttrUnknown = 1 << 0,
  kAttrUnused = 1 << 1,
  kAttrNormal = 1 << 2,
  kAttrControl = 1 << 3,
  kAttrUserDefined = 1 << 4,
  kAttrByte = 1 << 5,
};

// tokenizer.ggml.model: `gpt2` (byte-level BPE with merges and a pre-tokenizer) or `llama` (SentencePiece:
// score-driven merges over UTF-8 characters, `▁` for spaces, `<0xNN>` byte fallback).
enum class VocabKind : uint8_t { kBpe, kSpm };

// Special token ids, -1 when absent.
struct SpecialIds {
  int32_t bos = -1, eos = -1, eot = -1, eom = -1, unk = -1, sep = -1, pad = -1, mask = -1;
  int32_t fim_pre = -1, fim_suf = -1, fim_mid = -1, fim_pad = -1, fim_rep = -1, fim_sep = -1;
};

// Plain description of a vocabulary, as tokenizer.ggml.* holds it. Spans must outlive Vocab::build only.
struct VocabSpec {
  std::string model;  // tokenizer.ggml.model: "gpt2" or "llama"
  std::string pre;    // tokenizer.ggml.pre (gpt2 only; SentencePiece has none)
  std::span<const std::string>
      tokens;  // gpt2: GPT-2 byte-unicode strings; llama: `▁`-escaped pieces; id order
  std::vector<int32_t> token_types;     // TokenType per token; empty = all NORMAL
  std::span<const std::string> merges;  // gpt2: "left right", rank order
  std::vector<float> scores;            // llama: merge priority per token (higher first); empty = all 0
  SpecialIds ids;                       // from the *_token_id keys (-1 = key absent)
  bool add_bos = false;
  bool add_eos = false;
  bool add_space_prefix = false;  // llama: a space before the first fragment and after each special
};

class Vocab {
 public:
  // Validates and indexes. Errors name the offending key or token (see Tokenizer::from_gguf).
  static Result<Vocab> build(const VocabSpec& spec);

  int32_t n_tokens() const { return static_cast<int32_t>(offsets_.size()) - 1; }
  std::string_view text(int32_t id) const;
  const std::string& bytes(int32_t id) const;
  TokenType type(int32_t id) const;
  bool has_attr(int32_t id, uint8_t attr) const {
    return id >= 0 && id < n_tokens() && (attrs_[static_cast<size_t>(id)] & attr) != 0;
  }
  int32_t find(std::string_view text) const;  // -1 when absent
  int32_t byte_token(uint8_t b) const { return byte_ids_[b]; }
  const std::array<int32_t, 256>& byte_ids() const { return byte_ids_; }
  const MergeTable& merges() const { return merges_; }
  VocabKind kind() const { return kind_; }
  // SentencePiece: the token's score (0 for BPE vocabularies).
  float score(int32_t id) const { return scores_.empty() ? 0.0f : scores_[static_cast<size_t>(id)]; }
  size_t max_token_len() const { return max_token_len_; }
  // SentencePiece: true when no token contains `x▁` with x (1-4 bytes) a complete prefix symbol other than
  // at a token's start, i.e. a text may be cut before a `▁` that follows x without changing the merges.
  bool spm_can_split_after(std::string_view x) const;
  bool add_space_prefix() const { return add_space_prefix_; }
  // llama.cpp's clean_spaces (detokenization drops spaces before ?!., and in contractions): true for the
  // llama-bpe pre-tokenizer, false for the Qwen ones and SentencePiece.
  bool clean_spaces() const { return clean_spaces_; }
  // CONTROL / USER_DEFINED / UNKNOWN tokens, longest text first (llama.cpp's special-token cache order).
  const std::vector<int32_t>& specials() const { return specials_; }
  bool is_eog(int32_t id) const { return id >= 0 && id < n_tokens() && eog_[static_cast<size_t>(id)] != 0; }
  const std::vector<int32_t>& eog_ids() const { return eog_ids_; }
  const SpecialIds& special_ids() const { return ids_; }
  bool add_bos() const { return add_bos_; }
  bool add_eos() const { return add_eos_; }
  PreTokenizer pre_tokenizer() const { return pre_; }

 private:
  void set_control(int32_t id) { attrs_[static_cast<size_t>(id)] |= kAttrControl; }
  void apply_name_rules();
  Status index_texts();
  Status index_merges(std::span<const std::string> merges);

  std::string texts_;               // all token strings back to back
  std::vector<uint32_t> offsets_;   // texts_ offsets, n_tokens + 1
  std::vector<std::string> bytes_;  // token_bytes per id
  std::vector<uint8_t> types_;      // TokenType per id
  std::vector<uint8_t> attrs_;      // TokenAttr bits per id
  std::vector<uint8_t> eog_;        // 1 for end-of-generation ids
  std::vector<int32_t> eog_ids_;    // sorted
  std::vector<uint32_t> index_;     // open-addressing text -> id + 1 (0 = empty)
  uint64_t index_mask_ = 0;
  std::array<int32_t, 256> byte_ids_{};
  MergeTable merges_;
  std::vector<int32_t> specials_;
  SpecialIds ids_;
  bool add_bos_ = false;
  bool add_eos_ = false;
  PreTokenizer pre_ = PreTokenizer::kQwen2;
  VocabKind kind_ = VocabKind::kBpe;
  std::vector<float> scores_;
  size_t max_token_len_ = 0;
  std::vector<std::string> spm_no_split_;  // sorted byte strings x for which some token holds x + "▁" inside
  bool add_space_prefix_ = false;
  bool clean_spaces_ = false;

  Status build_spm_bytes();
};

}  // namespace minfer::tokenizer
