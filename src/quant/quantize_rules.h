// llama-quantize's per-tensor type choice (llama_tensor_get_type in llama.cpp's llama-quant.cpp) for the
// file types minfer writes, so `minfer quantize` produces the same tensor types as llama-quantize.
// Pure name/shape logic: no tensor data is read here.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"

namespace minfer::quant {

// A target of `minfer quantize --type`: its name, llama_ftype id (general.file_type) and base type.
struct FileType {
  std::string_view name;  // "q4_K_M", "q8_0", "f16", ...
  uint32_t ftype;         // llama_ftype (LLAMA_FTYPE_MOSTLY_Q4_K_M = 15, ...)
  DType base;             // type of ordinary 2-D weights
  bool k_mix;             // llama-quantize's K-quant mixing rules apply (attn_v / ffn_down upgrades)
};

// Case-insensitive lookup ("Q4_K_M" == "q4_k_m"); nullopt for an unknown name.
// q4_K and q5_K are llama-quantize's Q4_K_S / Q5_K_S mixes (its own "Q4_K" alias means Q4_K_M).
std::optional<FileType> file_type_from_name(std::string_view name);
std::vector<std::string_view> file_type_names();

struct TensorDesc {
  std::string name;
  DType type = DType::F32;  // current type
  int n_dims = 0;
  int64_t ne[4] = {1, 1, 1, 1};  // ggml order
};

struct TensorDecision {
  bool quantize = false;  // false: copied unchanged
  DType type = DType::F32;
  std::string reason;  // e.g. "output tensor -> Q6_K", "1-D: kept"
};

// Decisions for all tensors of a model (counts of attn_v / ffn_down tensors matter for the K mixes).
// `tied_output` is derived: a model without output.weight treats token_embd.weight as the output.
// `n_expert` is the model's `<arch>.expert_count` (0 for dense models): expert tensors (ffn_*_exps) follow
// the rules of their dense names (ffn_down_exps is an ffn_down), the router (ffn_gate_inp) is kept, and
// llama-quantize's 8-expert rules apply (attn_k and attn_v in Q8_0, attn_output in Q5_K for Q4_K mixes).
// `llm_type_70b`: llama.cpp classifies the model as LLM_TYPE_70B (is_llm_type_70b); llama-quantize then puts
// attn_v in Q5_K where its mix would give Q4_K (Q4_K_S / Q4_K_M files).
std::vector<TensorDecision> choose_tensor_types(const FileType& ft, const std::vector<TensorDesc>& tensors,
                                                bool pure = false, int n_expert = 0, bool llm_type_70b = false);

// llama.cpp's LLM_TYPE_70B among the architectures minfer runs: `llama` with 80 layers, grouped-query
// attention and not 8 experts (Llama 2/3.x 70B; 80 layers without GQA is its 65B), and `qwen2` with 80
// layers (Qwen2/Qwen2.5 72B).
bool is_llm_type_70b(std::string_view arch, uint32_t n_layer, uint32_t n_head, uint32_t n_head_kv,
                     uint32_t n_expert);

// Layer index of "blk.N.*" (as llama.cpp's sscanf("blk.%d.") reads it), or -1 for tensors outside the blocks.
int layer_of(std::string_view name);

// The architectures whose llama-quantize rules choose_tensor_types reproduces (the ones minfer runs).
// llama-quantize has rules for others (Falcon's, names such as ssm_conv1d, shared-expert ffn_down counting)
// that are not implemented, so `minfer quantize` refuses them by name rather than writing other types.
bool quantize_rules_cover(std::string_view arch);

}  // namespace minfer::quant
