// Tokenizer: text <-> token ids, loaded from a GGUF vocabulary, matching llama.cpp's
// llama_tokenize(add_special, parse_special) ids exactly for byte-level BPE (`gpt2`: the
// `qwen2`/`deepseek-r1-qwen`, `qwen35` and `llama-bpe` pre-tokenizers) and SentencePiece (`llama`: Llama 2,
// Mistral, Gemma 3).
//
//   MINFER_ASSIGN_OR_RETURN(gguf::File file, gguf::File::open(path));
//   MINFER_ASSIGN_OR_RETURN(tokenizer::Tokenizer tok, tokenizer::Tokenizer::from_gguf(file.metadata()));
//   std::vector<int32_t> ids = tok.encode("<|im_start|>user\nhi<|im_end|>", /*add_special=*/false,
//                                         /*parse_special=*/true);
//   std::string text = tok.decode(ids);  // == the input
//   std::vector<int32_t> prompt = tok.encode_chat(rendered_template);  // BOS as llama.cpp adds it
//
// The tokenizer owns special tokens: no caller prepends a BOS or appends an EOS by hand (they say
// add_special), so the rules of each vocabulary (Llama and Gemma add a BOS, Qwen does not, some embedding
// vocabularies add an EOS) live here.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "tokenizer/vocab.h"

namespace minfer::gguf {
class Metadata;
}

namespace minfer::tokenizer {

// Immutable after loading; copies share the vocabulary. All const methods are safe to call from many
// threads at once (the word cache is per thread).
class Tokenizer {
 public:
  // Reads tokenizer.ggml.* keys. Refuses, naming the offending key or value: a model other than `gpt2` or
  // `llama`, a missing or unknown `tokenizer.ggml.pre` (gpt2), missing tokens, an empty merge table (gpt2),
  // a vocabulary without all 256 byte tokens, duplicate tokens, a token_type or scores array of the wrong
  // length. Costs ~30 ms for 152k tokens.
  static Result<Tokenizer> from_gguf(const gguf::Metadata& meta);
  // Same checks, from plain data (tests, converters).
  static Result<Tokenizer> from_spec(const VocabSpec& spec);

  // Text -> ids, as llama.cpp's llama_tokenize(text, add_special, parse_special). Never fails: text that no
  // token covers falls back to byte tokens, invalid UTF-8 is tokenized byte by byte.
  //   add_special: BOS first when the vocabulary adds one (tokenizer.ggml.add_bos_token), EOS last when it
  //     adds one (add_eos_token); an empty text then gives just those. False: the text's ids only.
  //   parse_special: CONTROL/UNKNOWN tokens written in the text become single ids (chat prompts); when false
  //     they are plain text. USER_DEFINED tokens (<think>, <tool_call>, ...) are matched either way, as
  //     llama.cpp does.
  // Cost: linear in the text.
  std::vector<int32_t> encode(std::string_view text, bool add_special, bool parse_special) const;
  // Appends to `out` instead of returning a new vector.
  void encode(std::string_view text, bool add_special, bool parse_special, std::vector<int32_t>& out) const;
  // A prompt rendered by a chat template, as llama.cpp tokenizes one (common_chat_templates_apply, then
  // llama_tokenize(add_special = true, parse_special = true)): a leading bos_text() is dropped when the
  // vocabulary adds a BOS (templates that write {{ bos_token }} would otherwise give two), and a trailing
  // eos_text() when it adds an EOS.
  std::vector<int32_t> encode_chat(std::string_view rendered) const;
  // What a chat template sees as bos_token / eos_token: the token's text, "" when the vocabulary has none.
  std::string bos_text() const;
  std::string eos_text() const;

  // Ids -> bytes: the concatenation of token_bytes() (what streaming emits). Ids outside [0, n_vocab())
  // contribute nothing. The result may be invalid UTF-8 (for a cut-off id sequence); StreamDecoder never
  // emits that.
  std::string decode(std::span<const int32_t> ids) const;
  // llama.cpp's llama_detokenize(ids, remove_special, unparse_special): the pieces, where the first one
  // loses one leading space when the vocabulary adds a space prefix (unless remove_special drops a leading
  // BOS first), CONTROL/UNKNOWN tokens render only with unparse_special, and llama-bpe vocabularies get
  // llama.cpp's clean_spaces pass. Equals decode() for the Qwen vocabularies.
  std::string detokenize(std::span<const int32_t> ids, bool remove_special = false,
                         bool unparse_special = true) const;

  int32_t n_vocab() const { return vocab_->n_tokens(); }
  // The raw bytes a token stands for: byte-unicode decoded (gpt2) or `▁` -> space (llama) for normal tokens,
  // the byte of a `<0xNN>` byte token, the text itself for control,
  // user-defined and unknown tokens, empty for unused/undefined ones (as llama.cpp renders them).
  // Aborts on an id outside [0, n_vocab()).
  const std::string& token_bytes(int32_t id) const { return vocab_->bytes(id); }
  // The token's string as stored in the GGUF (GPT-2 byte-unicode form, e.g. "Ġthe").
  std::string_view token_text(int32_t id) const { return vocab_->text(id); }
  TokenType token_type(int32_t id) const { return vocab_->type(id); }
  // Id of the token whose GGUF string is exactly `text`, or -1.
  int32_t find_token(std::string_view text) const { return vocab_->find(text); }

  int32_t bos() const { return vocab_->special_ids().bos; }  // -1 when absent
  int32_t eos() const { return vocab_->special_ids().eos; }
  int32_t eot() const { return vocab_->special_ids().eot; }
  int32_t pad() const { return vocab_->special_ids().pad; }
  const SpecialIds& special_ids() const { return vocab_->special_ids(); }
  bool add_bos() const { return vocab_->add_bos(); }
  // The BOS that encode(add_special) puts first, or -1 when the vocabulary adds none (llama-perplexity
  // writes it over each chunk's first token).
  int32_t added_bos() const { return add_bos() ? bos() : -1; }
  bool add_eos() const { return vocab_->add_eos(); }
  // llama.cpp's end-of-generation set (eos, eot, fim pad/rep/sep and the tokens named like an end marker).
  bool is_eog(int32_t id) const { return vocab_->is_eog(id); }
  const std::vector<int32_t>& eog_ids() const { return vocab_->eog_ids(); }
  // CONTROL after llama.cpp's overrides (e.g. `</s>` in Qwen vocabularies). False for ids out of range.
  bool is_control(int32_t id) const { return vocab_->has_attr(id, kAttrControl); }
  PreTokenizer pre_tokenizer() const { return vocab_->pre_tokenizer(); }  // meaningful for kBpe only
  VocabKind kind() const { return vocab_->kind(); }
  bool add_space_prefix() const { return vocab_->add_space_prefix(); }
  const Vocab& vocab() const { return *vocab_; }

 private:
  explicit Tokenizer(std::shared_ptr<const Vocab> vocab);
  // The text's own ids (encode without add_special).
  void encode_fragments(std::string_view text, bool parse_special, std::vector<int32_t>& out) const;
  void encode_text(std::string_view text, std::vector<int32_t>& out) const;
  void encode_spm(std::string_view text, bool space_prefix, std::vector<int32_t>& out) const;

  std::shared_ptr<const Vocab> vocab_;
  uint64_t cache_key_ = 0;  // identifies this vocabulary for the per-thread word cache
};

}  // namespace minfer::tokenizer
