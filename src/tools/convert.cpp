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
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "core/fp16.h"
#include "gguf/writer.h"
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

Result<uint32_t> get_u32(const json& cfg, const char* key, std::optional<uint32_t> fallback = std::nullopt) {
  if (!cfg.contains(key) || cfg[key].is_null()) {
    if (fallback) return *fallback;
    return not_found("convert: config.json has no '{}'", key);
  }
  if (!cfg[key].is_number_unsigned() || cfg[key].get<uint64_t>() > UINT32_MAX) {
    return invalid_argument("convert: config.json '{}' is not a non-negative integer", key);
  }
  return static_cast<uint32_t>(cfg[key].get<uint64_t>());
}
Result<float> get_f32(const json& cfg, const char* key, std::optional<float> fallback = std::nullopt) {
  if (!cfg.contains(key) || cfg[key].is_null()) {
    if (fallback) return *fallback;
    return not_found("convert: config.json has no '{}'", key);
  }
  if (!cfg[key].is_number()) return invalid_argument("convert: config.json '{}' is not a number", key);
  return cfg[key].get<float>();
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

struct Arch {
  std::string name;  // gguf architecture
  bool qk_norm = false;
  bool qkv_bias = false;
};

// One GGUF tensor and where it comes from.
struct Planned {
  std::string hf;
  std::string gguf;
  std::vector<int64_t> hf_shape;  // expected, row-major outermost first
};

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

// The tensor's bytes in `target` (F32, F16 or BF16): verbatim when the dtype matches, else converted
// element by element through f32 (f32 -> f16 / bf16 round to nearest even; bf16 NaN quieted as ggml).
std::vector<uint8_t> cast_tensor(const StTensor& t, DType target) {
  const std::string want = target == DType::F32 ? "F32" : target == DType::F16 ? "F16" : "BF16";
  if (t.dtype == want) return std::vector<uint8_t>(t.data.begin(), t.data.end());
  const size_t in_size = safetensors_dtype_size(t.dtype);
  const size_t n = t.data.size() / in_size;
  std::vector<uint8_t> out(n * (target == DType::F32 ? 4 : 2));
  for (size_t i = 0; i < n; ++i) {
    const float f = load_elem(t.dtype, t.data.data() + i * in_size);
    if (target == DType::F32) {
      std::memcpy(out.data() + i * 4, &f, 4);
    } else {
      const uint16_t h = target == DType::F16 ? fp32_to_fp16(f) : fp32_to_bf16(f);
      std::memcpy(out.data() + i * 2, &h, 2);
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
  if (!cfg.is_object()) return invalid_argument("convert: config.json is not a JSON object");
  std::string hf_arch;
  if (cfg.contains("architectures") && cfg["architectures"].is_array() && !cfg["architectures"].empty() &&
      cfg["architectures"][0].is_string()) {
    hf_arch = cfg["architectures"][0].get<std::string>();
  }
  Arch arch;
  if (hf_arch == "Qwen2ForCausalLM") arch = {"qwen2", false, true};
  else if (hf_arch == "Qwen3ForCausalLM") arch = {"qwen3", true, false};
  else return unsupported("convert: architecture '{}' is not supported (Qwen2ForCausalLM, Qwen3ForCausalLM)", hf_arch.empty() ? "(none in config.json)" : hf_arch);

  // Output type: float types are written here; quantized ones go through quantize from an f32 file.
  std::string outtype = options.outtype;
  std::transform(outtype.begin(), outtype.end(), outtype.begin(), [](unsigned char c) { return std::tolower(c); });
  DType float_type = DType::F32;
  bool quantized = false;
  if (outtype == "f32") float_type = DType::F32;
  else if (outtype == "f16") float_type = DType::F16;
  else if (outtype == "bf16") float_type = DType::BF16;
  else quantized = true;  // validated by quantize (the message lists the valid types)

  MINFER_ASSIGN_OR_RETURN(uint32_t n_embd, get_u32(cfg, "hidden_size"));
  MINFER_ASSIGN_OR_RETURN(uint32_t n_layer, get_u32(cfg, "num_hidden_layers"));
  MINFER_ASSIGN_OR_RETURN(uint32_t n_ff, get_u32(cfg, "intermediate_size"));
  MINFER_ASSIGN_OR_RETURN(uint32_t n_head, get_u32(cfg, "num_attention_heads"));
  MINFER_ASSIGN_OR_RETURN(uint32_t n_head_kv, get_u32(cfg, "num_key_value_heads", n_head));
  MINFER_ASSIGN_OR_RETURN(uint32_t n_ctx, get_u32(cfg, "max_position_embeddings"));
  MINFER_ASSIGN_OR_RETURN(float rope_theta, get_f32(cfg, "rope_theta", 10000.0f));
  MINFER_ASSIGN_OR_RETURN(float eps, get_f32(cfg, "rms_norm_eps"));
  if (n_head == 0 || n_head_kv == 0 || n_head % n_head_kv != 0 || n_layer == 0 || n_embd == 0) {
    return invalid_argument("convert: config.json head counts / sizes are inconsistent ({} heads, {} kv heads)", n_head, n_head_kv);
  }
  const bool has_head_dim = cfg.contains("head_dim") && !cfg["head_dim"].is_null();
  MINFER_ASSIGN_OR_RETURN(uint32_t head_dim, get_u32(cfg, "head_dim", n_embd / n_head));
  const bool tied = cfg.contains("tie_word_embeddings") && cfg["tie_word_embeddings"].is_boolean() &&
                    cfg["tie_word_embeddings"].get<bool>();
  MINFER_ASSIGN_OR_RETURN(gguf::Metadata tok_md, hf_tokenizer_metadata(options.input_dir));
  MINFER_ASSIGN_OR_RETURN(const gguf::Array* tokens, tok_md.get_array("tokenizer.ggml.tokens", gguf::ValueType::STRING));
  const int64_t n_vocab = static_cast<int64_t>(tokens->count);

  MINFER_ASSIGN_OR_RETURN(Checkpoint ckpt, Checkpoint::open(options.input_dir));

  // The tensor plan, in llama.cpp's names, with the shapes config.json implies.
  const int64_t q_dim = static_cast<int64_t>(n_head) * head_dim, kv_dim = static_cast<int64_t>(n_head_kv) * head_dim;
  std::vector<Planned> plan;
  plan.push_back({"model.embed_tokens.weight", "token_embd.weight", {n_vocab, n_embd}});
  for (uint32_t l = 0; l < n_layer; ++l) {
    const std::string hf = fmt::format("model.layers.{}.", l), g = fmt::format("blk.{}.", l);
    plan.push_back({hf + "input_layernorm.weight", g + "attn_norm.weight", {n_embd}});
    plan.push_back({hf + "self_attn.q_proj.weight", g + "attn_q.weight", {q_dim, n_embd}});
    if (arch.qkv_bias) plan.push_back({hf + "self_attn.q_proj.bias", g + "attn_q.bias", {q_dim}});
    plan.push_back({hf + "self_attn.k_proj.weight", g + "attn_k.weight", {kv_dim, n_embd}});
    if (arch.qkv_bias) plan.push_back({hf + "self_attn.k_proj.bias", g + "attn_k.bias", {kv_dim}});
    plan.push_back({hf + "self_attn.v_proj.weight", g + "attn_v.weight", {kv_dim, n_embd}});
    if (arch.qkv_bias) plan.push_back({hf + "self_attn.v_proj.bias", g + "attn_v.bias", {kv_dim}});
    plan.push_back({hf + "self_attn.o_proj.weight", g + "attn_output.weight", {n_embd, q_dim}});
    if (arch.qk_norm) {
      plan.push_back({hf + "self_attn.q_norm.weight", g + "attn_q_norm.weight", {head_dim}});
      plan.push_back({hf + "self_attn.k_norm.weight", g + "attn_k_norm.weight", {head_dim}});
    }
    plan.push_back({hf + "post_attention_layernorm.weight", g + "ffn_norm.weight", {n_embd}});
    plan.push_back({hf + "mlp.gate_proj.weight", g + "ffn_gate.weight", {n_ff, n_embd}});
    plan.push_back({hf + "mlp.up_proj.weight", g + "ffn_up.weight", {n_ff, n_embd}});
    plan.push_back({hf + "mlp.down_proj.weight", g + "ffn_down.weight", {n_embd, n_ff}});
  }
  plan.push_back({"model.norm.weight", "output_norm.weight", {n_embd}});
  if (!tied) plan.push_back({"lm_head.weight", "output.weight", {n_vocab, n_embd}});

  std::set<std::string> used;
  for (const Planned& p : plan) {
    const StTensor* t = ckpt.find(p.hf);
    if (t == nullptr) return not_found("convert: missing tensor '{}' (needed for {})", p.hf, p.gguf);
    if (t->shape != p.hf_shape) {
      return invalid_argument("convert: tensor '{}' has shape [{}], config.json implies [{}]", p.hf, fmt::join(t->shape, ", "),
                              fmt::join(p.hf_shape, ", "));
    }
    if (t->dtype != "F32" && t->dtype != "F16" && t->dtype != "BF16") {
      return unsupported("convert: tensor '{}' has dtype {}; supported source dtypes: F32, F16, BF16", p.hf, t->dtype);
    }
    used.insert(p.hf);
  }
  for (const auto& [name, t] : ckpt.tensors()) {
    if (used.count(name)) continue;
    if (name.find("rotary_emb.inv_freq") != std::string::npos) continue;  // recomputed from rope_theta
    if (tied && name == "lm_head.weight") continue;                        // the embedding doubles as output
    return unsupported("convert: unexpected tensor '{}' for {} (not a dense Qwen weight)", name, hf_arch);
  }

  gguf::Writer w;
  auto& md = w.metadata();
  std::string name = options.name;
  if (name.empty()) name = fs::absolute(root).lexically_normal().filename().string();
  if (name.empty()) name = fs::absolute(root).lexically_normal().parent_path().filename().string();
  const std::string a = arch.name;
  md.set("general.architecture", gguf::Value::string(a));
  md.set("general.type", gguf::Value::string("model"));
  md.set("general.name", gguf::Value::string(name));
  md.set(a + ".block_count", gguf::Value::u32(n_layer));
  md.set(a + ".context_length", gguf::Value::u32(n_ctx));
  md.set(a + ".embedding_length", gguf::Value::u32(n_embd));
  md.set(a + ".feed_forward_length", gguf::Value::u32(n_ff));
  md.set(a + ".attention.head_count", gguf::Value::u32(n_head));
  md.set(a + ".attention.head_count_kv", gguf::Value::u32(n_head_kv));
  md.set(a + ".rope.freq_base", gguf::Value::f32(rope_theta));
  md.set(a + ".attention.layer_norm_rms_epsilon", gguf::Value::f32(eps));
  if (arch.qk_norm || has_head_dim) {
    md.set(a + ".attention.key_length", gguf::Value::u32(head_dim));
    md.set(a + ".attention.value_length", gguf::Value::u32(head_dim));
  }
  if (cfg.contains("rope_scaling") && cfg["rope_scaling"].is_object()) {
    const json& rs = cfg["rope_scaling"];
    const std::string type = rs.value("rope_type", rs.value("type", ""));
    if (type == "yarn") {
      md.set(a + ".rope.scaling.type", gguf::Value::string("yarn"));
      if (rs.contains("factor") && rs["factor"].is_number()) md.set(a + ".rope.scaling.factor", gguf::Value::f32(rs["factor"].get<float>()));
      if (rs.contains("original_max_position_embeddings") && rs["original_max_position_embeddings"].is_number_unsigned()) {
        md.set(a + ".rope.scaling.original_context_length",
               gguf::Value::u32(rs["original_max_position_embeddings"].get<uint32_t>()));
      }
    } else if (!type.empty() && type != "default") {
      return unsupported("convert: rope_scaling type '{}' is not supported (yarn only)", type);
    }
  }
  const uint32_t ftype = float_type == DType::F32 ? 0 : float_type == DType::F16 ? 1 : 32;
  md.set("general.file_type", gguf::Value::u32(ftype));
  md.set("general.quantization_version", gguf::Value::u32(2));
  for (const auto& [key, value] : tok_md.entries()) md.set(key, value);

  for (const Planned& p : plan) {
    const StTensor* t = ckpt.find(p.hf);
    std::vector<int64_t> ne(p.hf_shape.rbegin(), p.hf_shape.rend());  // ggml order: fastest first
    const DType type = p.hf_shape.size() == 1 ? DType::F32 : float_type;
    MINFER_RETURN_IF_ERROR(w.add_tensor(p.gguf, type, std::move(ne), [t, type]() -> Result<std::vector<uint8_t>> {
      return cast_tensor(*t, type);
    }));
  }

  ConvertReport report;
  report.arch = a;
  report.n_tensors = plan.size();
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
