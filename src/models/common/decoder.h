// The pre-norm decoder block shared by qwen2, qwen3, qwen3moe and llama: RMSNorm, GQA attention with RoPE,
// SwiGLU FFN (or a mixture of SwiGLU experts), residuals; options select q/k/v biases (qwen2), per-head Q/K
// RMSNorm (qwen3) and the rope pairing (NEOX for Qwen, normal for llama, with llama3 frequency factors when
// the file has rope_freqs.weight); hparams.n_expert > 0 selects the mixture-of-experts FFN (qwen3moe).
// Also the GGUF plumbing the loaders share: hyperparameter keys and checked tensor lookup.
#pragma once

#include <string>
#include <unordered_map>

#include "gguf/reader.h"
#include "graph/builder.h"
#include "models/model.h"

namespace minfer::models {

struct DecoderOptions {
  bool qkv_bias = false;  // attn_{q,k,v}.bias
  bool qk_norm = false;   // attn_{q,k}_norm.weight, RMSNorm per head before RoPE
};

// Reads `<arch>.*` hyperparameters; a missing required key is an error naming it. RoPE scaling as llama.cpp
// reads it: rope.scaling.type none or linear (rope.scaling.factor, or the older rope.scale_linear, divides
// the angles whenever present); any other type is refused by name. A rope.freq_base that is not finite
// and > 0, or an RMS epsilon outside (0, 1) (NaN included), is refused naming the GGUF key.
Result<HParams> read_hparams(const gguf::File& file, const std::string& arch);

// OK when a RoPE base read from `key` is finite and > 0; kInvalidArgument naming the key otherwise.
Status check_rope_freq_base(const std::string& key, float base);

// llama3-type RoPE scaling: copies rope_freqs.weight (F32, n_rot/2 values, each > 0) into
// hp->rope_freq_factors when the file has it; collect_weights then registers it and the graph divides each
// pair's angle by its factor.
Status read_rope_freqs(const gguf::File& file, HParams* hp);

// Collects the tensors a decoder with these options needs, checking each exists with its expected shape.
// output.weight is optional (tied to token_embd when absent). With hp.n_expert > 0 the FFN tensors are the
// router ffn_gate_inp {n_embd, n_expert} and the stacked experts ffn_{gate,up}_exps {n_embd, n_ff_exp,
// n_expert} and ffn_down_exps {n_ff_exp, n_embd, n_expert}.
Result<std::vector<backend::WeightSource>> collect_weights(const gguf::File& file, const HParams& hp,
                                                           const DecoderOptions& options, bool* tied_output);

// What every decoder graph starts and ends with, for build_decoder_graph and the families whose blocks differ
// (gemma3): weights by name, the token and position inputs, the rows kept after the last attention, and the
// head (final RMSNorm, then the vocabulary matmul unless embeddings are asked for).
class DecoderGraph {
 public:
  DecoderGraph(const std::vector<backend::WeightSource>& weights, const graph::GraphParams& params);

  graph::GraphBuilder b;
  graph::NodeId tokens = graph::kNoNode;
  graph::NodeId positions = graph::kNoNode;

  // The weight node of a tensor the loader collected.
  graph::NodeId W(const std::string& name);
  // Call once, on the last block, after its attention: only the output rows of *cur and *residual matter
  // from there on (all rows when every token's logits are wanted).
  void keep_output_rows(graph::NodeId* cur, graph::NodeId* residual);
  // result_norm, then result_output (from token_embd when the output is tied) soft-capped to
  // softcap * tanh(x / softcap) when softcap > 0; with params.embeddings the normed rows are the output.
  graph::Graph finish(graph::NodeId inp, float rms_eps, bool tied_output, float softcap = 0.0f);

 private:
  std::unordered_map<std::string, const backend::WeightSource*> by_name_;
  bool embeddings_ = false;
  bool select_rows_ = false;
  graph::NodeId out_rows_ = graph::kNoNode;
};

// Builds the forward graph: tokens -> logits of the last n_outputs rows (with params.embeddings: their
// final-norm hidden states, n_embd each).
graph::Graph build_decoder_graph(const HParams& hp, const DecoderOptions& options, bool tied_output,
                                 const std::vector<backend::WeightSource>& weights, const graph::GraphParams& params);

}  // namespace minfer::models
