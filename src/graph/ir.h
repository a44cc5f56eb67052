// The compute graph IR: a pure description of a forward pass. Nodes carry their op with full parameters,
// sources, output shape and type, the backend they were assigned (none until assignment) and metadata.
// Building a graph performs no computation. Shapes follow ggml: ne[0] is the fastest dimension, so an
// activation of n_tokens rows of d floats is {d, n_tokens}; a GGUF weight [out][in] is {in, out}.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"

namespace minfer::graph {

using NodeId = int32_t;
inline constexpr NodeId kNoNode = -1;
using Shape = std::array<int64_t, 4>;

enum class OpKind : uint8_t {
  kInput,      // host data bound at execution (tokens, positions, output rows)
  kWeight,     // a model tensor (mmap view or prepared weight), looked up by name
  kGetRows,    // rows of src0 ({d, n_rows}) selected by I32 ids in src1 ({n}) -> {d, n}
  kRmsNorm,    // x * w / sqrt(mean(x^2) + eps) over ne[0]; src1 = weight {ne[0]}
  kMatMul,     // src0 weight {k, n}, src1 activations {k, m} -> {n, m}
  kAdd,        // src0 + src1; src1 broadcast over rows when it has one row
  kMul,        // elementwise, broadcast as Add
  kSilu,       // x * sigmoid(x)
  kSwiGlu,     // silu(src0) * src1 (fused from Mul(Silu(a), b))
  kGelu,       // tanh-approximated GELU as ggml's CPU computes it: the input rounded to f16, the result
               // rounded to f16 (its lookup table); x itself for x >= 10, 0 for x <= -10 (gemma3's GeGLU)
  kScale,      // src0 * params.scale (gemma3's embedding scale sqrt(n_embd))
  kSoftcap,    // tanh(src0 * (1 / params.scale)) * params.scale: final logit soft-capping, as ggml's
               // scale -> tanh -> scale
  kReshape,    // a view with another shape, same bytes
  kRope,       // rotary embedding (params.rope_mode: NEOX pairs (i, i + n_rot/2) or normal pairs (2i, 2i + 1));
               // src1 = positions, optional src2 = per-pair frequency divisors {n_rot/2} (llama3 rope_freqs)
  kKvStore,    // writes K (src0) and, when present, V (src1) of the batch into the layer's KV cells; no
               // output data
  kKvRows,     // the layer's K rows of the cells the batch stores to, as F32 {row_elems, n}: what a K-shift
               // graph reads, re-rotates and stores back (no sources: the cells are the KV layer's)
  kAttention,  // causal GQA attention of Q (src0) over the layer's KV cells; src1 = the KvStore it follows
  // Mixture of experts (llama.cpp's build_moe_ffn with softmax gating):
  kMoeRoute,    // router logits src0 {n_expert, n} -> I32 {n_expert_used, n}: the experts of the largest softmax
                // probabilities, largest first (ties: lower expert id first)
  kMoeWeights,  // logits src0, chosen ids src1 -> F32 {n_expert_used, n}: their softmax probabilities, divided
                // by their sum when params.moe_norm_w (the sum clamped below at 2^-14, as llama.cpp)
  kMatMulId,    // matmul by expert (mul_mat_id): src0 weight {k, n_out, n_expert}, src1 activations {k, b, n}
                // (b = 1: one row per token shared by its experts; b = n_expert_used: a row per slot), src2
                // ids I32 {n_expert_used, n} -> {n_out, n_expert_used, n}; slot j uses expert ids[j]'s matrix
  kMoeSum,      // src0 experts {d, n_expert_used, n}, src1 weights {n_expert_used, n} -> {d, n}:
                // (e0 * w0 + e1 * w1) + e2 * w2 ... in slot order
};

std::string_view op_name(OpKind op);

enum class InputKind : uint8_t { kTokens, kPositions, kOutputRows };

// How rope pairs the rotated dimensions, as llama.cpp's rope types: kNeox (Qwen, LLAMA_ROPE_TYPE_NEOX) rotates
// i with i + n_rot/2, kNormal (llama, LLAMA_ROPE_TYPE_NORM) rotates 2i with 2i + 1.
enum class RopeMode : uint8_t { kNeox, kNormal };

// Parameters of every op (one struct keeps nodes trivially comparable; unused fields stay zero).
struct OpParams {
  InputKind input = InputKind::kTokens;
  float eps = 0.0f;             // RmsNorm
  float rope_freq_base = 0.0f;  // Rope
  int32_t n_rot = 0;            // Rope: rotated dimensions per head
  RopeMode rope_mode = RopeMode::kNeox;  // Rope
  float rope_freq_scale = 1.0f; // Rope: theta multiplier (1 / rope.scaling.factor for linear scaling)
  int32_t layer = -1;           // KvStore / KvRows / Attention
  int32_t n_head = 0;           // Attention
  int32_t n_head_kv = 0;        // Attention
  int32_t head_dim = 0;         // Attention
  float scale = 0.0f;           // Attention: the score scale (1/sqrt(head_dim) unless the model says); Scale
  int32_t n_swa = 0;            // Attention: sliding window, token at pos p sees cells with pos > p - n_swa
                                // (llama.cpp's LLAMA_SWA_TYPE_STANDARD); 0: the whole causal window
  int32_t n_expert_used = 0;    // MoeRoute: experts chosen per token
  bool moe_norm_w = false;      // MoeWeights: divide the chosen probabilities by their sum

  bool operator==(const OpParams&) const = default;
};

struct Node {
  OpKind op = OpKind::kInput;
  OpParams params;
  std::vector<NodeId> src;
  Shape ne = {1, 1, 1, 1};
  DType type = DType::F32;
  std::string name;     // weight name for kWeight; a readable label otherwise ("blk.3.attn_q")
  int32_t layer = -1;   // transformer block the node belongs to (-1: outside the blocks)
  int32_t backend = -1; // index into the backend registry; -1 until assignment
  std::string fused_from;  // set by the fusion pass: the pattern this node replaced

  int64_t n_elements() const { return ne[0] * ne[1] * ne[2] * ne[3]; }
  bool operator==(const Node&) const = default;
};

// Nodes in build order, which is a valid topological order (sources are appended before consumers).
struct Graph {
  std::vector<Node> nodes;
  std::vector<NodeId> outputs;

  const Node& node(NodeId id) const { return nodes[static_cast<size_t>(id)]; }
  Node& node(NodeId id) { return nodes[static_cast<size_t>(id)]; }
  size_t size() const { return nodes.size(); }
  bool operator==(const Graph&) const = default;
};

}  // namespace minfer::graph
