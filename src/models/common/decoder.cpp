#include "models/common/decoder.h"

#include <cmath>
#include <cstring>
#include <unordered_map>

#include <fmt/format.h>

#include "graph/builder.h"

namespace minfer::models {
namespace {

using graph::GraphBuilder;
using graph::InputKind;
using graph::NodeId;

Result<int32_t> positive(const gguf::Metadata& meta, const std::string& key) {
  MINFER_ASSIGN_OR_RETURN(uint32_t v, meta.get_u32(key));
  if (v == 0 || v > (1u << 30)) return invalid_argument("model: {} = {} is out of range", key, v);
  return static_cast<int32_t>(v);
}

// llama.cpp's build_moe_ffn with softmax gating: router logits -> the n_expert_used most probable experts
// and their (renormalised) probabilities -> each chosen expert's SwiGLU FFN -> their weighted sum.
template <typename WeightFn>
NodeId moe_ffn(GraphBuilder& b, const HParams& hp, WeightFn& W, const std::string& p, NodeId cur) {
  const int64_t nt = b.graph().node(cur).ne[1];
  const NodeId logits = b.named(b.matmul(W(p + "ffn_gate_inp.weight"), cur), p + "ffn_moe_logits");
  const NodeId ids = b.named(b.moe_route(logits, hp.n_expert_used), p + "ffn_moe_topk");
  const NodeId weights = b.named(b.moe_weights(logits, ids, hp.expert_weights_norm), p + "ffn_moe_weights");
  const NodeId x = b.reshape(cur, {hp.n_embd, 1, nt, 1});
  const NodeId up = b.named(b.matmul_id(W(p + "ffn_up_exps.weight"), x, ids), p + "ffn_moe_up");
  const NodeId gate = b.named(b.matmul_id(W(p + "ffn_gate_exps.weight"), x, ids), p + "ffn_moe_gate");
  const NodeId par = b.named(b.mul(b.silu(gate), up), p + "ffn_moe_swiglu");
  const NodeId down = b.named(b.matmul_id(W(p + "ffn_down_exps.weight"), par, ids), p + "ffn_moe_down");
  return b.named(b.moe_sum(down, weights), p + "ffn_moe_out");
}

}  // namespace

Status check_rope_freq_base(const std::string& key, float base) {
  if (!(base > 0.0f) || !std::isfinite(base)) {
    return invalid_argument("model: {} = {} is invalid (expected a finite base > 0)", key, base);
  }
  return {};
}

Result<HParams> read_hparams(const gguf::File& file, const std::string& arch) {
  const gguf::Metadata& m = file.metadata();
  HParams hp;
  hp.arch = arch;
  MINFER_ASSIGN_OR_RETURN(hp.n_embd, positive(m, arch + ".embedding_length"));
  MINFER_ASSIGN_OR_RETURN(hp.n_layer, positive(m, arch + ".block_count"));
  MINFER_ASSIGN_OR_RETURN(hp.n_head, positive(m, arch + ".attention.head_count"));
  // A mixture-of-experts file may leave the dense width out (llama.cpp reads it as optional; the experts'
  // width is expert_feed_forward_length).
  if (m.contains(arch + ".feed_forward_length") || !m.contains(arch + ".expert_count")) {
    MINFER_ASSIGN_OR_RETURN(hp.n_ff, positive(m, arch + ".feed_forward_length"));
  }
  MINFER_ASSIGN_OR_RETURN(hp.n_ctx_train, positive(m, arch + ".context_length"));
  hp.n_head_kv = hp.n_head;
  if (m.contains(arch + ".attention.head_count_kv")) {
    MINFER_ASSIGN_OR_RETURN(hp.n_head_kv, positive(m, arch + ".attention.head_count_kv"));
  }
  if (hp.n_head % hp.n_head_kv != 0) {
    return invalid_argument("model: head_count {} is not a multiple of head_count_kv {}", hp.n_head, hp.n_head_kv);
  }
  hp.head_dim = hp.n_embd / hp.n_head;
  if (m.contains(arch + ".attention.key_length")) {
    MINFER_ASSIGN_OR_RETURN(hp.head_dim, positive(m, arch + ".attention.key_length"));
    if (m.contains(arch + ".attention.value_length")) {
      MINFER_ASSIGN_OR_RETURN(int32_t v, positive(m, arch + ".attention.value_length"));
      if (v != hp.head_dim) return unsupported("model: value_length {} != key_length {}", v, hp.head_dim);
    }
  }
  hp.n_rot = hp.head_dim;
  if (m.contains(arch + ".rope.dimension_count")) {
    MINFER_ASSIGN_OR_RETURN(hp.n_rot, positive(m, arch + ".rope.dimension_count"));
  }
  if (hp.n_rot % 2 != 0 || hp.n_rot > hp.head_dim) return invalid_argument("model: rope dimension {} invalid", hp.n_rot);
  MINFER_ASSIGN_OR_RETURN(hp.rope_freq_base, m.get_f32_or(arch + ".rope.freq_base", 10000.0f));
  MINFER_RETURN_IF_ERROR(check_rope_freq_base(arch + ".rope.freq_base", hp.rope_freq_base));
  MINFER_ASSIGN_OR_RETURN(hp.rms_eps, m.get_f32(arch + ".attention.layer_norm_rms_epsilon"));
  // Real models use 1e-6 .. 1e-5; an epsilon of 1 or more would swamp the mean square it is added to.
  if (!(hp.rms_eps > 0.0f && hp.rms_eps < 1.0f)) {
    return invalid_argument(
        "model: {}.attention.layer_norm_rms_epsilon = {} is invalid (expected 0 < eps < 1)", arch,
        hp.rms_eps);
  }
  if (m.contains(arch + ".rope.scaling.type")) {
    MINFER_ASSIGN_OR_RETURN(std::string scaling, m.get_string(arch + ".rope.scaling.type"));
    if (scaling != "none" && scaling != "linear") {
      return unsupported("model: rope scaling '{}' is not supported (supported: none, linear, llama3 rope_freqs)",
                         scaling);
    }
  }
  float factor = 0.0f;  // llama.cpp: rope.scaling.factor, else the older rope.scale_linear; 0 = none
  for (const char* key : {".rope.scaling.factor", ".rope.scale_linear"}) {
    if (m.contains(arch + key)) {
      MINFER_ASSIGN_OR_RETURN(factor, m.get_f32(arch + key));
      break;
    }
  }
  if (factor < 0.0f || !std::isfinite(factor)) return invalid_argument("model: rope scaling factor {} invalid", factor);
  hp.rope_freq_scale = factor == 0.0f ? 1.0f : 1.0f / factor;
  const gguf::TensorInfo* embd = file.find_tensor("token_embd.weight");
  if (embd == nullptr) return not_found("model: missing tensor 'token_embd.weight'");
  hp.n_vocab = static_cast<int32_t>(embd->ne[1]);
  return hp;
}

Status read_rope_freqs(const gguf::File& file, HParams* hp) {
  const gguf::TensorInfo* t = file.find_tensor("rope_freqs.weight");
  if (t == nullptr) return {};
  const graph::Shape want = {hp->n_rot / 2, 1, 1, 1};
  if (t->ne != want) {
    return invalid_argument("model: tensor 'rope_freqs.weight' has shape [{}], expected [{}]", fmt::join(t->ne, ", "),
                            fmt::join(want, ", "));
  }
  if (t->type != DType::F32) {
    return unsupported("model: tensor 'rope_freqs.weight' has type {}, expected f32", dtype_name(t->type));
  }
  hp->rope_freq_factors.resize(static_cast<size_t>(hp->n_rot / 2));
  std::memcpy(hp->rope_freq_factors.data(), t->data, hp->rope_freq_factors.size() * sizeof(float));
  for (float f : hp->rope_freq_factors) {
    if (!(f > 0.0f) || !std::isfinite(f)) return invalid_argument("model: rope_freqs.weight holds {}", f);
  }
  return {};
}

Result<std::vector<backend::WeightSource>> collect_weights(const gguf::File& file, const HParams& hp,
                                                           const DecoderOptions& options, bool* tied_output) {
  std::vector<backend::WeightSource> out;
  auto need = [&](const std::string& name, graph::Shape ne, bool optional = false) -> Result<bool> {
    const gguf::TensorInfo* t = file.find_tensor(name);
    if (t == nullptr) {
      if (optional) return false;
      return not_found("model: missing tensor '{}'", name);
    }
    if (t->ne != ne) {
      return invalid_argument("model: tensor '{}' has shape [{}], expected [{}]", name, fmt::join(t->ne, ", "),
                              fmt::join(ne, ", "));
    }
    out.push_back({name, t->type, t->ne, t->data, t->n_bytes});
    return true;
  };
  const int64_t E = hp.n_embd, V = hp.n_vocab, F = hp.n_ff, D = hp.head_dim, Q = hp.n_embd_q(), KV = hp.n_embd_kv();
  MINFER_RETURN_IF_ERROR(need("token_embd.weight", {E, V, 1, 1}).status());
  MINFER_RETURN_IF_ERROR(need("output_norm.weight", {E, 1, 1, 1}).status());
  MINFER_ASSIGN_OR_RETURN(bool has_output, need("output.weight", {E, V, 1, 1}, /*optional=*/true));
  *tied_output = !has_output;
  if (!hp.rope_freq_factors.empty()) {
    MINFER_RETURN_IF_ERROR(need("rope_freqs.weight", {hp.n_rot / 2, 1, 1, 1}).status());
  }
  for (int32_t l = 0; l < hp.n_layer; ++l) {
    const std::string p = fmt::format("blk.{}.", l);
    MINFER_RETURN_IF_ERROR(need(p + "attn_norm.weight", {E, 1, 1, 1}).status());
    MINFER_RETURN_IF_ERROR(need(p + "attn_q.weight", {E, Q, 1, 1}).status());
    MINFER_RETURN_IF_ERROR(need(p + "attn_k.weight", {E, KV, 1, 1}).status());
    MINFER_RETURN_IF_ERROR(need(p + "attn_v.weight", {E, KV, 1, 1}).status());
    MINFER_RETURN_IF_ERROR(need(p + "attn_output.weight", {Q, E, 1, 1}).status());
    if (options.qkv_bias) {
      MINFER_RETURN_IF_ERROR(need(p + "attn_q.bias", {Q, 1, 1, 1}).status());
      MINFER_RETURN_IF_ERROR(need(p + "attn_k.bias", {KV, 1, 1, 1}).status());
      MINFER_RETURN_IF_ERROR(need(p + "attn_v.bias", {KV, 1, 1, 1}).status());
    }
    if (options.qk_norm) {
      MINFER_RETURN_IF_ERROR(need(p + "attn_q_norm.weight", {D, 1, 1, 1}).status());
      MINFER_RETURN_IF_ERROR(need(p + "attn_k_norm.weight", {D, 1, 1, 1}).status());
    }
    MINFER_RETURN_IF_ERROR(need(p + "ffn_norm.weight", {E, 1, 1, 1}).status());
    if (hp.n_expert > 0) {
      const int64_t X = hp.n_expert, FX = hp.n_ff_exp;
      MINFER_RETURN_IF_ERROR(need(p + "ffn_gate_inp.weight", {E, X, 1, 1}).status());
      MINFER_RETURN_IF_ERROR(need(p + "ffn_gate_exps.weight", {E, FX, X, 1}).status());
      MINFER_RETURN_IF_ERROR(need(p + "ffn_up_exps.weight", {E, FX, X, 1}).status());
      MINFER_RETURN_IF_ERROR(need(p + "ffn_down_exps.weight", {FX, E, X, 1}).status());
      continue;
    }
    MINFER_RETURN_IF_ERROR(need(p + "ffn_gate.weight", {E, F, 1, 1}).status());
    MINFER_RETURN_IF_ERROR(need(p + "ffn_up.weight", {E, F, 1, 1}).status());
    MINFER_RETURN_IF_ERROR(need(p + "ffn_down.weight", {F, E, 1, 1}).status());
  }
  return out;
}

Result<graph::Graph> Model::build_kv_shift_graph(const graph::GraphParams& params) const {
  const HParams& hp = hparams_;
  if (!params.kv_shift || params.n_tokens <= 0 || params.n_outputs != 0) {
    return invalid_argument("K shift: a graph over {} cells with {} outputs", params.n_tokens, params.n_outputs);
  }
  GraphBuilder b;
  const int64_t n = params.n_tokens;
  const NodeId deltas = b.input(InputKind::kPositions, n);
  NodeId freq_factors = graph::kNoNode;
  if (!hp.rope_freq_factors.empty()) {
    for (const backend::WeightSource& w : weights_) {
      if (w.name == "rope_freqs.weight") freq_factors = b.weight(w.name, w.type, w.ne);
    }
    if (freq_factors == graph::kNoNode) return invalid_argument("K shift: the model has no rope_freqs.weight");
  }
  const graph::RopeMode mode = hp.rope_normal ? graph::RopeMode::kNormal : graph::RopeMode::kNeox;
  for (int32_t l = 0; l < hp.n_layer; ++l) {
    b.set_layer(l);
    const std::string p = fmt::format("blk.{}.", l);
    const bool local = !hp.swa_layers.empty() && hp.swa_layers[static_cast<size_t>(l)];
    NodeId k = b.named(b.kv_rows(l, hp.n_embd_kv(), n), p + "k_cells");
    k = b.reshape(k, {hp.head_dim, hp.n_head_kv, n, 1});
    k = b.named(b.rope(k, deltas, hp.n_rot, local ? hp.rope_freq_base_swa : hp.rope_freq_base, mode,
                       local ? hp.rope_freq_scale_swa : hp.rope_freq_scale, local ? graph::kNoNode : freq_factors),
                p + "k_shifted");
    b.named(b.kv_store(l, b.reshape(k, {hp.n_embd_kv(), n, 1, 1}), graph::kNoNode), p + "k_store");
  }
  return b.take();
}

DecoderGraph::DecoderGraph(const std::vector<backend::WeightSource>& weights, const graph::GraphParams& params)
    : embeddings_(params.embeddings), select_rows_(params.n_outputs != params.n_tokens) {
  for (const auto& w : weights) by_name_[w.name] = &w;
  tokens = b.input(InputKind::kTokens, params.n_tokens);
  positions = b.input(InputKind::kPositions, params.n_tokens);
  if (select_rows_) out_rows_ = b.input(InputKind::kOutputRows, params.n_outputs);
}

NodeId DecoderGraph::W(const std::string& name) {
  const backend::WeightSource* w = by_name_.at(name);
  return b.weight(name, w->type, w->ne);
}

void DecoderGraph::keep_output_rows(NodeId* cur, NodeId* residual) {
  if (!select_rows_) return;
  *cur = b.get_rows(*cur, out_rows_);
  *residual = b.get_rows(*residual, out_rows_);
}

graph::Graph DecoderGraph::finish(NodeId inp, float rms_eps, bool tied_output, float softcap) {
  b.set_layer(-1);
  NodeId cur = b.named(b.rms_norm(inp, W("output_norm.weight"), rms_eps), "result_norm");
  if (!embeddings_) {  // embeddings: the final-norm hidden states are the output; no vocab matmul
    cur = b.named(b.matmul(W(tied_output ? "token_embd.weight" : "output.weight"), cur), "result_output");
    if (softcap > 0.0f) cur = b.named(b.softcap(cur, softcap), "result_softcap");
  }
  b.output(cur);
  return b.take();
}

graph::Graph build_decoder_graph(const HParams& hp, const DecoderOptions& options, bool tied_output,
                                 const std::vector<backend::WeightSource>& weights, const graph::GraphParams& params) {
  DecoderGraph g(weights, params);
  GraphBuilder& b = g.b;
  auto W = [&g](const std::string& name) { return g.W(name); };
  const int64_t nt = params.n_tokens;
  const int32_t hd = hp.head_dim;
  const NodeId positions = g.positions;

  const graph::RopeMode rope_mode = hp.rope_normal ? graph::RopeMode::kNormal : graph::RopeMode::kNeox;
  const NodeId freq_factors = hp.rope_freq_factors.empty() ? graph::kNoNode : W("rope_freqs.weight");
  NodeId inp = b.named(b.get_rows(W("token_embd.weight"), g.tokens), "inp_embd");
  for (int32_t l = 0; l < hp.n_layer; ++l) {
    b.set_layer(l);
    const std::string p = fmt::format("blk.{}.", l);
    NodeId cur = b.named(b.rms_norm(inp, W(p + "attn_norm.weight"), hp.rms_eps), p + "attn_norm");
    NodeId q = b.named(b.matmul(W(p + "attn_q.weight"), cur), p + "q");
    NodeId k = b.named(b.matmul(W(p + "attn_k.weight"), cur), p + "k");
    NodeId v = b.named(b.matmul(W(p + "attn_v.weight"), cur), p + "v");
    if (options.qkv_bias) {
      q = b.add(q, W(p + "attn_q.bias"));
      k = b.add(k, W(p + "attn_k.bias"));
      v = b.add(v, W(p + "attn_v.bias"));
    }
    q = b.reshape(q, {hd, hp.n_head, nt, 1});
    k = b.reshape(k, {hd, hp.n_head_kv, nt, 1});
    if (options.qk_norm) {
      q = b.named(b.rms_norm(q, W(p + "attn_q_norm.weight"), hp.rms_eps), p + "q_norm");
      k = b.named(b.rms_norm(k, W(p + "attn_k_norm.weight"), hp.rms_eps), p + "k_norm");
    }
    q = b.named(b.rope(q, positions, hp.n_rot, hp.rope_freq_base, rope_mode, hp.rope_freq_scale, freq_factors),
                p + "q_rope");
    k = b.named(b.rope(k, positions, hp.n_rot, hp.rope_freq_base, rope_mode, hp.rope_freq_scale, freq_factors),
                p + "k_rope");
    const NodeId store = b.named(b.kv_store(l, k, v), p + "kv_store");
    cur = b.named(b.attention(l, q, store, hp.n_head, hp.n_head_kv, hd), p + "attn");
    if (l == hp.n_layer - 1) g.keep_output_rows(&cur, &inp);
    cur = b.named(b.matmul(W(p + "attn_output.weight"), cur), p + "attn_out");
    const NodeId ffn_inp = b.named(b.add(cur, inp), p + "ffn_inp");
    cur = b.named(b.rms_norm(ffn_inp, W(p + "ffn_norm.weight"), hp.rms_eps), p + "ffn_norm");
    if (hp.n_expert > 0) {
      inp = b.named(b.add(moe_ffn(b, hp, W, p, cur), ffn_inp), p + "l_out");
      continue;
    }
    const NodeId gate = b.named(b.matmul(W(p + "ffn_gate.weight"), cur), p + "ffn_gate");
    const NodeId up = b.named(b.matmul(W(p + "ffn_up.weight"), cur), p + "ffn_up");
    cur = b.named(b.mul(b.silu(gate), up), p + "ffn_swiglu");
    cur = b.named(b.matmul(W(p + "ffn_down.weight"), cur), p + "ffn_down");
    inp = b.named(b.add(cur, ffn_inp), p + "l_out");
  }
  return g.finish(inp, hp.rms_eps, tied_output);
}

}  // namespace minfer::models
