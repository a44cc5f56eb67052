#include "tools/synthetic_model.h"

#include <cmath>
#include <cstring>
#include <memory>

#include "core/byte_unicode.h"
#include "core/fp16.h"
#include "core/rng.h"
#include "quant/quant.h"
#include "quant/quantize_rules.h"

namespace minfer::tools {
namespace {

using gguf::Array;
using gguf::Value;
using gguf::ValueType;

std::string codepoint_utf8(uint32_t cp) {
  std::string out;
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xc0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else {
    out += static_cast<char>(0xe0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  }
  return out;
}

std::string byte_token(uint8_t b) { return codepoint_utf8(byte_to_codepoint(b)); }

constexpr char kChatMlTemplate[] =
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + "
    "'\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

// 256 byte tokens, merges of common English fragments (each merge's parts exist before it), ChatML specials.
void add_small_vocab(gguf::Metadata& meta) {
  std::vector<std::string> tokens;
  for (int b = 0; b < 256; ++b) tokens.push_back(byte_token(static_cast<uint8_t>(b)));
  const std::string sp = byte_token(' ');
  const std::vector<std::pair<std::string, std::string>> merge_pairs = {
      {sp, "t"}, {"h", "e"}, {"i", "n"}, {sp, "a"}, {"e", "r"}, {"o", "n"}, {sp + "t", "he"}, {"r", "e"},
      {sp, "s"}, {"a", "t"}, {"o", "r"}, {"e", "n"}, {sp, "o"}, {sp, "w"}, {"i", "s"}, {"in", "g"},
      {sp, "c"}, {"e", "s"}, {"a", "n"}, {"e", "d"}, {sp, "b"}, {sp, "f"}, {sp, "i"}, {"l", "l"},
  };
  std::vector<std::string> merges;
  for (const auto& [a, b] : merge_pairs) {
    merges.push_back(a + " " + b);
    tokens.push_back(a + b);
  }
  std::vector<int32_t> types(tokens.size(), 1);  // NORMAL
  const int32_t eot = static_cast<int32_t>(tokens.size());
  for (const char* special : {"<|endoftext|>", "<|im_start|>", "<|im_end|>"}) {
    tokens.emplace_back(special);
    types.push_back(3);  // CONTROL
  }
  meta.set("tokenizer.ggml.model", Value::string("gpt2"));
  meta.set("tokenizer.ggml.pre", Value::string("qwen2"));
  meta.set("tokenizer.ggml.tokens", Value::array(Array::of_strings(tokens)));
  meta.set("tokenizer.ggml.token_type", Value::array(Array::of(ValueType::I32, types)));
  meta.set("tokenizer.ggml.merges", Value::array(Array::of_strings(merges)));
  meta.set("tokenizer.ggml.eos_token_id", Value::u32(static_cast<uint32_t>(eot + 2)));
  meta.set("tokenizer.ggml.padding_token_id", Value::u32(static_cast<uint32_t>(eot)));
  meta.set("tokenizer.ggml.bos_token_id", Value::u32(static_cast<uint32_t>(eot)));
  meta.set("tokenizer.ggml.add_bos_token", Value::boolean(false));
  meta.set("tokenizer.chat_template", Value::string(kChatMlTemplate));
}

// A tensor whose values are N(mean, std^2) draws from its own seed, encoded when the writer reaches it.
gguf::Writer::Producer normal_tensor(uint64_t seed, int64_t n, float mean, float std, DType type) {
  return [=]() -> Result<std::vector<uint8_t>> {
    Rng rng(seed);
    std::vector<uint8_t> out(static_cast<size_t>(n) * (type == DType::F32 ? 4 : 2));
    for (int64_t i = 0; i < n; ++i) {
      const float v = mean + std * static_cast<float>(rng.normal());
      if (type == DType::F32) {
        std::memcpy(out.data() + 4 * i, &v, 4);
      } else {
        const uint16_t h = type == DType::F16 ? fp32_to_fp16(v) : fp32_to_bf16(v);
        std::memcpy(out.data() + 2 * i, &h, 2);
      }
    }
    return out;
  };
}

// A quantized tensor: the same f32 draws as normal_tensor, encoded row by row into `type`.
gguf::Writer::Producer quantized_tensor(uint64_t seed, std::vector<int64_t> ne, float mean, float std, DType type) {
  return [=]() -> Result<std::vector<uint8_t>> {
    int64_t rows = 1;  // every row of a 2-D or expert-stacked 3-D tensor
    for (size_t d = 1; d < ne.size(); ++d) rows *= ne[d];
    Rng rng(seed);
    std::vector<float> f(static_cast<size_t>(ne[0] * rows));
    for (float& v : f) v = mean + std * static_cast<float>(rng.normal());
    std::vector<uint8_t> out(*row_bytes(type, ne[0]) * static_cast<size_t>(rows));
    quant::quantize_rows(type, f.data(), out.data(), rows, ne[0], 2);
    return out;
  };
}

// convert_hf_to_gguf.py's LlamaModel.generate_extra_tensors for rope_scaling.rope_type == "llama3" (with
// low_freq_factor 1, high_freq_factor 4, original_max_position_embeddings 8192), in f32 as torch computes it.
gguf::Writer::Producer llama3_rope_freqs(float base, int64_t head_dim, float factor) {
  return [=]() -> Result<std::vector<uint8_t>> {
    constexpr double kLowFreqFactor = 1.0, kHighFreqFactor = 4.0, kOldContext = 8192.0;
    const double low_freq_wavelen = kOldContext / kLowFreqFactor;
    const double high_freq_wavelen = kOldContext / kHighFreqFactor;
    std::vector<uint8_t> out(static_cast<size_t>(head_dim / 2) * sizeof(float));
    for (int64_t i = 0; i < head_dim / 2; ++i) {
      const float exponent = static_cast<float>(2 * i) / static_cast<float>(head_dim);
      const float freq = 1.0f / std::pow(base, exponent);
      const double wavelen = 2.0 * M_PI / static_cast<double>(freq);
      double f;
      if (wavelen < high_freq_wavelen) {
        f = 1.0;
      } else if (wavelen > low_freq_wavelen) {
        f = factor;
      } else {
        const double smooth = (kOldContext / wavelen - kLowFreqFactor) / (kHighFreqFactor - kLowFreqFactor);
        f = 1.0 / ((1.0 - smooth) / factor + smooth);
      }
      const auto v = static_cast<float>(f);
      std::memcpy(out.data() + 4 * i, &v, 4);
    }
    return out;
  };
}

}  // namespace

std::vector<std::string> synthetic_preset_names() {
  return {"tiny-qwen2", "tiny-qwen3", "tiny-llama", "tiny-llama-tied", "tiny-llama-kquant", "qwen2.5-0.5b",
          "qwen3-0.6b", "qwen2.5-3b", "qwen2.5-7b", "qwen3-8b", "llama-3.2-1b", "llama-3.1-8b", "mistral-7b",
          "tiny-qwen3-embedding", "qwen3-embedding-0.6b", "tiny-qwen3moe", "qwen3-30b-a3b", "tiny-gemma3",
          "tiny-gemma3-softcap", "gemma-3-1b", "gemma-3-4b"};
}

Result<SyntheticShape> synthetic_preset(const std::string& name) {
  SyntheticShape s;
  if (name == "tiny-qwen2") return s;
  if (name == "tiny-qwen3") {
    s.arch = "qwen3";
    s.head_dim = 32;
    s.tied_output = false;
    return s;
  }
  if (name == "tiny-llama" || name == "tiny-llama-tied") {
    s.arch = "llama";
    s.rope_freq_base = 10000.0f;
    s.rms_eps = 1e-5f;
    s.tied_output = name == "tiny-llama-tied";
    s.llama3_rope_factor = name == "tiny-llama" ? 8.0f : 0.0f;
    return s;
  }
  if (name == "tiny-llama-kquant") {
    // Rows of 256 so llama-quantize's K-quant types apply (tiny-llama's rows of 64 all fall back), 8 layers
    // so its use_more_bits pattern (layers 0, 3, 6, 7) and first-eighth / first-4 rules each pick some
    // layers and leave others, and 4 query heads per KV head (GQA 4, as Llama 3.x).
    s = {"llama", 256, 8, 4, 1, 64, 256, 4096, 10000.0f, 1e-5f, false, -1, 8.0f};
    return s;
  }
  if (name == "llama-3.2-1b") {
    s = {"llama", 2048, 16, 32, 8, 64, 8192, 131072, 500000.0f, 1e-5f, true, -1, 32.0f};
    return s;
  }
  if (name == "llama-3.1-8b") {
    s = {"llama", 4096, 32, 32, 8, 128, 14336, 131072, 500000.0f, 1e-5f, false, -1, 8.0f};
    return s;
  }
  if (name == "mistral-7b") {
    s = {"llama", 4096, 32, 32, 8, 128, 14336, 32768, 1e6f, 1e-5f, false, -1, 0.0f};
    return s;
  }
  if (name == "tiny-qwen3moe") {
    s = {"qwen3moe", 256, 2, 4, 2, 64, 512, 4096, 1e6f, 1e-6f, false, -1, 0.0f, 8, 2, 256};
    return s;
  }
  if (name == "qwen3-30b-a3b") {  // Qwen3-30B-A3B's config.json
    s = {"qwen3moe", 2048, 48, 32, 4, 128, 6144, 40960, 1e6f, 1e-6f, false, -1, 0.0f, 128, 8, 768};
    return s;
  }
  if (name == "tiny-gemma3" || name == "tiny-gemma3-softcap") {
    // Rows of 256 (n_embd) so the K-quant types apply to attn_q/k/v and ffn_gate/up; head_dim 64 != n_embd /
    // n_head, written as key_length like Gemma's 256, and a power of 4 like it, so the attention scale
    // (1/8) is exact whether Q or the scores are scaled.
    s = {"gemma3", 256, 7, 2, 1, 64, 128, 4096, 1e6f, 1e-6f, true};
    s.n_swa = 8;
    s.rope_scale_linear = 8.0f;
    if (name == "tiny-gemma3-softcap") {
      s.tied_output = false;
      s.final_logit_softcap = 15.0f;
    }
    return s;
  }
  if (name == "gemma-3-1b") {  // google/gemma-3-1b-it config.json (rope_theta 1e6, sliding_window 512)
    s = {"gemma3", 1152, 26, 4, 1, 256, 6912, 32768, 1e6f, 1e-6f, true};
    s.n_swa = 512;
    return s;
  }
  if (name == "gemma-3-4b") {  // google/gemma-3-4b-it text_config (linear rope_scaling 8 on global layers)
    s = {"gemma3", 2560, 34, 8, 4, 256, 10240, 131072, 1e6f, 1e-6f, true};
    s.n_swa = 1024;
    s.rope_scale_linear = 8.0f;
    return s;
  }
  if (name == "qwen2.5-0.5b") {
    s = {"qwen2", 896, 24, 14, 2, 64, 4864, 32768, 1e6f, 1e-6f, true};
    return s;
  }
  if (name == "qwen3-0.6b") {
    s = {"qwen3", 1024, 28, 16, 8, 128, 3072, 40960, 1e6f, 1e-6f, true};
    return s;
  }
  // Embedding models: a qwen3 decoder whose final-norm state of the last token is the embedding.
  if (name == "tiny-qwen3-embedding") {
    s.arch = "qwen3";
    s.head_dim = 32;
    s.pooling_type = 3;
    return s;
  }
  if (name == "qwen3-embedding-0.6b") {
    s = {"qwen3", 1024, 28, 16, 8, 128, 3072, 32768, 1e6f, 1e-6f, true, 3};
    return s;
  }
  // The 7B-class shapes most users run (issue 18): DRAM-bound on every CPU.
  if (name == "qwen2.5-3b") {
    s = {"qwen2", 2048, 36, 16, 2, 128, 11008, 32768, 1e6f, 1e-6f, true};
    return s;
  }
  if (name == "qwen2.5-7b") {
    s = {"qwen2", 3584, 28, 28, 4, 128, 18944, 32768, 1e6f, 1e-6f, false};
    return s;
  }
  if (name == "qwen3-8b") {
    s = {"qwen3", 4096, 36, 32, 8, 128, 12288, 40960, 1e6f, 1e-6f, false};
    return s;
  }
  return invalid_argument(
      "unknown model preset '{}' (known: {})", name, fmt::join(synthetic_preset_names(), ", "));
}

Result<gguf::Writer> make_synthetic_model(const SyntheticOptions& options) {
  const SyntheticShape& s = options.shape;
  if (s.arch != "qwen2" && s.arch != "qwen3" && s.arch != "qwen3moe" && s.arch != "llama" && s.arch != "gemma3") {
    return unsupported("synthetic model: unsupported architecture '{}'", s.arch);
  }
  if (s.llama3_rope_factor != 0.0f && s.arch != "llama") {
    return invalid_argument("synthetic model: llama3 rope scaling is for the llama architecture");
  }
  const bool gemma3 = s.arch == "gemma3";
  if (!gemma3 && (s.n_swa != 0 || s.rope_scale_linear != 0.0f || s.final_logit_softcap != 0.0f)) {
    return invalid_argument("synthetic model: sliding window, linear rope scaling and soft-capping are gemma3's");
  }
  std::optional<quant::FileType> qtype;
  if (!options.quant_type.empty()) {
    qtype = quant::file_type_from_name(options.quant_type);
    if (!qtype) return invalid_argument("synthetic model: unknown quantization type '{}'", options.quant_type);
  } else if (options.weight_type != DType::F32 && options.weight_type != DType::F16 &&
             options.weight_type != DType::BF16) {
    return unsupported("synthetic model: weight type {} is not generated directly; write f32 and run `minfer quantize`",
                       dtype_name(options.weight_type));
  }
  const bool moe = s.arch == "qwen3moe";
  if (moe != (s.n_expert > 0) || (moe && (s.n_expert_used == 0 || s.n_expert_used > s.n_expert || s.n_ff_exp == 0))) {
    return invalid_argument("synthetic model: experts ({} used of {}, width {}) are for qwen3moe only, and it needs them",
                            s.n_expert_used, s.n_expert, s.n_ff_exp);
  }
  if (s.n_head == 0 || s.n_head_kv == 0 || s.n_head % s.n_head_kv != 0) {
    return invalid_argument("synthetic model: n_head {} is not a multiple of n_head_kv {}", s.n_head, s.n_head_kv);
  }

  gguf::Writer w;
  gguf::Metadata& meta = w.metadata();
  const std::string& a = s.arch;
  meta.set("general.architecture", Value::string(a));
  meta.set("general.name", Value::string("minfer synthetic " + a + " (RANDOM WEIGHTS, output is noise)"));
  meta.set(a + ".block_count", Value::u32(s.n_layer));
  meta.set(a + ".context_length", Value::u32(s.n_ctx_train));
  meta.set(a + ".embedding_length", Value::u32(s.n_embd));
  meta.set(a + ".feed_forward_length", Value::u32(s.n_ff));
  meta.set(a + ".attention.head_count", Value::u32(s.n_head));
  meta.set(a + ".attention.head_count_kv", Value::u32(s.n_head_kv));
  meta.set(a + ".rope.freq_base", Value::f32(s.rope_freq_base));
  meta.set(a + ".attention.layer_norm_rms_epsilon", Value::f32(s.rms_eps));
  if (s.pooling_type >= 0) meta.set(a + ".pooling_type", Value::u32(static_cast<uint32_t>(s.pooling_type)));
  if (a == "llama") {
    meta.set(a + ".rope.dimension_count", Value::u32(s.head_dim));
    meta.set(a + ".vocab_size", Value::u32(0));  // set below, once the vocabulary is known
  }
  if (moe) {
    meta.set(a + ".expert_count", Value::u32(s.n_expert));
    meta.set(a + ".expert_used_count", Value::u32(s.n_expert_used));
    meta.set(a + ".expert_feed_forward_length", Value::u32(s.n_ff_exp));
  }
  if (gemma3) {  // what convert_hf_to_gguf.py's Gemma3Model writes
    if (s.n_swa > 0) meta.set(a + ".attention.sliding_window", Value::u32(s.n_swa));
    if (s.rope_scale_linear != 0.0f) {
      meta.set(a + ".rope.scaling.type", Value::string("linear"));
      meta.set(a + ".rope.scaling.factor", Value::f32(s.rope_scale_linear));
    }
    if (s.final_logit_softcap != 0.0f) meta.set(a + ".final_logit_softcapping", Value::f32(s.final_logit_softcap));
  }
  if (a == "qwen3" || moe || gemma3 || s.head_dim * s.n_head != s.n_embd) {
    meta.set(a + ".attention.key_length", Value::u32(s.head_dim));
    meta.set(a + ".attention.value_length", Value::u32(s.head_dim));
  }
  const uint32_t file_type = qtype                                ? qtype->ftype
                             : options.weight_type == DType::F32 ? 0
                             : options.weight_type == DType::F16 ? 1
                                                                 : 32;
  meta.set("general.file_type", Value::u32(file_type));
  meta.set("general.quantization_version", Value::u32(2));

  uint64_t n_vocab = 0;
  if (options.vocab_source != nullptr) {
    for (const auto& [key, value] : options.vocab_source->metadata().entries()) {
      if (key.rfind("tokenizer.", 0) == 0) meta.set(key, value);
    }
    const Value* tokens = meta.find("tokenizer.ggml.tokens");
    if (tokens == nullptr || tokens->type() != ValueType::ARRAY) {
      return invalid_argument("synthetic model: vocabulary source has no tokenizer.ggml.tokens array");
    }
    n_vocab = tokens->as_array().count;
  } else {
    add_small_vocab(meta);
    n_vocab = meta.find("tokenizer.ggml.tokens")->as_array().count;
  }

  if (a == "llama") meta.set(a + ".vocab_size", Value::u32(static_cast<uint32_t>(n_vocab)));
  const int64_t E = s.n_embd, V = static_cast<int64_t>(n_vocab), F = s.n_ff, D = s.head_dim;
  const int64_t Q = static_cast<int64_t>(s.n_head) * D, KV = static_cast<int64_t>(s.n_head_kv) * D;
  const DType wt = qtype ? DType::F32 : options.weight_type;
  uint64_t seed = options.seed;
  // Tensors are collected first so the quantization rules can see the whole model (layer counts).
  struct Pending {
    std::string name;
    std::vector<int64_t> ne;
    float mean, std;
    DType type;
    uint64_t seed;
  };
  std::vector<Pending> pending;
  auto add = [&](const std::string& name, std::vector<int64_t> ne, float mean, float std, DType type) -> Status {
    pending.push_back({name, std::move(ne), mean, std, type, ++seed * 0x9e3779b97f4a7c15ULL});
    return Status::ok_status();
  };
  const float inv_sqrt_e = 1.0f / std::sqrt(static_cast<float>(E));
  if (s.llama3_rope_factor != 0.0f) {
    MINFER_RETURN_IF_ERROR(w.add_tensor("rope_freqs.weight", DType::F32, {D / 2},
                                        llama3_rope_freqs(s.rope_freq_base, D, s.llama3_rope_factor)));
  }
  MINFER_RETURN_IF_ERROR(add("token_embd.weight", {E, V}, 0.0f, 4.0f * inv_sqrt_e, wt));
  MINFER_RETURN_IF_ERROR(add("output_norm.weight", {E}, 1.0f, 0.1f, DType::F32));
  if (!s.tied_output) MINFER_RETURN_IF_ERROR(add("output.weight", {E, V}, 0.0f, 4.0f * inv_sqrt_e, wt));
  for (uint32_t l = 0; l < s.n_layer; ++l) {
    const std::string p = fmt::format("blk.{}.", l);
    MINFER_RETURN_IF_ERROR(add(p + "attn_norm.weight", {E}, 1.0f, 0.1f, DType::F32));
    MINFER_RETURN_IF_ERROR(add(p + "attn_q.weight", {E, Q}, 0.0f, 1.5f * inv_sqrt_e, wt));
    MINFER_RETURN_IF_ERROR(add(p + "attn_k.weight", {E, KV}, 0.0f, 1.5f * inv_sqrt_e, wt));
    MINFER_RETURN_IF_ERROR(add(p + "attn_v.weight", {E, KV}, 0.0f, inv_sqrt_e, wt));
    if (a == "llama") {
      // no biases, no q/k norms
    } else if (a == "gemma3") {
      MINFER_RETURN_IF_ERROR(add(p + "attn_q_norm.weight", {D}, 1.2f, 0.2f, DType::F32));
      MINFER_RETURN_IF_ERROR(add(p + "attn_k_norm.weight", {D}, 1.2f, 0.2f, DType::F32));
      MINFER_RETURN_IF_ERROR(add(p + "post_attention_norm.weight", {E}, 1.0f, 0.1f, DType::F32));
    } else if (a == "qwen2") {
      MINFER_RETURN_IF_ERROR(add(p + "attn_q.bias", {Q}, 0.0f, 0.5f, DType::F32));
      MINFER_RETURN_IF_ERROR(add(p + "attn_k.bias", {KV}, 0.0f, 0.5f, DType::F32));
      MINFER_RETURN_IF_ERROR(add(p + "attn_v.bias", {KV}, 0.0f, 0.1f, DType::F32));
    } else {
      MINFER_RETURN_IF_ERROR(add(p + "attn_q_norm.weight", {D}, 1.2f, 0.2f, DType::F32));
      MINFER_RETURN_IF_ERROR(add(p + "attn_k_norm.weight", {D}, 1.2f, 0.2f, DType::F32));
    }
    MINFER_RETURN_IF_ERROR(add(p + "attn_output.weight", {Q, E}, 0.0f, 2.5f / std::sqrt(static_cast<float>(Q)), wt));
    MINFER_RETURN_IF_ERROR(add(p + "ffn_norm.weight", {E}, 1.0f, 0.1f, DType::F32));
    if (moe) {
      // A router with logits of standard deviation ~4: decisive enough that the experts a token picks are
      // rarely near-ties another engine's rounding could swap (a sharper one amplifies that rounding more).
      const int64_t X = s.n_expert, FX = s.n_ff_exp;
      MINFER_RETURN_IF_ERROR(add(p + "ffn_gate_inp.weight", {E, X}, 0.0f, 4.0f * inv_sqrt_e, DType::F32));
      MINFER_RETURN_IF_ERROR(add(p + "ffn_gate_exps.weight", {E, FX, X}, 0.0f, inv_sqrt_e, wt));
      MINFER_RETURN_IF_ERROR(add(p + "ffn_up_exps.weight", {E, FX, X}, 0.0f, inv_sqrt_e, wt));
      MINFER_RETURN_IF_ERROR(
          add(p + "ffn_down_exps.weight", {FX, E, X}, 0.0f, 2.5f / std::sqrt(static_cast<float>(FX)), wt));
      continue;
    }
    MINFER_RETURN_IF_ERROR(add(p + "ffn_gate.weight", {E, F}, 0.0f, inv_sqrt_e, wt));
    MINFER_RETURN_IF_ERROR(add(p + "ffn_up.weight", {E, F}, 0.0f, inv_sqrt_e, wt));
    MINFER_RETURN_IF_ERROR(add(p + "ffn_down.weight", {F, E}, 0.0f, 2.5f / std::sqrt(static_cast<float>(F)), wt));
    if (gemma3) MINFER_RETURN_IF_ERROR(add(p + "post_ffw_norm.weight", {E}, 1.0f, 0.1f, DType::F32));
  }
  std::vector<quant::TensorDecision> decisions;
  if (qtype) {
    std::vector<quant::TensorDesc> descs;
    for (const Pending& t : pending) {
      quant::TensorDesc d;
      d.name = t.name;
      d.type = t.type;
      d.n_dims = static_cast<int>(t.ne.size());
      for (size_t i = 0; i < t.ne.size(); ++i) d.ne[i] = t.ne[i];
      descs.push_back(std::move(d));
    }
    decisions = quant::choose_tensor_types(*qtype, descs, /*pure=*/false, static_cast<int>(s.n_expert),
                                           quant::is_llm_type_70b(s.arch, s.n_layer, s.n_head, s.n_head_kv,
                                                                  s.n_expert));
  }
  for (size_t i = 0; i < pending.size(); ++i) {
    Pending& t = pending[i];
    int64_t n = 1;
    for (int64_t d : t.ne) n *= d;
    if (qtype && decisions[i].quantize) {
      const DType qt = decisions[i].type;
      MINFER_RETURN_IF_ERROR(w.add_tensor(t.name, qt, t.ne, quantized_tensor(t.seed, t.ne, t.mean, t.std, qt)));
    } else {
      MINFER_RETURN_IF_ERROR(
          w.add_tensor(t.name, t.type, std::move(t.ne), normal_tensor(t.seed, n, t.mean, t.std, t.type)));
    }
  }
  return w;
}

}  // namespace minfer::tools
