// The SentencePiece side of `convert`'s tokenizer reading: a tokenizer.json whose BPE model has
// byte_fallback (Llama 2, Mistral, Gemma 3: `▁`-escaped pieces, `<0xNN>` byte tokens) becomes the
// tokenizer.ggml.model = "llama" vocabulary that convert_hf_to_gguf.py's _set_vocab_sentencepiece writes
// from tokenizer.model, reconstructed from what tokenizer.json and tokenizer_config.json hold.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace minfer::tools {

struct SpmVocab {
  std::vector<std::string> tokens;
  std::vector<float> scores;
  std::vector<int32_t> types;
  std::map<int64_t, std::pair<std::string, bool>> added;  // id -> (content, special), for the special ids
  bool add_space_prefix = false;
};

// True for a tokenizer.json of the SentencePiece kind (a BPE model with byte_fallback).
bool is_spm_tokenizer_json(const nlohmann::json& tok);

// tok: tokenizer.json; tcfg: tokenizer_config.json (may be empty); cfg: config.json (may be empty; its
// vocab_size pads the table as convert does).
Result<SpmVocab> spm_vocab_from_hf(const nlohmann::json& tok, const nlohmann::json& tcfg,
                                   const nlohmann::json& cfg);

}  // namespace minfer::tools
