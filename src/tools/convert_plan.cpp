// Per-architecture tensor plans and hyper-parameter keys for `convert`, after convert_hf_to_gguf.py's
// TextModel, Qwen2Model / Qwen3Model, Qwen3MoeModel (Qwen2MoeModel), LlamaModel and Gemma3Model.
#include "tools/convert_plan.h"

#include <cmath>
#include <numbers>
#include <optional>

#include <fmt/format.h>

namespace minfer::tools {
namespace {

using nlohmann::json;

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

bool get_bool(const json& cfg, const char* key, bool fallback) {
  return cfg.contains(key) && cfg[key].is_boolean() ? cfg[key].get<bool>() : fallback;
}

enum class Family { kQwen2, kQwen3, kQwen3Moe, kLlama, kGemma3 };

// rope_scaling (transformers < 5) or rope_parameters (transformers 5, which also holds rope_theta).
json rope_params(const json& cfg) {
  if (cfg.contains("rope_scaling") && cfg["rope_scaling"].is_object()) return cfg["rope_scaling"];
  if (cfg.contains("rope_parameters") && cfg["rope_parameters"].is_object()) return cfg["rope_parameters"];
  return json::object();
}

std::string rope_type(const json& rp) {
  for (const char* key : {"rope_type", "type"}) {
    if (rp.contains(key) && rp[key].is_string()) return rp[key].get<std::string>();
  }
  return "";
}

// llama3 frequency factors, computed as LlamaModel.generate_extra_tensors does: in float32 (torch), the
// original context from config.json's top-level original_max_position_embeddings (default 8192).
Result<std::vector<float>> llama3_rope_factors(const json& cfg, const json& rp, float base, uint32_t dim) {
  MINFER_ASSIGN_OR_RETURN(float factor, get_f32(rp, "factor", 8.0f));
  MINFER_ASSIGN_OR_RETURN(float low, get_f32(rp, "low_freq_factor", 1.0f));
  MINFER_ASSIGN_OR_RETURN(float high, get_f32(rp, "high_freq_factor", 4.0f));
  MINFER_ASSIGN_OR_RETURN(uint32_t old_ctx, get_u32(cfg, "original_max_position_embeddings", 8192u));
  if (!(factor > 0.0f) || !(low > 0.0f) || !(high > 0.0f) || low == high || old_ctx == 0) {
    return invalid_argument("convert: rope_scaling llama3 parameters are invalid (factor {}, low_freq_factor {}, "
                            "high_freq_factor {}, original context {})", factor, low, high, old_ctx);
  }
  const double old_ctx_d = old_ctx;
  const float low_wavelen = static_cast<float>(old_ctx_d / low), high_wavelen = static_cast<float>(old_ctx_d / high);
  const float span = static_cast<float>(static_cast<double>(high) - static_cast<double>(low));
  const float two_pi = static_cast<float>(2.0 * std::numbers::pi);
  std::vector<float> out;
  for (uint32_t i = 0; i < dim; i += 2) {
    const float freq = 1.0f / std::pow(base, static_cast<float>(i) / static_cast<float>(dim));
    const float wavelen = two_pi / freq;
    if (wavelen < high_wavelen) {
      out.push_back(1.0f);
    } else if (wavelen > low_wavelen) {
      out.push_back(factor);
    } else {
      const float smooth = (static_cast<float>(old_ctx) / wavelen - low) / span;
      out.push_back(1.0f / ((1.0f - smooth) / factor + smooth));
    }
  }
  return out;
}

}  // namespace

std::vector<int64_t> PlannedTensor::gguf_ne() const {
  if (hf.empty()) return {static_cast<int64_t>(values.size())};
  std::vector<int64_t> ne(hf_shape.rbegin(), hf_shape.rend());
  if (keep_rows >= 0) ne.back() = keep_rows;
  if (hf.size() > 1) ne.push_back(static_cast<int64_t>(hf.size()));
  return ne;
}

const char* supported_hf_architectures() {
  return "Qwen2ForCausalLM, Qwen3ForCausalLM, Qwen3MoeForCausalLM, LlamaForCausalLM, MistralForCausalLM, "
         "Gemma3ForCausalLM";
}

Result<ConvertPlan> plan_hf_convert(const json& cfg, int64_t n_vocab) {
  if (!cfg.is_object()) return invalid_argument("convert: config.json is not a JSON object");
  std::string hf_arch;
  if (cfg.contains("architectures") && cfg["architectures"].is_array() && !cfg["architectures"].empty() &&
      cfg["architectures"][0].is_string()) {
    hf_arch = cfg["architectures"][0].get<std::string>();
  }
  Family family = Family::kQwen2;
  ConvertPlan plan;
  if (hf_arch == "Qwen2ForCausalLM") family = Family::kQwen2, plan.arch = "qwen2";
  else if (hf_arch == "Qwen3ForCausalLM") family = Family::kQwen3, plan.arch = "qwen3";
  else if (hf_arch == "Qwen3MoeForCausalLM") family = Family::kQwen3Moe, plan.arch = "qwen3moe";
  else if (hf_arch == "LlamaForCausalLM" || hf_arch == "MistralForCausalLM") family = Family::kLlama, plan.arch = "llama";
  else if (hf_arch == "Gemma3ForCausalLM") family = Family::kGemma3, plan.arch = "gemma3";
  else if (hf_arch == "Gemma3ForConditionalGeneration") {
    return unsupported("convert: architecture 'Gemma3ForConditionalGeneration' (Gemma 3 with vision) is not supported; "
                       "text-only Gemma3ForCausalLM checkpoints are");
  } else {
    return unsupported("convert: architecture '{}' is not supported ({})",
                       hf_arch.empty() ? "(none in config.json)" : hf_arch, supported_hf_architectures());
  }
  const bool gemma = family == Family::kGemma3, moe = family == Family::kQwen3Moe, llama = family == Family::kLlama;
  const bool qk_norm = family == Family::kQwen3 || moe || gemma;
  const bool qkv_bias = family == Family::kQwen2 || (llama && get_bool(cfg, "attention_bias", false));
  if (llama && get_bool(cfg, "attention_bias", false)) {
    // HF Llama's attention_bias also puts a bias on o_proj, which llama.cpp's llama graph does not read.
    return unsupported("convert: {} with attention_bias = true (q/k/v/o biases) is not supported", hf_arch);
  }
  if (llama && get_bool(cfg, "mlp_bias", false)) {
    return unsupported("convert: {} with mlp_bias = true is not supported", hf_arch);
  }

  MINFER_ASSIGN_OR_RETURN(uint32_t n_embd, get_u32(cfg, "hidden_size"));
  MINFER_ASSIGN_OR_RETURN(uint32_t n_layer, get_u32(cfg, "num_hidden_layers"));
  std::optional<uint32_t> ff_default;
  if (moe) ff_default = 0;  // a MoE config may omit the dense width; then it is not written
  MINFER_ASSIGN_OR_RETURN(uint32_t n_ff, get_u32(cfg, "intermediate_size", ff_default));
  MINFER_ASSIGN_OR_RETURN(uint32_t n_head, get_u32(cfg, "num_attention_heads", gemma ? std::optional<uint32_t>(8) : std::nullopt));
  MINFER_ASSIGN_OR_RETURN(uint32_t n_head_kv, get_u32(cfg, "num_key_value_heads", gemma ? 4u : n_head));
  MINFER_ASSIGN_OR_RETURN(uint32_t n_ctx, get_u32(cfg, "max_position_embeddings", gemma ? std::optional<uint32_t>(131072) : std::nullopt));
  const json rp = rope_params(cfg);
  const float theta_default = gemma ? 1000000.0f : 10000.0f;
  MINFER_ASSIGN_OR_RETURN(float rope_theta, get_f32(cfg, "rope_theta", theta_default));
  if (!cfg.contains("rope_theta") && rp.contains("rope_theta")) {
    MINFER_ASSIGN_OR_RETURN(rope_theta, get_f32(rp, "rope_theta"));
  }
  MINFER_ASSIGN_OR_RETURN(float eps, get_f32(cfg, "rms_norm_eps", gemma ? std::optional<float>(1e-6f) : std::nullopt));
  if (n_head == 0 || n_head_kv == 0 || n_head % n_head_kv != 0 || n_layer == 0 || n_embd == 0) {
    return invalid_argument("convert: config.json head counts / sizes are inconsistent ({} heads, {} kv heads)", n_head, n_head_kv);
  }
  const bool has_head_dim = cfg.contains("head_dim") && !cfg["head_dim"].is_null();
  MINFER_ASSIGN_OR_RETURN(uint32_t head_dim, get_u32(cfg, "head_dim", gemma ? 256u : n_embd / n_head));
  if (head_dim == 0 || (llama && head_dim % 2 != 0)) return invalid_argument("convert: head_dim {} is invalid", head_dim);
  const bool tied = get_bool(cfg, "tie_word_embeddings", gemma);  // Gemma 3 ties by default

  const std::string a = plan.arch;
  auto& md = plan.md;
  md.set(a + ".block_count", gguf::Value::u32(n_layer));
  md.set(a + ".context_length", gguf::Value::u32(n_ctx));
  md.set(a + ".embedding_length", gguf::Value::u32(n_embd));
  if (n_ff > 0) md.set(a + ".feed_forward_length", gguf::Value::u32(n_ff));
  md.set(a + ".attention.head_count", gguf::Value::u32(n_head));
  md.set(a + ".attention.head_count_kv", gguf::Value::u32(n_head_kv));
  md.set(a + ".rope.freq_base", gguf::Value::f32(rope_theta));
  md.set(a + ".attention.layer_norm_rms_epsilon", gguf::Value::f32(eps));
  if (qk_norm || has_head_dim) {
    md.set(a + ".attention.key_length", gguf::Value::u32(head_dim));
    md.set(a + ".attention.value_length", gguf::Value::u32(head_dim));
  }
  if (llama) {
    MINFER_ASSIGN_OR_RETURN(uint32_t cfg_vocab, get_u32(cfg, "vocab_size", static_cast<uint32_t>(n_vocab)));
    md.set(a + ".vocab_size", gguf::Value::u32(cfg_vocab));
    md.set(a + ".rope.dimension_count", gguf::Value::u32(head_dim));
  }

  // Experts (Qwen3-MoE): counts, width, and the config values llama.cpp's qwen3moe graph assumes.
  uint32_t n_expert = 0, n_ff_exp = 0;
  if (moe) {
    MINFER_ASSIGN_OR_RETURN(n_expert, get_u32(cfg, "num_experts"));
    MINFER_ASSIGN_OR_RETURN(uint32_t n_used, get_u32(cfg, "num_experts_per_tok"));
    MINFER_ASSIGN_OR_RETURN(n_ff_exp, get_u32(cfg, "moe_intermediate_size"));
    if (n_expert == 0 || n_used == 0 || n_used > n_expert || n_ff_exp == 0) {
      return invalid_argument("convert: config.json num_experts {} / num_experts_per_tok {} / moe_intermediate_size {} "
                              "are inconsistent", n_expert, n_used, n_ff_exp);
    }
    // llama.cpp's qwen3moe always renormalizes the chosen experts' weights; a checkpoint trained without
    // it would run differently there, so it is refused rather than converted into a different model.
    if (!get_bool(cfg, "norm_topk_prob", true)) {
      return unsupported("convert: {} with norm_topk_prob = false is not supported (llama.cpp's qwen3moe always "
                         "normalizes the top-k expert weights)", hf_arch);
    }
    MINFER_ASSIGN_OR_RETURN(uint32_t sparse_step, get_u32(cfg, "decoder_sparse_step", 1u));
    const bool dense_layers = cfg.contains("mlp_only_layers") && cfg["mlp_only_layers"].is_array() &&
                              !cfg["mlp_only_layers"].empty();
    if (sparse_step != 1 || dense_layers) {
      return unsupported("convert: {} with dense MLP layers (decoder_sparse_step {}, mlp_only_layers) is not supported",
                         hf_arch, sparse_step);
    }
    MINFER_ASSIGN_OR_RETURN(uint32_t shared, get_u32(cfg, "shared_expert_intermediate_size", 0u));
    if (shared != 0) return unsupported("convert: {} with a shared expert is not supported", hf_arch);
    md.set(a + ".expert_count", gguf::Value::u32(n_expert));
    md.set(a + ".expert_used_count", gguf::Value::u32(n_used));
    md.set(a + ".expert_feed_forward_length", gguf::Value::u32(n_ff_exp));
  }

  // Gemma 3: the keys Gemma3Model writes, and refusals for what llama.cpp's gemma3 hard-codes otherwise.
  if (gemma) {
    const std::string act = cfg.value("hidden_activation", cfg.value("hidden_act", std::string("gelu_pytorch_tanh")));
    if (act != "gelu_pytorch_tanh") return unsupported("convert: Gemma3 hidden_activation '{}' is not supported (gelu_pytorch_tanh)", act);
    if (cfg.contains("attn_logit_softcapping") && !cfg["attn_logit_softcapping"].is_null()) {
      return unsupported("convert: Gemma3 attn_logit_softcapping is not supported (Gemma 3 has none)");
    }
    if (cfg.contains("final_logit_softcapping") && cfg["final_logit_softcapping"].is_number() &&
        cfg["final_logit_softcapping"].get<double>() != 0.0) {
      md.set(a + ".final_logit_softcapping", gguf::Value::f32(cfg["final_logit_softcapping"].get<float>()));
    }
    // llama.cpp: every 6th layer global, local layers at RoPE base 10000, attention scale 1/sqrt(head_dim)
    // (n_embd/n_head for the 27B shape).
    MINFER_ASSIGN_OR_RETURN(uint32_t pattern, get_u32(cfg, "sliding_window_pattern", 6u));
    if (cfg.contains("layer_types") && cfg["layer_types"].is_array()) {
      const json& lt = cfg["layer_types"];
      for (size_t l = 0; l < lt.size(); ++l) {
        const std::string want = (l + 1) % 6 == 0 ? "full_attention" : "sliding_attention";
        if (!lt[l].is_string() || lt[l].get<std::string>() != want) {
          return unsupported("convert: Gemma3 layer_types[{}] is not '{}' (llama.cpp's gemma3 has one global layer in 6)",
                             l, want);
        }
      }
    } else if (pattern != 6) {
      return unsupported("convert: Gemma3 sliding_window_pattern {} is not supported (llama.cpp's gemma3 uses 6)", pattern);
    }
    MINFER_ASSIGN_OR_RETURN(float local_base, get_f32(cfg, "rope_local_base_freq", 10000.0f));
    if (local_base != 10000.0f) {
      return unsupported("convert: Gemma3 rope_local_base_freq {} is not supported (llama.cpp's gemma3 uses 10000)", local_base);
    }
    MINFER_ASSIGN_OR_RETURN(float qpas, get_f32(cfg, "query_pre_attn_scalar", static_cast<float>(head_dim)));
    if (qpas != static_cast<float>(head_dim) && qpas != static_cast<float>(n_embd / n_head)) {
      return unsupported("convert: Gemma3 query_pre_attn_scalar {} is neither head_dim {} nor hidden_size / heads",
                         qpas, head_dim);
    }
    MINFER_ASSIGN_OR_RETURN(uint32_t window, get_u32(cfg, "sliding_window"));
    md.set(a + ".attention.sliding_window", gguf::Value::u32(window));
  }

  // RoPE scaling: which types each family's converter writes; anything else is refused by name.
  const std::string scaling = rope_type(rp);
  std::vector<float> rope_freqs;
  if (scaling == "yarn" && !llama && !gemma) {
    md.set(a + ".rope.scaling.type", gguf::Value::string("yarn"));
    if (rp.contains("factor") && rp["factor"].is_number()) md.set(a + ".rope.scaling.factor", gguf::Value::f32(rp["factor"].get<float>()));
    if (rp.contains("original_max_position_embeddings") && rp["original_max_position_embeddings"].is_number_unsigned()) {
      md.set(a + ".rope.scaling.original_context_length",
             gguf::Value::u32(rp["original_max_position_embeddings"].get<uint32_t>()));
    }
  } else if (scaling == "linear" && (llama || gemma)) {
    MINFER_ASSIGN_OR_RETURN(float factor, get_f32(rp, "factor"));
    md.set(a + ".rope.scaling.type", gguf::Value::string("linear"));
    md.set(a + ".rope.scaling.factor", gguf::Value::f32(factor));
  } else if (scaling == "llama3" && llama) {
    MINFER_ASSIGN_OR_RETURN(rope_freqs, llama3_rope_factors(cfg, rp, rope_theta, head_dim));
  } else if (!scaling.empty() && scaling != "default") {
    return unsupported("convert: rope_scaling type '{}' is not supported for {} ({})", scaling, hf_arch,
                       llama ? "linear, llama3" : gemma ? "linear" : "yarn");
  }

  // The tensor plan, in llama.cpp's names, with the shapes config.json implies.
  auto& ts = plan.tensors;
  auto add = [&](std::string hf, std::string gguf, std::vector<int64_t> shape) -> PlannedTensor& {
    PlannedTensor t;
    t.hf = {std::move(hf)};
    t.gguf = std::move(gguf);
    t.hf_shape = std::move(shape);
    t.keep_f32 = t.hf_shape.size() == 1;
    if (gemma && t.hf[0].size() >= 11 && t.hf[0].compare(t.hf[0].size() - 11, 11, "norm.weight") == 0) {
      t.op = RowOp::kNormOffset;
    }
    ts.push_back(std::move(t));
    return ts.back();
  };
  if (!rope_freqs.empty()) {
    PlannedTensor t;
    t.gguf = "rope_freqs.weight";
    t.values = std::move(rope_freqs);
    t.keep_f32 = true;
    ts.push_back(std::move(t));
  }
  const int64_t E = n_embd, q_dim = static_cast<int64_t>(n_head) * head_dim, kv_dim = static_cast<int64_t>(n_head_kv) * head_dim;
  if (gemma) {
    // Gemma3Model cuts the embedding to the tokenizer's size (rows past it are never looked up).
    MINFER_ASSIGN_OR_RETURN(uint32_t rows, get_u32(cfg, "vocab_size", static_cast<uint32_t>(n_vocab)));
    if (rows < n_vocab) {
      return invalid_argument("convert: config.json vocab_size {} is smaller than the tokenizer's {} tokens", rows, n_vocab);
    }
    add("model.embed_tokens.weight", "token_embd.weight", {rows, E}).keep_rows = n_vocab;
  } else {
    add("model.embed_tokens.weight", "token_embd.weight", {n_vocab, E});
  }
  for (uint32_t l = 0; l < n_layer; ++l) {
    const std::string hf = fmt::format("model.layers.{}.", l), g = fmt::format("blk.{}.", l);
    add(hf + "input_layernorm.weight", g + "attn_norm.weight", {E});
    auto& q = add(hf + "self_attn.q_proj.weight", g + "attn_q.weight", {q_dim, E});
    if (llama) q.op = RowOp::kPermuteQK, q.n_head = n_head;
    if (qkv_bias) add(hf + "self_attn.q_proj.bias", g + "attn_q.bias", {q_dim});
    auto& k = add(hf + "self_attn.k_proj.weight", g + "attn_k.weight", {kv_dim, E});
    if (llama) k.op = RowOp::kPermuteQK, k.n_head = n_head_kv;
    if (qkv_bias) add(hf + "self_attn.k_proj.bias", g + "attn_k.bias", {kv_dim});
    add(hf + "self_attn.v_proj.weight", g + "attn_v.weight", {kv_dim, E});
    if (qkv_bias) add(hf + "self_attn.v_proj.bias", g + "attn_v.bias", {kv_dim});
    add(hf + "self_attn.o_proj.weight", g + "attn_output.weight", {E, q_dim});
    if (qk_norm) {
      add(hf + "self_attn.q_norm.weight", g + "attn_q_norm.weight", {head_dim});
      add(hf + "self_attn.k_norm.weight", g + "attn_k_norm.weight", {head_dim});
    }
    if (gemma) {
      add(hf + "post_attention_layernorm.weight", g + "post_attention_norm.weight", {E});
      add(hf + "pre_feedforward_layernorm.weight", g + "ffn_norm.weight", {E});
      add(hf + "post_feedforward_layernorm.weight", g + "post_ffw_norm.weight", {E});
    } else {
      add(hf + "post_attention_layernorm.weight", g + "ffn_norm.weight", {E});
    }
    if (moe) {
      add(hf + "mlp.gate.weight", g + "ffn_gate_inp.weight", {n_expert, E}).keep_f32 = true;  // convert keeps the router f32
      for (const char* w : {"gate", "up", "down"}) {
        PlannedTensor t;
        for (uint32_t e = 0; e < n_expert; ++e) t.hf.push_back(fmt::format("{}mlp.experts.{}.{}_proj.weight", hf, e, w));
        t.gguf = fmt::format("{}ffn_{}_exps.weight", g, w);
        t.hf_shape = std::string(w) == "down" ? std::vector<int64_t>{E, n_ff_exp} : std::vector<int64_t>{n_ff_exp, E};
        ts.push_back(std::move(t));
      }
    } else {
      add(hf + "mlp.gate_proj.weight", g + "ffn_gate.weight", {n_ff, E});
      add(hf + "mlp.up_proj.weight", g + "ffn_up.weight", {n_ff, E});
      add(hf + "mlp.down_proj.weight", g + "ffn_down.weight", {E, n_ff});
    }
  }
  add("model.norm.weight", "output_norm.weight", {E});
  if (!tied) add("lm_head.weight", "output.weight", {n_vocab, E});
  else plan.dropped.push_back("lm_head.weight");  // the embedding doubles as output
  return plan;
}

}  // namespace minfer::tools
