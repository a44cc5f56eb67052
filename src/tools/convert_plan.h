// What `minfer convert` writes for each Hugging Face architecture, as llama.cpp's convert_hf_to_gguf.py
// writes it: the GGUF architecture, its hyper-parameter keys, and one entry per GGUF tensor saying where
// its bytes come from and how they are rearranged (the llama q/k row permutation, Gemma's norm offset,
// Qwen3-MoE's per-expert matrices stacked into one 3-D tensor, llama3 RoPE factors computed from
// config.json). convert.cpp reads the sources, applies the row operation and casts; nothing here touches
// a file.
//
//   MINFER_ASSIGN_OR_RETURN(tools::ConvertPlan plan, tools::plan_hf_convert(config_json, n_vocab));
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "gguf/metadata.h"

namespace minfer::tools {

enum class RowOp {
  kCopy,        // bytes as stored (cast to the outtype)
  kPermuteQK,   // llama: rows regrouped per head from rotate_half halves to interleaved pairs
  kNormOffset,  // Gemma: w + 1, rounded to the source dtype (as torch adds in it), then cast
};

struct PlannedTensor {
  std::vector<std::string> hf;     // sources; more than one: stacked along a new outermost dimension
  std::string gguf;
  std::vector<int64_t> hf_shape;   // each source's shape, row-major, outermost first
  RowOp op = RowOp::kCopy;
  int64_t n_head = 0;              // kPermuteQK: the heads of this projection (n_head for q, n_head_kv for k)
  int64_t keep_rows = -1;          // >= 0: only the first rows are written (Gemma's embedding, cut to the vocabulary)
  bool keep_f32 = false;           // f32 whatever the outtype (1-D tensors, the MoE router, rope_freqs)
  std::vector<float> values;       // a tensor computed here (rope_freqs.weight); `hf` is then empty

  // The GGUF shape (ggml order, fastest dimension first).
  std::vector<int64_t> gguf_ne() const;
};

struct ConvertPlan {
  std::string arch;                     // GGUF general.architecture
  gguf::Metadata md;                    // "<arch>.*" keys only
  std::vector<PlannedTensor> tensors;   // in writing order
  std::vector<std::string> dropped;     // checkpoint tensors not written on purpose (lm_head when tied)
};

// The plan for config.json `cfg` whose tokenizer has `n_vocab` tokens. Refuses, by name, an architecture,
// a config value or a rope_scaling type that convert (or llama.cpp reading the result) does not handle.
Result<ConvertPlan> plan_hf_convert(const nlohmann::json& cfg, int64_t n_vocab);

// The HF architectures plan_hf_convert accepts, for messages and --help.
const char* supported_hf_architectures();

}  // namespace minfer::tools
