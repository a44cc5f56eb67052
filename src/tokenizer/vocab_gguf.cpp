// The only file of the tokenizer that reads GGUF: tokenizer.ggml.* metadata -> VocabSpec -> Tokenizer.
#include <utility>

#include "gguf/metadata.h"
#include "tokenizer/tokenizer.h"

namespace minfer::tokenizer {
namespace {

// An optional token id key: absent -> -1; present -> its value (out-of-range values are dropped later).
Status read_id(const gguf::Metadata& meta, std::string_view key, int32_t* id) {
  const gguf::Value* v = meta.find(key);
  if (v == nullptr) return Status::ok_status();
  if (!gguf::is_integer(v->type())) {
    return invalid_argument("tokenizer: key '{}' has type {}, expected an integer token id", key,
                            gguf::value_type_name(v->type()));
  }
  MINFER_ASSIGN_OR_RETURN(const int64_t value, meta.get_i64(key));
  *id = value >= 0 && value < 0x7fffffff ? static_cast<int32_t>(value) : -1;
  return Status::ok_status();
}

Result<std::span<const std::string>> string_array(const gguf::Metadata& meta, std::string_view key) {
  if (!meta.contains(key)) return not_found("tokenizer: key '{}' is missing", key);
  MINFER_ASSIGN_OR_RETURN(const gguf::Array* arr, meta.get_array(key, gguf::ValueType::STRING));
  return std::span<const std::string>(arr->strings);
}

}  // namespace

Result<Tokenizer> Tokenizer::from_gguf(const gguf::Metadata& meta) {
  VocabSpec spec;
  if (!meta.contains("tokenizer.ggml.model")) {
    return not_found("tokenizer: key 'tokenizer.ggml.model' is missing (no vocabulary in this GGUF)");
  }
  MINFER_ASSIGN_OR_RETURN(spec.model, meta.get_string("tokenizer.ggml.model"));
  MINFER_ASSIGN_OR_RETURN(spec.pre, meta.get_string_or("tokenizer.ggml.pre", ""));
  MINFER_ASSIGN_OR_RETURN(spec.tokens, string_array(meta, "tokenizer.ggml.tokens"));
  if (meta.contains("tokenizer.ggml.token_type")) {
    MINFER_ASSIGN_OR_RETURN(const std::vector<int64_t> types,
                            meta.get_int_array("tokenizer.ggml.token_type"));
    spec.token_types.reserve(types.size());
    for (const int64_t t : types) spec.token_types.push_back(t >= 0 && t <= 6 ? static_cast<int32_t>(t) : 0);
  }
  // The model check comes first so that an unknown vocabulary is refused for what it is.
  if (spec.model == "gpt2") {
    MINFER_ASSIGN_OR_RETURN(spec.merges, string_array(meta, "tokenizer.ggml.merges"));
  } else if (spec.model == "llama") {
    // llama.cpp's SentencePiece defaults, before the keys: BOS 1, EOS 2, UNK 0, add BOS, a space prefix.
    spec.ids.bos = 1;
    spec.ids.eos = 2;
    spec.ids.unk = 0;
    if (meta.contains("tokenizer.ggml.scores")) {
      MINFER_ASSIGN_OR_RETURN(spec.scores, meta.get_f32_array("tokenizer.ggml.scores"));
    }
    MINFER_ASSIGN_OR_RETURN(spec.add_space_prefix, meta.get_bool_or("tokenizer.ggml.add_space_prefix", true));
  }

  const std::pair<std::string_view, int32_t*> id_keys[] = {
      {"tokenizer.ggml.bos_token_id", &spec.ids.bos},
      {"tokenizer.ggml.eos_token_id", &spec.ids.eos},
      {"tokenizer.ggml.eot_token_id", &spec.ids.eot},
      {"tokenizer.ggml.eom_token_id", &spec.ids.eom},
      {"tokenizer.ggml.unknown_token_id", &spec.ids.unk},
      {"tokenizer.ggml.seperator_token_id", &spec.ids.sep},  // sic: llama.cpp's key name
      {"tokenizer.ggml.padding_token_id", &spec.ids.pad},
      {"tokenizer.ggml.mask_token_id", &spec.ids.mask},
      {"tokenizer.ggml.fim_pre_token_id", &spec.ids.fim_pre},
      {"tokenizer.ggml.fim_suf_token_id", &spec.ids.fim_suf},
      {"tokenizer.ggml.fim_mid_token_id", &spec.ids.fim_mid},
      {"tokenizer.ggml.fim_pad_token_id", &spec.ids.fim_pad},
      {"tokenizer.ggml.fim_rep_token_id", &spec.ids.fim_rep},
      {"tokenizer.ggml.fim_sep_token_id", &spec.ids.fim_sep},
      // Deprecated names, read after the new ones as llama.cpp does.
      {"tokenizer.ggml.prefix_token_id", &spec.ids.fim_pre},
      {"tokenizer.ggml.suffix_token_id", &spec.ids.fim_suf},
      {"tokenizer.ggml.middle_token_id", &spec.ids.fim_mid},
  };
  for (const auto& [key, id] : id_keys) MINFER_RETURN_IF_ERROR(read_id(meta, key, id));
  // llama.cpp adds BOS by default for the llama3 pre-tokenizer and SentencePiece; the GGUF key overrides
  // either way.
  const bool llama3 = spec.pre == "llama-bpe" || spec.pre == "llama3" || spec.pre == "llama-v3";
  MINFER_ASSIGN_OR_RETURN(spec.add_bos,
                          meta.get_bool_or("tokenizer.ggml.add_bos_token", llama3 || spec.model == "llama"));
  MINFER_ASSIGN_OR_RETURN(spec.add_eos, meta.get_bool_or("tokenizer.ggml.add_eos_token", false));
  return from_spec(spec);
}

}  // namespace minfer::tokenizer
