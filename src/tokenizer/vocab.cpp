// Vocab construction: validation, the text -> id index, byte tokens, merge ranks, and llama.cpp's
// name-based rules for special tokens (EOT/FIM detection, control-looking tokens, the EOG set).
#include "tokenizer/vocab.h"

#include <algorithm>
#include <cstring>
#include <initializer_list>

#include "core/byte_unicode.h"
#include "core/check.h"
#include "core/log.h"
#include "tokenizer/unicode.h"

namespace minfer::tokenizer {
namespace {

uint64_t hash_bytes(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a: tokens are short, this is not the bottleneck
  for (const char c : s) h = (h ^ static_cast<uint8_t>(c)) * 0x100000001b3ull;
  return h ^ (h >> 29);
}

// Raw bytes of a NORMAL token: each code point of its string maps back to one byte. A code point outside
// the byte map (not produced by GPT-2 conversion) is kept as its own UTF-8 rather than dropped.
std::string byte_decode(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const DecodedChar d = decode_lenient(text, i);
    const int b = d.len > 1 || d.cp < 0x80 ? codepoint_to_byte(d.cp) : -1;
    if (b >= 0) {
      out += static_cast<char>(b);
    } else {
      out.append(text.substr(i, d.len));
    }
    i += d.len;
  }
  return out;
}

constexpr std::string_view kSpace = "\xe2\x96\x81";  // U+2581, SentencePiece's space

// SentencePiece piece -> text: every `▁` becomes a space (llama.cpp's llama_unescape_whitespace).
std::string unescape_spaces(std::string_view t) {
  std::string out;
  out.reserve(t.size());
  for (size_t i = 0; i < t.size();) {
    if (t.substr(i, 3) == kSpace) {
      out += ' ';
      i += 3;
    } else {
      out += t[i++];
    }
  }
  return out;
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

uint8_t attr_of_type(int32_t type) {
  switch (static_cast<TokenType>(type)) {
    case TokenType::kUnknown:
      return kAttrUnknown;
    case TokenType::kUnused:
      return kAttrUnused;
    case TokenType::kNormal:
      return kAttrNormal;
    case TokenType::kControl:
      return kAttrControl;
    case TokenType::kUserDefined:
      return kAttrUserDefined;
    case TokenType::kByte:
      return kAttrByte;
    default:
      return 0;
  }
}

}  // namespace

std::string_view Vocab::text(int32_t id) const {
  MINFER_CHECK(id >= 0 && id < n_tokens(), "token id {} out of range [0, {})", id, n_tokens());
  return std::string_view(texts_).substr(
      offsets_[static_cast<size_t>(id)],
      offsets_[static_cast<size_t>(id) + 1] - offsets_[static_cast<size_t>(id)]);
}

const std::string& Vocab::bytes(int32_t id) const {
  MINFER_CHECK(id >= 0 && id < n_tokens(), "token id {} out of range [0, {})", id, n_tokens());
  return bytes_[static_cast<size_t>(id)];
}

TokenType Vocab::type(int32_t id) const {
  MINFER_CHECK(id >= 0 && id < n_tokens(), "token id {} out of range [0, {})", id, n_tokens());
  return static_cast<TokenType>(types_[static_cast<size_t>(id)]);
}

int32_t Vocab::find(std::string_view key) const {
  for (uint64_t i = hash_bytes(key) & index_mask_;; i = (i + 1) & index_mask_) {
    const uint32_t slot = index_[i];
    if (slot == 0) return -1;
    if (text(static_cast<int32_t>(slot - 1)) == key) return static_cast<int32_t>(slot - 1);
  }
}

Status Vocab::index_texts() {
  uint64_t cap = 16;
  while (cap < static_cast<uint64_t>(n_tokens()) * 2) cap <<= 1;
  index_.assign(cap, 0);
  index_mask_ = cap - 1;
  for (int32_t id = 0; id < n_tokens(); ++id) {
    const std::string_view t = text(id);
    for (uint64_t i = hash_bytes(t) & index_mask_;; i = (i + 1) & index_mask_) {
      const uint32_t slot = index_[i];
      if (slot == 0) {
        index_[i] = static_cast<uint32_t>(id) + 1;
        break;
      }
      if (text(static_cast<int32_t>(slot - 1)) == t) {
        return invalid_argument("tokenizer: duplicate token '{}' in tokenizer.ggml.tokens (ids {} and {})", t,
                                slot - 1, id);
      }
    }
  }
  return Status::ok_status();
}

Status Vocab::index_merges(std::span<const std::string> merges) {
  MINFER_RETURN_IF_ERROR(merges_.init(n_tokens(), merges.size()));
  std::string joined;
  size_t skipped = 0;
  std::string_view first_skipped;
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const std::string_view m = merges[rank];
    // llama.cpp splits at the first space after position 0.
    const size_t space = m.size() > 1 ? m.find(' ', 1) : std::string_view::npos;
    int32_t left = -1, right = -1, result = -1;
    if (space != std::string_view::npos) {
      const std::string_view a = m.substr(0, space);
      const std::string_view b = m.substr(space + 1);
      left = find(a);
      right = find(b);
      joined.assign(a);
      joined.append(b);
      result = find(joined);
    }
    if (left < 0 || right < 0 || result < 0) {
      // A merge whose parts or result are not tokens can never fire on token ids; llama.cpp would keep
      // merging strings there. Real vocabularies have none (every merge result is a token).
      if (skipped++ == 0) first_skipped = m;
      continue;
    }
    merges_.insert(left, right, static_cast<int32_t>(rank), result);
  }
  if (skipped > 0) {
    MINFER_LOG_WARN("tokenizer: ignored {} of {} merges whose parts or result are not tokens (first: '{}')",
                    skipped, merges.size(), first_skipped);
  }
  if (merges_.size() == 0) {
    return invalid_argument("tokenizer: tokenizer.ggml.merges has no usable merge ({} entries)",
                            merges.size());
  }
  return Status::ok_status();
}

Status Vocab::build_spm_bytes() {
  // llama.cpp's byte_to_token for SentencePiece: `<0xNN>` (upper-case hex), else the one-byte token itself.
  static constexpr char kHex[] = "0123456789ABCDEF";
  for (int b = 0; b < 256; ++b) {
    const char name[] = {'<', '0', 'x', kHex[b >> 4], kHex[b & 15], '>'};
    int32_t id = find(std::string_view(name, sizeof(name)));
    if (id < 0 && b != 0) id = find(std::string_view(reinterpret_cast<const char*>(&b), 1));
    if (id < 0) {
      return invalid_argument(
          "tokenizer: the SentencePiece vocabulary has no byte token <0x{:02X}> (byte fallback needs all "
          "256)",
          b);
    }
    byte_ids_[static_cast<size_t>(b)] = id;
  }
  // Where a text may be cut into independent pieces (see spm_can_split_after): collect, for every `▁`
  // inside a token (not at its start), the 1-4 bytes before it.
  for (int32_t id = 0; id < n_tokens(); ++id) {
    const std::string_view t = text(id);
    for (size_t p = t.find(kSpace, 1); p != std::string_view::npos; p = t.find(kSpace, p + 1)) {
      for (size_t k = 1; k <= 4 && k <= p; ++k) spm_no_split_.emplace_back(t.substr(p - k, k));
    }
  }
  std::sort(spm_no_split_.begin(), spm_no_split_.end());
  spm_no_split_.erase(std::unique(spm_no_split_.begin(), spm_no_split_.end()), spm_no_split_.end());
  return Status::ok_status();
}

bool Vocab::spm_can_split_after(std::string_view x) const {
  return x != kSpace && !std::binary_search(spm_no_split_.begin(), spm_no_split_.end(), x);
}

void Vocab::apply_name_rules() {
  auto detect = [&](int32_t& id, std::initializer_list<std::string_view> names) {
    if (id >= 0) return;
    for (const std::string_view name : names) {
      const int32_t found = find(name);
      if (found >= 0) {
        id = found;
        set_control(found);  // "control-looking token ... its type will be overridden"
        return;
      }
    }
  };
  // llama.cpp walks a hash map and takes the first hit; list order makes the choice deterministic
  // (<|im_end|> before <|endoftext|>, matching what llama.cpp reports for Qwen vocabularies).
  detect(ids_.eot,
         {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>", "<EOT>",
          "_<EOT>", "[EOT]", "<｜end▁of▁sentence｜>", "<end_of_utterance>"});
  detect(ids_.eom, {"<|eom_id|>"});
  detect(ids_.fim_pre, {"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<｜fim▁begin｜>", "<PRE>",
                        "▁<PRE>", "<|code_prefix|>", "<|prefix|>"});
  detect(ids_.fim_suf, {"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<｜fim▁hole｜>", "<SUF>", "▁<SUF>",
                        "<|code_suffix|>", "<|suffix|>"});
  detect(ids_.fim_mid, {"<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<｜fim▁end｜>", "<MID>", "▁<MID>",
                        "<|code_middle|>", "<|middle|>"});
  detect(ids_.fim_pad, {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"});
  detect(ids_.fim_rep, {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"});
  detect(ids_.fim_sep, {"<|file_sep|>"});

  // End of generation: fim pad/rep/sep, every token named like an end marker (forced to CONTROL),
  // eos/eot/eom.
  std::vector<int32_t> eog;
  for (const int32_t id : {ids_.fim_pad, ids_.fim_rep, ids_.fim_sep}) {
    if (id >= 0) eog.push_back(id);
  }
  for (const std::string_view name : {"<|eot_id|>",
                                      "<|im_end|>",
                                      "<|end|>",
                                      "<|return|>",
                                      "<|call|>",
                                      "<|flush|>",
                                      "<|calls|>",
                                      "<end_of_turn>",
                                      "<|endoftext|>",
                                      "</s>",
                                      "<|eom_id|>",
                                      "<EOT>",
                                      "_<EOT>",
                                      "[EOT]",
                                      "[EOS]",
                                      "<|end_of_text|>",
                                      "<end_of_utterance>",
                                      "<eos>",
                                      "<turn|>",
                                      "<|tool_response>",
                                      "<｜end▁of▁sentence｜>",
                                      "[e~["}) {
    const int32_t id = find(name);
    if (id < 0) continue;
    eog.push_back(id);
    if ((attrs_[static_cast<size_t>(id)] & kAttrControl) == 0) {
      MINFER_LOG_DEBUG(
          "tokenizer: control-looking token {} '{}' was not control-type; treating it as control", id, name);
      set_control(id);
    }
  }
  for (const std::string_view name : {"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"}) {
    const int32_t id = find(name);
    if (id >= 0) attrs_[static_cast<size_t>(id)] = kAttrUserDefined;  // always rendered (gpt-oss)
  }
  for (const int32_t id : {ids_.eos, ids_.eot, ids_.eom}) {
    if (id >= 0) eog.push_back(id);
  }
  std::sort(eog.begin(), eog.end());
  eog.erase(std::unique(eog.begin(), eog.end()), eog.end());
  auto has = [&](std::string_view name) {
    const int32_t id = find(name);
    return id >= 0 && std::binary_search(eog.begin(), eog.end(), id);
  };
  auto drop = [&](std::string_view name, uint8_t attr) {
    const int32_t id = find(name);
    eog.erase(std::remove(eog.begin(), eog.end(), id), eog.end());
    attrs_[static_cast<size_t>(id)] = attr;
  };
  const bool has_call = has("<|call|>") || has("<|calls|>");
  if (has("<|end|>") && has_call && (has("<|return|>") || has("<|flush|>")))
    drop("<|end|>", kAttrUserDefined);
  if (has("<|tool_response>") && has("</s>")) drop("</s>", kAttrNormal);

  // ChatML markers are always special, whatever the GGUF says (llama.cpp already forces the last two).
  for (const std::string_view name : {"<|im_start|>", "<|im_end|>", "<|endoftext|>"}) {
    const int32_t id = find(name);
    if (id >= 0 && (attrs_[static_cast<size_t>(id)] & (kAttrControl | kAttrUserDefined)) == 0)
      set_control(id);
  }

  eog_.assign(static_cast<size_t>(n_tokens()), 0);
  for (const int32_t id : eog) eog_[static_cast<size_t>(id)] = 1;
  eog_ids_ = std::move(eog);
}

Result<Vocab> Vocab::build(const VocabSpec& spec) {
  Vocab v;
  if (spec.model == "gpt2") {
    v.kind_ = VocabKind::kBpe;
  } else if (spec.model == "llama") {
    v.kind_ = VocabKind::kSpm;
  } else {
    return unsupported(
        "tokenizer: tokenizer.ggml.model '{}' is not supported ('gpt2' byte-level BPE or 'llama' "
        "SentencePiece)",
        spec.model);
  }
  const bool bpe = v.kind_ == VocabKind::kBpe;
  if (bpe) {
    if (spec.pre.empty()) {
      return invalid_argument(
          "tokenizer: tokenizer.ggml.pre is missing; minfer needs the pre-tokenizer name "
          "(qwen2, deepseek-r1-qwen, qwen35 or llama-bpe)");
    }
    MINFER_ASSIGN_OR_RETURN(v.pre_, pre_tokenizer_from_name(spec.pre));
    v.clean_spaces_ =
        v.pre_ == PreTokenizer::kLlama3;  // llama.cpp: clean_spaces stays on for llama3 only here
  } else {
    v.add_space_prefix_ = spec.add_space_prefix;
  }
  if (spec.tokens.empty()) return invalid_argument("tokenizer: tokenizer.ggml.tokens is empty");
  if (spec.tokens.size() >= 0x7fffffffu) {
    return invalid_argument("tokenizer: tokenizer.ggml.tokens has {} entries", spec.tokens.size());
  }
  const auto n = static_cast<int32_t>(spec.tokens.size());
  if (!spec.token_types.empty() && spec.token_types.size() < spec.tokens.size()) {
    return invalid_argument("tokenizer: tokenizer.ggml.token_type has {} entries for {} tokens",
                            spec.token_types.size(), spec.tokens.size());
  }
  if (bpe && spec.merges.empty()) return invalid_argument("tokenizer: tokenizer.ggml.merges is empty");
  if (!bpe && !spec.scores.empty() && spec.scores.size() < spec.tokens.size()) {
    return invalid_argument("tokenizer: tokenizer.ggml.scores has {} entries for {} tokens",
                            spec.scores.size(), spec.tokens.size());
  }

  // Strings, types and attributes.
  size_t total = 0;
  for (const std::string& t : spec.tokens) total += t.empty() ? 24 : t.size();
  v.texts_.reserve(total);
  v.offsets_.reserve(static_cast<size_t>(n) + 1);
  v.types_.resize(static_cast<size_t>(n));
  v.attrs_.resize(static_cast<size_t>(n));
  for (int32_t id = 0; id < n; ++id) {
    v.offsets_.push_back(static_cast<uint32_t>(v.texts_.size()));
    const std::string& t = spec.tokens[static_cast<size_t>(id)];
    if (t.empty()) {
      v.texts_ += fmt::format("[EMPTY_{}]", id);  // as llama.cpp names empty tokens
    } else {
      v.texts_ += t;
    }
    v.max_token_len_ = std::max<size_t>(v.max_token_len_, v.texts_.size() - v.offsets_.back());
    const int32_t type = spec.token_types.empty() ? 1 : spec.token_types[static_cast<size_t>(id)];
    v.types_[static_cast<size_t>(id)] = static_cast<uint8_t>(type >= 0 && type <= 6 ? type : 0);
    v.attrs_[static_cast<size_t>(id)] = attr_of_type(type);
  }
  v.offsets_.push_back(static_cast<uint32_t>(v.texts_.size()));
  MINFER_RETURN_IF_ERROR(v.index_texts());

  if (bpe) {
    for (int b = 0; b < 256; ++b) {
      std::string t;
      append_utf8(byte_to_codepoint(static_cast<uint8_t>(b)), t);
      v.byte_ids_[static_cast<size_t>(b)] = v.find(t);
      if (v.byte_ids_[static_cast<size_t>(b)] < 0) {
        return invalid_argument(
            "tokenizer: the vocabulary has no token for byte 0x{:02x} ('{}'); byte-level BPE "
            "needs all 256",
            b, t);
      }
    }
    MINFER_RETURN_IF_ERROR(v.index_merges(spec.merges));
  } else {
    MINFER_RETURN_IF_ERROR(v.build_spm_bytes());
    if (!spec.scores.empty()) v.scores_.assign(spec.scores.begin(), spec.scores.begin() + n);
  }

  // Special ids from the GGUF: out-of-range values are ignored with a warning, as llama.cpp does.
  v.ids_ = spec.ids;
  for (int32_t* id : {&v.ids_.bos, &v.ids_.eos, &v.ids_.eot, &v.ids_.eom, &v.ids_.unk, &v.ids_.sep,
                      &v.ids_.pad, &v.ids_.mask, &v.ids_.fim_pre, &v.ids_.fim_suf, &v.ids_.fim_mid,
                      &v.ids_.fim_pad, &v.ids_.fim_rep, &v.ids_.fim_sep}) {
    if (*id >= n) {
      MINFER_LOG_WARN("tokenizer: special token id {} is outside the vocabulary ({} tokens); ignoring it",
                      *id, n);
      *id = -1;
    }
  }
  v.add_bos_ = spec.add_bos;
  v.add_eos_ = spec.add_eos;
  if (v.add_bos_ && v.ids_.bos < 0) {
    return invalid_argument(
        "tokenizer: tokenizer.ggml.add_bos_token is true but tokenizer.ggml.bos_token_id is "
        "not set");
  }
  if (v.add_eos_ && v.ids_.eos < 0) {
    return invalid_argument(
        "tokenizer: tokenizer.ggml.add_eos_token is true but tokenizer.ggml.eos_token_id is "
        "not set");
  }
  v.apply_name_rules();

  // What each token renders as (llama.cpp's token_to_piece with special=true).
  v.bytes_.resize(static_cast<size_t>(n));
  for (int32_t id = 0; id < n; ++id) {
    const uint8_t a = v.attrs_[static_cast<size_t>(id)];
    const std::string_view t = v.text(id);
    std::string& out = v.bytes_[static_cast<size_t>(id)];
    if (a & (kAttrUnknown | kAttrControl | kAttrUserDefined)) {
      out.assign(t);
    } else if ((a & kAttrNormal) && !bpe) {
      out = unescape_spaces(t);
    } else if (a & kAttrNormal) {
      out = byte_decode(t);
    } else if ((a & kAttrByte) && t.size() == 6 && t.substr(0, 3) == "<0x" && t.back() == '>') {
      const int hi = hex_digit(t[3]), lo = hex_digit(t[4]);
      if (hi >= 0 && lo >= 0) out.assign(1, static_cast<char>(hi * 16 + lo));
    }
  }

  for (int32_t id = 0; id < n; ++id) {
    if (v.attrs_[static_cast<size_t>(id)] & (kAttrControl | kAttrUserDefined | kAttrUnknown)) {
      v.specials_.push_back(id);
    }
  }
  std::stable_sort(v.specials_.begin(), v.specials_.end(),
                   [&](int32_t a, int32_t b) { return v.text(a).size() > v.text(b).size(); });
  return v;
}

}  // namespace minfer::tokenizer
