// Hugging Face checkpoint -> GGUF for the dense Qwen2 / Qwen3 families, mirroring the metadata and tensor
// layout of llama.cpp's convert_hf_to_gguf.py (TextModel + gguf.SpecialVocab) for these architectures.
// Quantized outputs are produced by writing an f32 GGUF next to the output and running quantize on it.
#include "tools/convert.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "core/fp16.h"
#include "gguf/writer.h"
#include "tools/convert_plan.h"
#include "tools/hf_spm_vocab.h"
#include "tools/quantize.h"
#include "tools/safetensors.h"

namespace minfer::tools {
namespace fs = std::filesystem;
namespace {

using nlohmann::json;

// The split regex of Qwen2/2.5/3 tokenizers (llama.cpp pre-tokenizer "qwen2").
constexpr char kQwen2Regex[] =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// Llama 3's: digits in runs of up to three (llama.cpp pre-tokenizer "llama-bpe").
constexpr char kLlama3Regex[] =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// Qwen3.5's variant: letters include marks (llama.cpp pre-tokenizer "qwen35").
constexpr char kQwen35Regex[] =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

enum TokenType : int32_t { kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6 };

Result<json> read_json(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return not_found("convert: cannot read {}", path.string());
  std::stringstream ss;
  ss << in.rdbuf();
  json j = json::parse(ss.str(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return invalid_argument("convert: {} is not valid JSON", path.string());
  return j;
}

bool looks_special(const std::string& t) {
  const bool ascii = t.size() >= 4 && t.rfind("<|", 0) == 0 && t.compare(t.size() - 2, 2, "|>") == 0;
  // DeepSeek-style fullwidth bars: <｜ ... ｜>
  static const std::string kOpen = "<\xef\xbd\x9c", kClose = "\xef\xbd\x9c>";
  const bool wide = t.size() >= 8 && t.rfind(kOpen, 0) == 0 && t.compare(t.size() - kClose.size(), kClose.size(), kClose) == 0;
  return ascii || wide || t == "<pad>" || t == "<mask>" || t == "<unk>";
}

std::optional<std::string> special_content(const json& cfg, const std::string& key) {
  if (!cfg.contains(key)) return std::nullopt;
  const json& v = cfg[key];
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string()) return v["content"].get<std::string>();
  return std::nullopt;
}

float load_elem(const std::string& dtype, const uint8_t* p) {
  if (dtype == "F32") {
    float f;
    std::memcpy(&f, p, 4);
    return f;
  }
  uint16_t h;
  std::memcpy(&h, p, 2);
  return dtype == "F16" ? fp16_to_fp32(h) : bf16_to_fp32(h);
}

void store_elem(const std::string& dtype, float f, uint8_t* p) {
  if (dtype == "F32") {
    std::memcpy(p, &f, 4);
    return;
  }
  const uint16_t h = dtype == "F16" ? fp32_to_fp16(f) : fp32_to_bf16(f);
  std::memcpy(p, &h, 2);
}

// `bytes` (elements of safetensors `dtype`) in `target` (F32, F16 or BF16): verbatim when the dtype
// matches, else converted element by element through f32 (f32 -> f16 / bf16 round to nearest even).
void append_cast(const std::string& dtype, std::span<const uint8_t> bytes, DType target, std::vector<uint8_t>* out) {
  const std::string want = target == DType::F32 ? "F32" : target == DType::F16 ? "F16" : "BF16";
  if (dtype == want) {
    out->insert(out->end(), bytes.begin(), bytes.end());
    return;
  }
  const size_t in_size = safetensors_dtype_size(dtype), out_size = target == DType::F32 ? 4 : 2;
  const size_t n = bytes.size() / in_size, base = out->size();
  out->resize(base + n * out_size);
  for (size_t i = 0; i < n; ++i) store_elem(want, load_elem(dtype, bytes.data() + i * in_size), out->data() + base + i * out_size);
}

// One source after its row operation, still in the source dtype (so a cast afterwards rounds once, as
// convert_hf_to_gguf.py's torch code does).
std::vector<uint8_t> source_rows(const PlannedTensor& p, const StTensor& t) {
  const size_t rows = static_cast<size_t>(p.hf_shape[0]);
  const size_t row_bytes = t.data.size() / rows;
  const size_t kept = p.keep_rows >= 0 ? static_cast<size_t>(p.keep_rows) : rows;
  std::vector<uint8_t> out(t.data.begin(), t.data.begin() + static_cast<std::ptrdiff_t>(kept * row_bytes));
  if (p.op == RowOp::kPermuteQK) {
    // HF keeps each head's rows as [first halves of the rotated pairs; second halves] (rotate_half);
    // llama.cpp's llama graph rotates adjacent rows. Row h*hd + 2i + j takes HF row h*hd + j*hd/2 + i.
    const size_t hd = rows / static_cast<size_t>(p.n_head), half = hd / 2;
    for (size_t h = 0; h < static_cast<size_t>(p.n_head); ++h) {
      for (size_t i = 0; i < half; ++i) {
        for (size_t j = 0; j < 2; ++j) {
          std::memcpy(out.data() + (h * hd + 2 * i + j) * row_bytes, t.data.data() + (h * hd + j * half + i) * row_bytes,
                      row_bytes);
        }
      }
    }
  } else if (p.op == RowOp::kNormOffset) {
    const size_t es = safetensors_dtype_size(t.dtype);
    for (size_t i = 0; i < out.size() / es; ++i) store_elem(t.dtype, load_elem(t.dtype, out.data() + i * es) + 1.0f, out.data() + i * es);
  }
  return out;
}

// The planned tensor's bytes in `target`: computed values, or the sources (stacked) after their row op.
std::vector<uint8_t> planned_tensor_bytes(const PlannedTensor& p, const std::vector<const StTensor*>& srcs, DType target) {
  std::vector<uint8_t> out;
  if (srcs.empty()) {
    append_cast("F32", std::span(reinterpret_cast<const uint8_t*>(p.values.data()), p.values.size() * 4), target, &out);
    return out;
  }
  for (const StTensor* t : srcs) {
    if (p.op == RowOp::kCopy && p.keep_rows < 0) {
      append_cast(t->dtype, t->data, target, &out);
    } else {
      const std::vector<uint8_t> rows = source_rows(p, *t);
      append_cast(t->dtype, rows, target, &out);
    }
  }
  return out;
}

}  // namespace

Result<gguf::Metadata> hf_tokenizer_metadata(const std::string& dir) {
  const fs::path root(dir);
  MINFER_ASSIGN_OR_RETURN(json tok, read_json(root / "tokenizer.json"));
  json tcfg = json::object();
  if (fs::exists(root / "tokenizer_config.json")) {
    MINFER_ASSIGN_OR_RETURN(tcfg, read_json(root / "tokenizer_config.json"));
  }
  json cfg = json::object();
  if (fs::exists(root / "config.json")) {
    MINFER_ASSIGN_OR_RETURN(cfg, read_json(root / "config.json"));
  }
  if (!tok.is_object() || !tok.contains("model") || !tok["model"].is_object()) {
    return invalid_argument("convert: tokenizer.json has no model object");
  }
  const json& model = tok["model"];
  if (!model.contains("type") || model["type"] != "BPE") {
    return unsupported("convert: tokenizer.json model type '{}' is not supported (byte-level BPE only)",
                       model.contains("type") && model["type"].is_string() ? model["type"].get<std::string>() : "?");
  }
  gguf::Metadata md;
  std::map<int64_t, std::pair<std::string, bool>> added;  // id -> (content, special)
  int64_t n_vocab = 0;
  if (is_spm_tokenizer_json(tok)) {
    // SentencePiece (Llama 2, Mistral, Gemma 3), as _set_vocab_sentencepiece writes it.
    MINFER_ASSIGN_OR_RETURN(SpmVocab sv, spm_vocab_from_hf(tok, tcfg, cfg));
    n_vocab = static_cast<int64_t>(sv.tokens.size());
    added = std::move(sv.added);
    md.set("tokenizer.ggml.model", gguf::Value::string("llama"));
    md.set("tokenizer.ggml.pre", gguf::Value::string("default"));
    md.set("tokenizer.ggml.tokens", gguf::Value::array(gguf::Array::of_strings(std::move(sv.tokens))));
    md.set("tokenizer.ggml.scores", gguf::Value::array(gguf::Array::of(gguf::ValueType::F32, sv.scores)));
    md.set("tokenizer.ggml.token_type", gguf::Value::array(gguf::Array::of(gguf::ValueType::I32, sv.types)));
    md.set("tokenizer.ggml.add_space_prefix", gguf::Value::boolean(sv.add_space_prefix));
    md.set("tokenizer.ggml.remove_extra_whitespaces", gguf::Value::boolean(false));
  } else {
  // Pre-tokenizer: the Split regex decides llama.cpp's pre-tokenizer name.
  std::string regex;
  if (tok.contains("pre_tokenizer") && tok["pre_tokenizer"].is_object()) {
    const json& pt = tok["pre_tokenizer"];
    auto find_split = [&](const json& p) {
      if (p.is_object() && p.value("type", "") == "Split" && p.contains("pattern") && p["pattern"].is_object() &&
          p["pattern"].contains("Regex") && p["pattern"]["Regex"].is_string()) {
        regex = p["pattern"]["Regex"].get<std::string>();
      }
    };
    find_split(pt);
    if (pt.contains("pretokenizers") && pt["pretokenizers"].is_array()) {
      for (const json& p : pt["pretokenizers"]) find_split(p);
    }
  }
  std::string pre;
  if (regex == kQwen2Regex) pre = "qwen2";
  else if (regex == kQwen35Regex) pre = "qwen35";
  else if (regex == kLlama3Regex) pre = "llama-bpe";
  else return unsupported("convert: tokenizer.json pre-tokenizer regex '{}' is not a known one (qwen2, qwen35, llama-bpe)", regex);

  if (!model.contains("vocab") || !model["vocab"].is_object()) return invalid_argument("convert: tokenizer.json has no model.vocab");
  std::map<int64_t, std::string> by_id;
  for (const auto& [text, id] : model["vocab"].items()) {
    if (!id.is_number_unsigned()) return invalid_argument("convert: tokenizer.json vocab id of '{}' is not an integer", text);
    by_id[id.get<int64_t>()] = text;
  }
  if (tok.contains("added_tokens") && tok["added_tokens"].is_array()) {
    for (const json& a : tok["added_tokens"]) {
      if (!a.is_object() || !a.contains("id") || !a["id"].is_number_unsigned() || !a.contains("content") ||
          !a["content"].is_string()) {
        return invalid_argument("convert: tokenizer.json added_tokens entry without id/content");
      }
      added[a["id"].get<int64_t>()] = {a["content"].get<std::string>(), a.value("special", false)};
      by_id[a["id"].get<int64_t>()] = a["content"].get<std::string>();
    }
  }
  n_vocab = by_id.empty() ? 0 : by_id.rbegin()->first + 1;
  if (cfg.contains("vocab_size") && cfg["vocab_size"].is_number_unsigned()) {
    n_vocab = std::max<int64_t>(n_vocab, cfg["vocab_size"].get<int64_t>());
  }
  if (n_vocab > (int64_t{1} << 24)) return invalid_argument("convert: vocabulary of {} tokens is implausibly large", n_vocab);
  std::vector<std::string> tokens(static_cast<size_t>(n_vocab));
  std::vector<int32_t> types(static_cast<size_t>(n_vocab));
  for (int64_t i = 0; i < n_vocab; ++i) {
    auto it = by_id.find(i);
    if (it == by_id.end()) {
      tokens[i] = fmt::format("[PAD{}]", i);
      types[i] = kUnused;
    } else if (auto a = added.find(i); a != added.end()) {
      tokens[i] = a->second.first;
      types[i] = a->second.second || looks_special(a->second.first) ? kControl : kUserDefined;
    } else {
      tokens[i] = it->second;
      types[i] = kNormal;
    }
  }
  std::vector<std::string> merges;
  if (model.contains("merges") && model["merges"].is_array()) {
    merges.reserve(model["merges"].size());
    for (const json& m : model["merges"]) {
      if (m.is_string()) {
        merges.push_back(m.get<std::string>());  // older files: "a b"
      } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
        merges.push_back(m[0].get<std::string>() + " " + m[1].get<std::string>());  // newer: ["a", "b"]
      } else {
        return invalid_argument("convert: tokenizer.json merge #{} is neither \"a b\" nor [\"a\", \"b\"]", merges.size());
      }
    }
  }

  md.set("tokenizer.ggml.model", gguf::Value::string("gpt2"));
  md.set("tokenizer.ggml.pre", gguf::Value::string(pre));
  md.set("tokenizer.ggml.tokens", gguf::Value::array(gguf::Array::of_strings(std::move(tokens))));
  md.set("tokenizer.ggml.token_type", gguf::Value::array(gguf::Array::of(gguf::ValueType::I32, types)));
  md.set("tokenizer.ggml.merges", gguf::Value::array(gguf::Array::of_strings(std::move(merges))));
  }
  // Special ids as gguf.SpecialVocab finds them: the tokenizer_config.json token (looked up among the
  // added tokens) first, then config.json's <type>_token_id; written in the order they were found.
  static const std::pair<const char*, const char*> kSpecial[] = {
      {"bos", "bos_token_id"}, {"eos", "eos_token_id"}, {"unk", "unknown_token_id"}, {"sep", "seperator_token_id"},
      {"pad", "padding_token_id"}, {"cls", "cls_token_id"}, {"mask", "mask_token_id"}};
  std::vector<std::pair<std::string, uint32_t>> ids;
  std::set<std::string> done;
  for (const auto& [typ, key] : kSpecial) {
    auto content = special_content(tcfg, std::string(typ) + "_token");
    if (!content) continue;
    for (const auto& [id, a] : added) {
      if (a.first == *content && id < n_vocab) {
        ids.emplace_back(key, static_cast<uint32_t>(id));
        done.insert(typ);
        break;
      }
    }
  }
  for (const auto& [typ, key] : kSpecial) {
    const std::string k = std::string(typ) + "_token_id";
    if (done.count(typ) || !cfg.contains(k) || !cfg[k].is_number_unsigned()) continue;
    if (cfg[k].get<int64_t>() < n_vocab) ids.emplace_back(key, static_cast<uint32_t>(cfg[k].get<uint64_t>()));
  }
  for (const auto& [key, id] : ids) md.set(std::string("tokenizer.ggml.") + key, gguf::Value::u32(id));
  for (const char* typ : {"bos", "eos"}) {
    const std::string k = fmt::format("add_{}_token", typ);
    if (tcfg.contains(k) && tcfg[k].is_boolean()) md.set("tokenizer.ggml." + k, gguf::Value::boolean(tcfg[k].get<bool>()));
  }
  std::string tmpl;
  if (tcfg.contains("chat_template") && tcfg["chat_template"].is_string()) {
    tmpl = tcfg["chat_template"].get<std::string>();
  } else if (tcfg.contains("chat_template") && tcfg["chat_template"].is_array()) {
    for (const json& t : tcfg["chat_template"]) {
      if (t.is_object() && t.value("name", "") == "default" && t.contains("template") && t["template"].is_string()) {
        tmpl = t["template"].get<std::string>();
      }
    }
  } else if (fs::exists(root / "chat_template.jinja")) {
    std::ifstream in(root / "chat_template.jinja", std::ios::binary);
    tmpl.assign(std::istreambuf_iterator<char>(in), {});
  }
  if (!tmpl.empty()) md.set("tokenizer.chat_template", gguf::Value::string(tmpl));
  return md;
}

Result<ConvertReport> convert_hf(const ConvertOptions& options) {
  const fs::path root(options.input_dir);
  MINFER_ASSIGN_OR_RETURN(json cfg, read_json(root / "config.json"));
  // Refuse an unknown architecture before reading the tokenizer (its message names the architecture).
  if (auto early = plan_hf_convert(cfg, 1); !early.ok() && early.status().code() == StatusCode::kUnsupported) {
    return early.status();
  }

  // Output type: float types are written here; quantized ones go through quantize from an f32 file.
  std::string outtype = options.outtype;
  std::transform(outtype.begin(), outtype.end(), outtype.begin(), [](unsigned char c) { return std::tolower(c); });
  DType float_type = DType::F32;
  bool quantized = false;
  if (outtype == "f32") float_type = DType::F32;
  else if (outtype == "f16") float_type = DType::F16;
  else if (outtype == "bf16") float_type = DType::BF16;
  else quantized = true;  // validated by quantize (the message lists the valid types)

  MINFER_ASSIGN_OR_RETURN(gguf::Metadata tok_md, hf_tokenizer_metadata(options.input_dir));
  MINFER_ASSIGN_OR_RETURN(const gguf::Array* tokens, tok_md.get_array("tokenizer.ggml.tokens", gguf::ValueType::STRING));
  const int64_t n_vocab = static_cast<int64_t>(tokens->count);
  MINFER_ASSIGN_OR_RETURN(ConvertPlan plan, plan_hf_convert(cfg, n_vocab));
  const std::string hf_arch = cfg["architectures"][0].get<std::string>();

  MINFER_ASSIGN_OR_RETURN(Checkpoint ckpt, Checkpoint::open(options.input_dir));

  std::set<std::string> used;
  for (const PlannedTensor& p : plan.tensors) {
    for (const std::string& hf : p.hf) {
      const StTensor* t = ckpt.find(hf);
      if (t == nullptr) return not_found("convert: missing tensor '{}' (needed for {})", hf, p.gguf);
      if (t->shape != p.hf_shape) {
        return invalid_argument("convert: tensor '{}' has shape [{}], config.json implies [{}]", hf, fmt::join(t->shape, ", "),
                                fmt::join(p.hf_shape, ", "));
      }
      if (t->dtype != "F32" && t->dtype != "F16" && t->dtype != "BF16") {
        return unsupported("convert: tensor '{}' has dtype {}; supported source dtypes: F32, F16, BF16", hf, t->dtype);
      }
      used.insert(hf);
    }
    if (p.op == RowOp::kPermuteQK && (p.n_head <= 0 || p.hf_shape[0] % (2 * p.n_head) != 0)) {
      return invalid_argument("convert: tensor '{}' has {} rows, not a multiple of 2 x {} heads", p.hf[0], p.hf_shape[0],
                              p.n_head);
    }
  }
  const std::set<std::string> dropped(plan.dropped.begin(), plan.dropped.end());
  for (const auto& [name, t] : ckpt.tensors()) {
    if (used.count(name) || dropped.count(name)) continue;
    if (name.find("rotary_emb.inv_freq") != std::string::npos) continue;  // recomputed from rope_theta
    return unsupported("convert: unexpected tensor '{}' for {}", name, hf_arch);
  }

  gguf::Writer w;
  auto& md = w.metadata();
  std::string name = options.name;
  if (name.empty()) name = fs::absolute(root).lexically_normal().filename().string();
  if (name.empty()) name = fs::absolute(root).lexically_normal().parent_path().filename().string();
  const std::string a = plan.arch;
  md.set("general.architecture", gguf::Value::string(a));
  md.set("general.type", gguf::Value::string("model"));
  md.set("general.name", gguf::Value::string(name));
  for (const auto& [key, value] : plan.md.entries()) md.set(key, value);
  const uint32_t ftype = float_type == DType::F32 ? 0 : float_type == DType::F16 ? 1 : 32;
  md.set("general.file_type", gguf::Value::u32(ftype));
  md.set("general.quantization_version", gguf::Value::u32(2));
  for (const auto& [key, value] : tok_md.entries()) md.set(key, value);

  for (const PlannedTensor& p : plan.tensors) {
    std::vector<const StTensor*> srcs;
    for (const std::string& hf : p.hf) srcs.push_back(ckpt.find(hf));
    const DType type = p.keep_f32 ? DType::F32 : float_type;
    MINFER_RETURN_IF_ERROR(w.add_tensor(p.gguf, type, p.gguf_ne(), [srcs, &p, type]() -> Result<std::vector<uint8_t>> {
      return planned_tensor_bytes(p, srcs, type);
    }));
  }

  ConvertReport report;
  report.arch = a;
  report.n_tensors = plan.tensors.size();
  report.n_vocab = static_cast<size_t>(n_vocab);
  if (!quantized) {
    uint64_t bytes = 0;
    MINFER_RETURN_IF_ERROR(w.write(options.output, [&](size_t i, size_t n) {
      (void)i;
      if (options.on_progress) options.on_progress(i + 1, n, bytes);
    }));
    std::error_code ec;
    report.bytes_out = fs::file_size(options.output, ec);
    return report;
  }
  const std::string tmp = options.output + ".f32.tmp.gguf";
  MINFER_RETURN_IF_ERROR(w.write(tmp));
  QuantizeOptions q;
  q.input = tmp;
  q.output = options.output;
  q.type = options.outtype;
  q.n_threads = options.n_threads;
  q.on_progress = options.on_progress;
  auto qr = quantize_model(q);
  std::error_code ec;
  fs::remove(tmp, ec);
  if (!qr.ok()) return qr.status();
  report.bytes_out = qr->bytes_out;
  return report;
}

}  // namespace minfer::tools
