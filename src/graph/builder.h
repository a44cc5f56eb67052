// GraphBuilder: the methods model files use to describe a forward pass (mirrors llama.cpp's
// llm_graph_context). Every method appends one node after its sources and returns its id; shapes are
// checked here, so a model that builds is a model whose graph is well-formed.
//
//   GraphBuilder b;
//   NodeId tok = b.input(InputKind::kTokens, n_tokens);
//   NodeId x = b.get_rows(b.weight("token_embd.weight", DType::Q8_0, {n_embd, n_vocab}), tok);
#pragma once

#include <string>

#include "graph/ir.h"

namespace minfer::graph {

class GraphBuilder {
 public:
  NodeId input(InputKind kind, int64_t n);
  NodeId weight(const std::string& name, DType type, Shape ne);
  NodeId get_rows(NodeId table, NodeId ids);
  NodeId rms_norm(NodeId x, NodeId w, float eps);
  NodeId matmul(NodeId w, NodeId x);
  NodeId add(NodeId a, NodeId b);
  NodeId mul(NodeId a, NodeId b);
  NodeId silu(NodeId x);
  NodeId gelu(NodeId x);             // ggml's tanh-approximated GELU (ir.h kGelu)
  NodeId scale(NodeId x, float s);   // x * s
  NodeId softcap(NodeId x, float cap);  // cap * tanh(x / cap) (ir.h kSoftcap)
  NodeId reshape(NodeId x, Shape ne);
  NodeId rope(NodeId x, NodeId positions, int32_t n_rot, float freq_base);  // NEOX, no scaling
  // freq_factors: kNoNode or an F32 {n_rot/2} node dividing each pair's angle (llama3 rope_freqs.weight).
  NodeId rope(NodeId x, NodeId positions, int32_t n_rot, float freq_base, RopeMode mode, float freq_scale,
              NodeId freq_factors);
  // v: kNoNode stores K only (a K-shift graph writes back re-rotated keys).
  NodeId kv_store(int32_t layer, NodeId k, NodeId v);
  // The layer's K rows of the batch's store cells as F32 {row_elems, n}.
  NodeId kv_rows(int32_t layer, int64_t row_elems, int64_t n);
  NodeId attention(int32_t layer, NodeId q, NodeId store, int32_t n_head, int32_t n_head_kv, int32_t head_dim);
  // With an explicit score scale and a sliding window of n_swa positions (0: none), as gemma3's local layers.
  NodeId attention(int32_t layer, NodeId q, NodeId store, int32_t n_head, int32_t n_head_kv, int32_t head_dim,
                   float kq_scale, int32_t n_swa);
  // Mixture of experts (see ir.h): router logits {n_expert, n} -> chosen ids / their weights; the expert
  // matmul over 3-D weights {k, n_out, n_expert}; the weighted sum over the chosen experts' outputs.
  NodeId moe_route(NodeId logits, int32_t n_expert_used);
  NodeId moe_weights(NodeId logits, NodeId ids, bool norm_w);
  NodeId matmul_id(NodeId w, NodeId x, NodeId ids);
  NodeId moe_sum(NodeId experts, NodeId weights);
  void output(NodeId id) { graph_.outputs.push_back(id); }

  // Labels the most recently added node and the transformer layer it belongs to.
  NodeId named(NodeId id, std::string name);
  void set_layer(int32_t layer) { layer_ = layer; }

  const Graph& graph() const { return graph_; }
  Graph take() { return std::move(graph_); }

 private:
  NodeId append(Node node);
  // a (op) b with b broadcast over rows when it has one row.
  NodeId elementwise(OpKind op, NodeId a, NodeId b);
  const Node& at(NodeId id) const { return graph_.node(id); }

  Graph graph_;
  int32_t layer_ = -1;
};

}  // namespace minfer::graph
