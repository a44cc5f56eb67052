#include "graph/builder.h"

#include <cmath>

#include "core/check.h"

namespace minfer::graph {
namespace {

int64_t rows(const Shape& ne) { return ne[1] * ne[2] * ne[3]; }

}  // namespace

NodeId GraphBuilder::append(Node node) {
  for (NodeId s : node.src) MINFER_CHECK(s >= 0 && static_cast<size_t>(s) < graph_.size(), "bad source {}", s);
  node.layer = layer_;
  graph_.nodes.push_back(std::move(node));
  return static_cast<NodeId>(graph_.size() - 1);
}

NodeId GraphBuilder::named(NodeId id, std::string name) {
  graph_.node(id).name = std::move(name);
  return id;
}

NodeId GraphBuilder::input(InputKind kind, int64_t n) {
  Node node;
  node.op = OpKind::kInput;
  node.params.input = kind;
  node.type = DType::I32;
  node.ne = {n, 1, 1, 1};
  node.name = kind == InputKind::kTokens ? "tokens" : kind == InputKind::kPositions ? "positions" : "output_rows";
  return append(std::move(node));
}

NodeId GraphBuilder::weight(const std::string& name, DType type, Shape ne) {
  Node node;
  node.op = OpKind::kWeight;
  node.type = type;
  node.ne = ne;
  node.name = name;
  return append(std::move(node));
}

NodeId GraphBuilder::get_rows(NodeId table, NodeId ids) {
  MINFER_CHECK(at(ids).type == DType::I32, "get_rows ids must be I32");
  Node node;
  node.op = OpKind::kGetRows;
  node.src = {table, ids};
  node.ne = {at(table).ne[0], at(ids).ne[0], 1, 1};
  return append(std::move(node));
}

NodeId GraphBuilder::rms_norm(NodeId x, NodeId w, float eps) {
  MINFER_CHECK(at(w).ne[0] == at(x).ne[0] && at(w).n_elements() == at(w).ne[0], "rms_norm weight shape mismatch");
  Node node;
  node.op = OpKind::kRmsNorm;
  node.src = {x, w};
  node.params.eps = eps;
  node.ne = at(x).ne;
  return append(std::move(node));
}

NodeId GraphBuilder::matmul(NodeId w, NodeId x) {
  MINFER_CHECK(at(w).ne[0] == at(x).ne[0], "matmul: weight k {} != activation k {}", at(w).ne[0], at(x).ne[0]);
  MINFER_CHECK(rows(at(w).ne) == at(w).ne[1], "matmul weight must be 2-D");
  Node node;
  node.op = OpKind::kMatMul;
  node.src = {w, x};
  node.ne = {at(w).ne[1], rows(at(x).ne), 1, 1};
  return append(std::move(node));
}

NodeId GraphBuilder::elementwise(OpKind op, NodeId a, NodeId b) {
  MINFER_CHECK(at(a).ne[0] == at(b).ne[0] && (rows(at(b).ne) == 1 || rows(at(b).ne) == rows(at(a).ne)),
               "{}: shapes do not broadcast", op_name(op));
  Node node;
  node.op = op;
  node.src = {a, b};
  node.ne = at(a).ne;
  return append(std::move(node));
}

NodeId GraphBuilder::add(NodeId a, NodeId b) { return elementwise(OpKind::kAdd, a, b); }
NodeId GraphBuilder::mul(NodeId a, NodeId b) { return elementwise(OpKind::kMul, a, b); }

NodeId GraphBuilder::silu(NodeId x) {
  Node node;
  node.op = OpKind::kSilu;
  node.src = {x};
  node.ne = at(x).ne;
  return append(std::move(node));
}

NodeId GraphBuilder::gelu(NodeId x) {
  Node node;
  node.op = OpKind::kGelu;
  node.src = {x};
  node.ne = at(x).ne;
  return append(std::move(node));
}

NodeId GraphBuilder::scale(NodeId x, float s) {
  Node node;
  node.op = OpKind::kScale;
  node.src = {x};
  node.params.scale = s;
  node.ne = at(x).ne;
  return append(std::move(node));
}

NodeId GraphBuilder::softcap(NodeId x, float cap) {
  MINFER_CHECK(cap > 0.0f, "softcap: cap {} must be positive", cap);
  Node node;
  node.op = OpKind::kSoftcap;
  node.src = {x};
  node.params.scale = cap;
  node.ne = at(x).ne;
  return append(std::move(node));
}

NodeId GraphBuilder::reshape(NodeId x, Shape ne) {
  MINFER_CHECK(ne[0] * ne[1] * ne[2] * ne[3] == at(x).n_elements(), "reshape changes the element count");
  Node node;
  node.op = OpKind::kReshape;
  node.src = {x};
  node.ne = ne;
  node.type = at(x).type;
  return append(std::move(node));
}

NodeId GraphBuilder::rope(NodeId x, NodeId positions, int32_t n_rot, float freq_base) {
  return rope(x, positions, n_rot, freq_base, RopeMode::kNeox, 1.0f, kNoNode);
}

NodeId GraphBuilder::rope(NodeId x, NodeId positions, int32_t n_rot, float freq_base, RopeMode mode, float freq_scale,
                          NodeId freq_factors) {
  MINFER_CHECK(n_rot > 0 && n_rot % 2 == 0 && n_rot <= at(x).ne[0], "rope: bad n_rot {}", n_rot);
  MINFER_CHECK(at(positions).ne[0] == at(x).ne[2], "rope: {} positions for {} tokens", at(positions).ne[0], at(x).ne[2]);
  MINFER_CHECK(freq_scale > 0.0f, "rope: freq_scale {} must be positive", freq_scale);
  Node node;
  node.op = OpKind::kRope;
  node.src = {x, positions};
  if (freq_factors != kNoNode) {
    MINFER_CHECK(at(freq_factors).type == DType::F32 && at(freq_factors).n_elements() == n_rot / 2,
                 "rope: frequency factors must be {} f32 values", n_rot / 2);
    node.src.push_back(freq_factors);
  }
  node.params.n_rot = n_rot;
  node.params.rope_freq_base = freq_base;
  node.params.rope_mode = mode;
  node.params.rope_freq_scale = freq_scale;
  node.ne = at(x).ne;
  return append(std::move(node));
}

NodeId GraphBuilder::kv_store(int32_t layer, NodeId k, NodeId v) {
  MINFER_CHECK(v == kNoNode || at(k).n_elements() == at(v).n_elements(), "kv_store: K and V sizes differ");
  Node node;
  node.op = OpKind::kKvStore;
  node.src = {k};
  if (v != kNoNode) node.src.push_back(v);
  node.params.layer = layer;
  node.ne = {0, 1, 1, 1};  // no output data: the write goes to the persistent KV cells
  return append(std::move(node));
}

NodeId GraphBuilder::kv_rows(int32_t layer, int64_t row_elems, int64_t n) {
  MINFER_CHECK(row_elems > 0 && n > 0, "kv_rows: {} rows of {}", n, row_elems);
  Node node;
  node.op = OpKind::kKvRows;
  node.params.layer = layer;
  node.ne = {row_elems, n, 1, 1};
  return append(std::move(node));
}

NodeId GraphBuilder::attention(int32_t layer, NodeId q, NodeId store, int32_t n_head, int32_t n_head_kv,
                               int32_t head_dim) {
  return attention(layer, q, store, n_head, n_head_kv, head_dim, 1.0f / std::sqrt(static_cast<float>(head_dim)), 0);
}

NodeId GraphBuilder::attention(int32_t layer, NodeId q, NodeId store, int32_t n_head, int32_t n_head_kv,
                               int32_t head_dim, float kq_scale, int32_t n_swa) {
  MINFER_CHECK(n_swa >= 0, "attention: sliding window {} < 0", n_swa);
  MINFER_CHECK(at(store).op == OpKind::kKvStore && at(store).params.layer == layer, "attention must follow its kv_store");
  MINFER_CHECK(n_head % n_head_kv == 0, "n_head {} not a multiple of n_head_kv {}", n_head, n_head_kv);
  MINFER_CHECK(at(q).ne[0] == head_dim && at(q).ne[1] == n_head, "attention: q must be {{head_dim, n_head, n_tokens}}");
  Node node;
  node.op = OpKind::kAttention;
  node.src = {q, store};
  node.params.layer = layer;
  node.params.n_head = n_head;
  node.params.n_head_kv = n_head_kv;
  node.params.head_dim = head_dim;
  node.params.scale = kq_scale;
  node.params.n_swa = n_swa;
  node.ne = {static_cast<int64_t>(head_dim) * n_head, at(q).ne[2], 1, 1};
  return append(std::move(node));
}

NodeId GraphBuilder::moe_route(NodeId logits, int32_t n_expert_used) {
  const Node& l = at(logits);
  MINFER_CHECK(l.type == DType::F32 && rows(l.ne) == l.ne[1], "moe_route: logits must be f32 {{n_expert, n}}");
  MINFER_CHECK(n_expert_used > 0 && n_expert_used <= l.ne[0], "moe_route: {} of {} experts", n_expert_used, l.ne[0]);
  Node node;
  node.op = OpKind::kMoeRoute;
  node.src = {logits};
  node.params.n_expert_used = n_expert_used;
  node.type = DType::I32;
  node.ne = {n_expert_used, l.ne[1], 1, 1};
  return append(std::move(node));
}

NodeId GraphBuilder::moe_weights(NodeId logits, NodeId ids, bool norm_w) {
  const Node& l = at(logits);
  const Node& i = at(ids);
  MINFER_CHECK(i.type == DType::I32 && i.ne[1] == l.ne[1] && rows(i.ne) == i.ne[1],
               "moe_weights: ids must be I32 {{n_expert_used, n}} for {} tokens", l.ne[1]);
  Node node;
  node.op = OpKind::kMoeWeights;
  node.src = {logits, ids};
  node.params.n_expert_used = static_cast<int32_t>(i.ne[0]);
  node.params.moe_norm_w = norm_w;
  node.ne = {i.ne[0], i.ne[1], 1, 1};
  return append(std::move(node));
}

NodeId GraphBuilder::matmul_id(NodeId w, NodeId x, NodeId ids) {
  const Node& wn = at(w);
  const Node& xn = at(x);
  const Node& in = at(ids);
  MINFER_CHECK(wn.ne[3] == 1, "matmul_id: weight must be 3-D {{k, n_out, n_expert}}");
  MINFER_CHECK(wn.ne[0] == xn.ne[0], "matmul_id: weight k {} != activation k {}", wn.ne[0], xn.ne[0]);
  MINFER_CHECK(in.type == DType::I32 && rows(in.ne) == in.ne[1], "matmul_id: ids must be I32 {{n_expert_used, n}}");
  MINFER_CHECK(xn.ne[3] == 1 && xn.ne[2] == in.ne[1] && (xn.ne[1] == 1 || xn.ne[1] == in.ne[0]),
               "matmul_id: activations must be {{k, 1 or n_expert_used, n}}");
  Node node;
  node.op = OpKind::kMatMulId;
  node.src = {w, x, ids};
  node.ne = {wn.ne[1], in.ne[0], in.ne[1], 1};
  return append(std::move(node));
}

NodeId GraphBuilder::moe_sum(NodeId experts, NodeId weights) {
  const Node& e = at(experts);
  const Node& w = at(weights);
  MINFER_CHECK(e.ne[3] == 1 && w.type == DType::F32 && w.ne[0] == e.ne[1] && w.ne[1] == e.ne[2] &&
                   rows(w.ne) == w.ne[1],
               "moe_sum: weights must be {{n_expert_used, n}} for experts {{d, n_expert_used, n}}");
  Node node;
  node.op = OpKind::kMoeSum;
  node.src = {experts, weights};
  node.ne = {e.ne[0], e.ne[2], 1, 1};
  return append(std::move(node));
}

}  // namespace minfer::graph
