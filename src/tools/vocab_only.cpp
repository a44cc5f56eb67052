// `convert --vocab-only`: tokenizer keys plus the architecture's hyper-parameters from config.json, no
// tensors (what convert_hf_to_gguf.py --vocab-only writes; llama.cpp's loader reads the hyper-parameters
// even when it loads only the vocabulary, so they must be there).
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "gguf/writer.h"
#include "tools/convert.h"

namespace minfer::tools {
namespace fs = std::filesystem;

Result<ConvertReport> convert_vocab_only(const ConvertOptions& options) {
  const fs::path root(options.input_dir);
  std::ifstream in(root / "config.json", std::ios::binary);
  if (!in) return not_found("convert: cannot read {}", (root / "config.json").string());
  std::stringstream ss;
  ss << in.rdbuf();
  const nlohmann::json cfg = nlohmann::json::parse(ss.str(), nullptr, /*allow_exceptions=*/false);
  if (!cfg.is_object()) return invalid_argument("convert: config.json is not a JSON object");
  std::string hf_arch;
  if (cfg.contains("architectures") && cfg["architectures"].is_array() && !cfg["architectures"].empty() &&
      cfg["architectures"][0].is_string()) {
    hf_arch = cfg["architectures"][0].get<std::string>();
  }
  // The GGUF architecture names convert_hf_to_gguf.py registers for these Hugging Face classes.
  static const std::pair<const char*, const char*> kArchs[] = {{"Qwen2ForCausalLM", "qwen2"},
                                                               {"Qwen3ForCausalLM", "qwen3"},
                                                               {"Qwen3MoeForCausalLM", "qwen3moe"},
                                                               {"LlamaForCausalLM", "llama"},
                                                               {"MistralForCausalLM", "llama"},
                                                               {"Gemma3ForCausalLM", "gemma3"},
                                                               {"Gemma3ForConditionalGeneration", "gemma3"}};
  std::string arch;
  for (const auto& [hf, gg] : kArchs) {
    if (hf_arch == hf) arch = gg;
  }
  if (arch.empty()) {
    return unsupported(
        "convert --vocab-only: architecture '{}' is not supported (Qwen2/Qwen3/Qwen3Moe, Llama, "
        "Mistral, Gemma3)",
        hf_arch.empty() ? "(none in config.json)" : hf_arch);
  }
  MINFER_ASSIGN_OR_RETURN(gguf::Metadata tok_md, hf_tokenizer_metadata(options.input_dir));
  MINFER_ASSIGN_OR_RETURN(const gguf::Array* tokens,
                          tok_md.get_array("tokenizer.ggml.tokens", gguf::ValueType::STRING));

  gguf::Writer w;
  auto& md = w.metadata();
  md.set("general.architecture", gguf::Value::string(arch));
  md.set("general.type", gguf::Value::string("model"));
  md.set("general.name", gguf::Value::string(options.name.empty() ? root.filename().string() : options.name));
  // Hyper-parameters that config.json states, under llama.cpp's key names.
  auto u32 = [&](const char* key, const std::string& gguf_key) {
    if (cfg.contains(key) && cfg[key].is_number_unsigned()) {
      md.set(arch + "." + gguf_key, gguf::Value::u32(static_cast<uint32_t>(cfg[key].get<uint64_t>())));
    }
  };
  auto f32 = [&](const char* key, const std::string& gguf_key) {
    if (cfg.contains(key) && cfg[key].is_number())
      md.set(arch + "." + gguf_key, gguf::Value::f32(cfg[key].get<float>()));
  };
  u32("num_hidden_layers", "block_count");
  u32("max_position_embeddings", "context_length");
  u32("hidden_size", "embedding_length");
  u32("intermediate_size", "feed_forward_length");
  u32("num_attention_heads", "attention.head_count");
  u32("num_key_value_heads", "attention.head_count_kv");
  u32("head_dim", "attention.key_length");
  u32("head_dim", "attention.value_length");
  u32("sliding_window", "attention.sliding_window");
  u32("num_experts", "expert_count");
  u32("num_experts_per_tok", "expert_used_count");
  f32("rope_theta", "rope.freq_base");
  f32("rms_norm_eps", "attention.layer_norm_rms_epsilon");
  md.set("general.file_type", gguf::Value::u32(0));  // all-f32 (there are no tensors)
  for (const auto& [key, value] : tok_md.entries()) md.set(key, value);

  const std::string tmp = options.output + ".tmp";
  MINFER_RETURN_IF_ERROR(w.write(tmp));
  std::error_code ec;
  fs::rename(tmp, options.output, ec);
  if (ec) return io_error("convert: cannot rename {} to {}: {}", tmp, options.output, ec.message());
  ConvertReport report;
  report.arch = arch;
  report.n_vocab = tokens->count;
  report.bytes_out = fs::file_size(options.output, ec);
  return report;
}

}  // namespace minfer::tools
