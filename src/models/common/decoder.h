// The Qwen-family decoder block shared by qwen2 and qwen3: RMSNorm, GQA attention with NEOX RoPE,
// SwiGLU FFN, residuals; options select q/k/v biases (qwen2) or per-head Q/K RMSNorm (qwen3).
// Also the GGUF plumbing both loaders share: hyperparameter keys and checked tensor lookup.
#pragma once

#include <string>

#include "gguf/reader.h"
#include "models/model.h"

namespace minfer::models {

struct DecoderOptions {
  bool qkv_bias = false;  // attn_{q,k,v}.bias
  bool qk_norm = false;   // attn_{q,k}_norm.weight, RMSNorm per head before RoPE
};

// Reads `<arch>.*` hyperparameters; a missing required key is an error naming it.
Result<HParams> read_hparams(const gguf::File& file, const std::string& arch);

// Collects the tensors a decoder with these options needs, checking each exists with its expected shape.
// output.weight is optional (tied to token_embd when absent).
Result<std::vector<backend::WeightSource>> collect_weights(const gguf::File& file, const HParams& hp,
                                                           const DecoderOptions& options, bool* tied_output);

// Builds the forward graph: tokens -> logits of the last n_outputs rows (with params.embeddings: their
// final-norm hidden states, n_embd each).
graph::Graph build_decoder_graph(const HParams& hp, const DecoderOptions& options, bool tied_output,
                                 const std::vector<backend::WeightSource>& weights, const graph::GraphParams& params);

}  // namespace minfer::models
