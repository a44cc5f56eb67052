// tokenizer.json (SentencePiece-style BPE) -> the arrays convert_hf_to_gguf.py writes for a SentencePiece
// vocabulary. Its _create_vocab_sentencepiece reads tokenizer.model, which Hugging Face tokenizer folders
// (and the npm copies of them) often lack; everything but the piece scores is in tokenizer.json:
//   - tokens: the model vocabulary by id, then tokenizer_config.json's added_tokens_decoder replaces each
//     entry's text; ids up to config.json's vocab_size that nothing names are `[PAD<id>]`, UNUSED;
//   - types: `<0xNN>` -> BYTE, the unk token -> UNKNOWN, else NORMAL; every added_tokens_decoder entry ->
//     CONTROL when marked special or looking special (`<|...|>`, `<unused...>`, `<pad>`, `<mask>`, ...),
//     else USER_DEFINED with its `▁` written as spaces ("pre-normalize user-defined spaces");
//   - scores: added tokens -1000 as convert writes; a piece that a merge produces gets minus the rank of
//     the first merge producing it, any other piece -(number of merges + id), byte and unk tokens 0.
//     Hugging Face's converter lists the merges in the order of the SentencePiece scores, so this keeps
//     the order llama.cpp merges by (piece ids alone would not: whitespace-run pieces such as `▁▁` have
//     low ids but merge late). Without tokenizer.model, convert_hf_to_gguf.py's LlamaHfVocab writes -1000
//     for every piece, which makes llama.cpp merge leftmost-first; we do not copy that.
//   - add_space_prefix: tokenizer.json's normalizer prepends `▁` (Llama 2, Mistral: true; Gemma 3: false,
//     which convert also forces for Gemma 3).
#include "tools/hf_spm_vocab.h"

#include <tuple>

#include <fmt/format.h>

namespace minfer::tools {
namespace {

using nlohmann::json;

enum : int32_t { kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6 };

// convert_hf_to_gguf.py's does_token_look_special.
bool looks_special(const std::string& t) {
  auto wraps = [&](const std::string& open, const std::string& close) {
    return t.size() >= open.size() + close.size() && t.compare(0, open.size(), open) == 0 &&
           t.compare(t.size() - close.size(), close.size(), close) == 0;
  };
  return t == "<pad>" || t == "<mask>" || t == "<2mass>" || t == "[@BOS@]" || wraps("<|", "|>") ||
         wraps("<\xef\xbd\x9c", "\xef\xbd\x9c>") || wraps("<unused", ">");
}

bool is_byte_token(const std::string& t) {
  auto hex = [](char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
  };
  return t.size() == 6 && t.compare(0, 3, "<0x") == 0 && hex(t[3]) && hex(t[4]) && t[5] == '>';
}

bool prepends_space(const json& normalizer) {
  if (!normalizer.is_object()) return false;
  if (normalizer.value("type", "") == "Prepend") return normalizer.value("prepend", "") == "\xe2\x96\x81";
  if (normalizer.contains("normalizers") && normalizer["normalizers"].is_array()) {
    for (const json& n : normalizer["normalizers"]) {
      if (prepends_space(n)) return true;
    }
  }
  return false;
}

}  // namespace

bool is_spm_tokenizer_json(const json& tok) {
  return tok.is_object() && tok.contains("model") && tok["model"].is_object() &&
         tok["model"].value("type", "") == "BPE" && tok["model"].value("byte_fallback", false);
}

Result<SpmVocab> spm_vocab_from_hf(const json& tok, const json& tcfg, const json& cfg) {
  const json& model = tok["model"];
  if (!model.contains("vocab") || !model["vocab"].is_object()) {
    return invalid_argument("convert: tokenizer.json has no model.vocab");
  }
  std::map<int64_t, std::string> by_id;
  for (const auto& [text, id] : model["vocab"].items()) {
    if (!id.is_number_unsigned())
      return invalid_argument("convert: tokenizer.json vocab id of '{}' is not an integer", text);
    by_id[id.get<int64_t>()] = text;
  }
  int64_t n_vocab = by_id.empty() ? 0 : by_id.rbegin()->first + 1;
  if (static_cast<size_t>(n_vocab) != by_id.size()) {
    return invalid_argument("convert: tokenizer.json model.vocab has {} entries but ids up to {}",
                            by_id.size(), n_vocab - 1);
  }
  if (cfg.contains("vocab_size") && cfg["vocab_size"].is_number_unsigned())
    n_vocab = cfg["vocab_size"].get<int64_t>();
  if (n_vocab <= 0 || n_vocab > (int64_t{1} << 24))
    return invalid_argument("convert: implausible vocabulary size {}", n_vocab);

  // Rank of the first merge that produces each token (see the scores above).
  std::map<int64_t, int64_t> first_rank;
  int64_t n_merges = 0;
  if (model.contains("merges") && model["merges"].is_array()) {
    for (const json& m : model["merges"]) {
      std::string joined;
      if (m.is_string()) {
        const std::string t = m.get<std::string>();
        const size_t space = t.size() > 1 ? t.find(' ', 1) : std::string::npos;
        if (space == std::string::npos)
          return invalid_argument("convert: tokenizer.json merge #{} '{}' has no space", n_merges, t);
        joined = t.substr(0, space) + t.substr(space + 1);
      } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
        joined = m[0].get<std::string>() + m[1].get<std::string>();
      } else {
        return invalid_argument("convert: tokenizer.json merge #{} is neither \"a b\" nor [\"a\", \"b\"]",
                                n_merges);
      }
      if (auto it = model["vocab"].find(joined); it != model["vocab"].end() && it->is_number_unsigned()) {
        first_rank.emplace(it->get<int64_t>(), n_merges);
      }
      ++n_merges;
    }
  }

  SpmVocab v;
  const auto n = static_cast<size_t>(n_vocab);
  v.tokens.resize(n);
  v.scores.assign(n, -10000.0f);
  v.types.assign(n, kUnused);
  const std::string unk = model.contains("unk_token") && model["unk_token"].is_string()
                              ? model["unk_token"].get<std::string>()
                              : "";
  for (size_t i = 0; i < n; ++i) {
    auto it = by_id.find(static_cast<int64_t>(i));
    if (it == by_id.end()) {
      v.tokens[i] = fmt::format("[PAD{}]", i);
      continue;
    }
    v.tokens[i] = it->second;
    if (is_byte_token(it->second)) {
      v.types[i] = kByte;
      v.scores[i] = 0.0f;
    } else if (it->second == unk) {
      v.types[i] = kUnknown;
      v.scores[i] = 0.0f;
    } else {
      v.types[i] = kNormal;
      const auto r = first_rank.find(static_cast<int64_t>(i));
      v.scores[i] =
          -static_cast<float>(r != first_rank.end() ? r->second : n_merges + static_cast<int64_t>(i));
    }
  }
  // tokenizer_config.json's added_tokens_decoder (convert's loop), else tokenizer.json's added_tokens.
  std::vector<std::tuple<int64_t, std::string, bool>> decl;
  if (tcfg.contains("added_tokens_decoder") && tcfg["added_tokens_decoder"].is_object()) {
    for (const auto& [key, a] : tcfg["added_tokens_decoder"].items()) {
      if (!a.is_object() || !a.contains("content") || !a["content"].is_string()) {
        return invalid_argument("convert: tokenizer_config.json added_tokens_decoder entry {} has no content",
                                key);
      }
      decl.emplace_back(std::stoll(key), a["content"].get<std::string>(), a.value("special", false));
    }
  } else if (tok.contains("added_tokens") && tok["added_tokens"].is_array()) {
    for (const json& a : tok["added_tokens"]) {
      if (!a.is_object() || !a.contains("id") || !a["id"].is_number_unsigned() || !a.contains("content") ||
          !a["content"].is_string()) {
        return invalid_argument("convert: tokenizer.json added_tokens entry without id/content");
      }
      decl.emplace_back(a["id"].get<int64_t>(), a["content"].get<std::string>(), a.value("special", false));
    }
  }
  for (auto& [id, content, special] : decl) {
    v.added[id] = {content, special};  // special ids are looked up by this content, before renaming spaces
    if (id < 0 || id >= n_vocab) continue;  // convert: "ignore token: id is out of range"
    const auto i = static_cast<size_t>(id);
    if (special || looks_special(content)) {
      v.types[i] = kControl;
    } else {
      for (size_t at; (at = content.find("\xe2\x96\x81")) != std::string::npos;) content.replace(at, 3, " ");
      v.types[i] = kUserDefined;
    }
    v.scores[i] = -1000.0f;
    v.tokens[i] = content;
  }
  v.add_space_prefix = prepends_space(tok.contains("normalizer") ? tok["normalizer"] : json());
  return v;
}

}  // namespace minfer::tools
