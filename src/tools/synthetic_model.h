// Random-weight Qwen2 / Qwen3 / Qwen3-MoE / llama / gemma3 GGUF models with exact real shapes or tiny ones, written with our own
// GGUF writer. They are labelled as random (general.name) and exist for demos, tests and benchmarks:
// their text is noise, but every code path from loading to sampling runs on them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/status.h"
#include "gguf/reader.h"
#include "gguf/writer.h"

namespace minfer::tools {

struct SyntheticShape {
  std::string arch = "qwen2";  // "qwen2", "qwen3", "qwen3moe", "llama" or "gemma3"
  uint32_t n_embd = 64;
  uint32_t n_layer = 2;
  uint32_t n_head = 4;
  uint32_t n_head_kv = 2;
  uint32_t head_dim = 16;  // qwen3 writes it as attention.key_length / value_length
  uint32_t n_ff = 128;
  uint32_t n_ctx_train = 4096;
  float rope_freq_base = 1e6f;
  float rms_eps = 1e-6f;
  bool tied_output = true;  // no output.weight: the embedding doubles as the output projection
  int32_t pooling_type = -1;  // >= 0: written as <arch>.pooling_type (llama.cpp: 1 mean, 2 cls, 3 last)
  // llama3-type RoPE scaling (llama only): rope_freqs.weight computed as convert_hf_to_gguf.py computes it
  // from rope_scaling {factor, low_freq_factor 1, high_freq_factor 4, original_max_position_embeddings 8192};
  // 0 = no rope_freqs tensor.
  float llama3_rope_factor = 0.0f;
  // Mixture of experts (qwen3moe only): expert_count, expert_used_count, expert_feed_forward_length.
  uint32_t n_expert = 0;
  uint32_t n_expert_used = 0;
  uint32_t n_ff_exp = 0;
  // gemma3 only: the sliding window of its local layers (gemma3.attention.sliding_window; every 6th layer is
  // global, llama.cpp's default pattern), linear RoPE scaling of the global layers (rope.scaling.factor, as
  // Gemma 3 4B's rope_scaling; 0 = none) and final logit soft-capping (0 = no key).
  uint32_t n_swa = 0;
  float rope_scale_linear = 0.0f;
  float final_logit_softcap = 0.0f;
};

// Presets: "tiny-qwen2", "tiny-qwen3", "tiny-llama" (untied output, llama3 rope_freqs), "tiny-llama-tied"
// (tied output, no rope scaling), "tiny-llama-kquant" (8 layers, rows of 256 so K-quants apply, GQA 4; for the
// quantize parity test), "tiny-qwen3moe" (8 experts, 2 per token, rows of 256 so K-quants apply),
// "qwen3-30b-a3b" (Qwen3-30B-A3B's shape: 128 experts, 8 per token), "qwen2.5-0.5b", "qwen3-0.6b", "qwen2.5-3b", "qwen2.5-7b", "qwen3-8b",
// "llama-3.2-1b", "llama-3.1-8b", "mistral-7b" (v0.3 shape), "tiny-gemma3" (7 layers: 6 local with a window
// of 8 positions and global layer 5 with linear RoPE scaling 8, tied output), "tiny-gemma3-softcap" (the same
// with an untied output and final logit soft-capping 15), "gemma-3-1b", "gemma-3-4b" (their text configs; the
// small vocabulary unless --vocab gives Gemma 3's, e.g. tests/tokenizer/vocab/gemma3-vocab.gguf), and the
// embedding models (last-token pooling
// written to <arch>.pooling_type): "tiny-qwen3-embedding" and "qwen3-embedding-0.6b" (Qwen3-Embedding-0.6B's
// shape).
Result<SyntheticShape> synthetic_preset(const std::string& name);
std::vector<std::string> synthetic_preset_names();

struct SyntheticOptions {
  SyntheticShape shape;
  DType weight_type = DType::F32;  // 2-D weights; norms and biases stay F32
  // When set (a `minfer quantize --type` name such as "q8_0", "q4_0", "q4_K_M"), 2-D weights are drawn in
  // f32 and encoded with the quantizer and llama-quantize's per-tensor type rules; weight_type is ignored.
  std::string quant_type;
  uint64_t seed = 42;
  // Tokenizer keys (tokenizer.*) are copied from this GGUF when set; otherwise a small byte-level BPE
  // vocabulary (256 byte tokens, a few merges, ChatML specials) is generated.
  const gguf::File* vocab_source = nullptr;
};

// Builds the writer for a synthetic model (tensor data is generated when written): F32, F16 or BF16
// weights, or any `minfer quantize` type through `quant_type`.
Result<gguf::Writer> make_synthetic_model(const SyntheticOptions& options);

}  // namespace minfer::tools
