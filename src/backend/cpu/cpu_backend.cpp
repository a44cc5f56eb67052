#include "backend/cpu/cpu_backend.h"

#include <cstdlib>
#include <cstring>

#include "core/mapped_file.h"
#include "quant/quant.h"

namespace minfer::backend {
namespace {

using graph::Graph;
using graph::Node;
using graph::NodeId;
using graph::OpKind;

class HostBuffer final : public Buffer {
 public:
  explicit HostBuffer(size_t bytes) : size_(bytes) {
    data_ = bytes ? std::aligned_alloc(64, (bytes + 63) / 64 * 64) : nullptr;
  }
  ~HostBuffer() override { std::free(data_); }
  void* base() override { return data_; }
  size_t size() const override { return size_; }
  bool host_visible() const override { return true; }
  bool ok() const { return size_ == 0 || data_ != nullptr; }

 private:
  void* data_ = nullptr;
  size_t size_;
};

int64_t rows_of(const graph::Shape& ne) { return ne[1] * ne[2] * ne[3]; }

}  // namespace

bool CpuBackend::supports_op(const Graph& graph, const Node& node) const {
  auto src_type = [&](size_t i) { return graph.node(node.src[i]).type; };
  switch (node.op) {
    case OpKind::kMatMul: return quant::is_compute_type(src_type(0)) && src_type(1) == DType::F32;
    case OpKind::kGetRows:
      return (graph.node(node.src[0]).op == OpKind::kWeight ? quant::is_compute_type(src_type(0))
                                                             : src_type(0) == DType::F32);
    case OpKind::kRope: return node.params.n_rot <= cpu::kMaxRopeDims;
    case OpKind::kMatMulId:
      return graph.node(node.src[0]).op == OpKind::kWeight && quant::is_compute_type(src_type(0)) &&
             src_type(1) == DType::F32 && src_type(2) == DType::I32;
    case OpKind::kMoeRoute:
    case OpKind::kMoeWeights:
    case OpKind::kMoeSum: return src_type(0) == DType::F32;
    default: return true;
  }
}

Status CpuBackend::register_weight(const WeightSource& w) {
  auto entry = std::make_unique<Entry>();
  cpu::CpuWeight& cw = entry->weight;
  cw.type = w.type;
  cw.ne0 = w.ne[0];
  cw.ne1 = w.ne[1] * w.ne[2] * w.ne[3];
  cw.data = w.data;
  if (!quant::is_compute_type(w.type)) {
    return unsupported("CPU backend: tensor '{}' has type {}, which minfer cannot compute with", w.name,
                       dtype_name(w.type));
  }
  if (cw.ne1 == 1 && w.type != DType::F32) {  // norms and biases are read as f32 by the elementwise ops
    entry->converted.resize(static_cast<size_t>(cw.ne0));
    quant::dequantize_row(w.type, w.data, entry->converted.data(), cw.ne0);
    cw.data = entry->converted.data();
    cw.type = DType::F32;
    weight_heap_bytes_ += entry->converted.size() * sizeof(float);
  }
  if (w.ne[2] > 1) {  // expert-stacked ({k, n, n_expert}): each expert's matrix prepared on its own
    if (w.ne[3] != 1) return unsupported("CPU backend: tensor '{}' has 4 dimensions", w.name);
    const size_t expert_bytes = *row_bytes(w.type, w.ne[0]) * static_cast<size_t>(w.ne[1]);
    bool all_owned = true;
    for (int64_t e = 0; e < w.ne[2]; ++e) {
      cw.experts.push_back(quant::prepare_weight(cw.type, static_cast<const uint8_t*>(w.data) + e * expert_bytes,
                                                 w.ne[1], w.ne[0], /*allow_repack=*/true));
      all_owned = all_owned && cw.experts.back().owned != nullptr;
    }
    if (all_owned) release_pages(w.data, w.n_bytes);
  } else if (cw.ne1 > 1) {
    cw.prepared = quant::prepare_weight(cw.type, cw.data, cw.ne1, cw.ne0, /*allow_repack=*/true);
    cw.has_matmul = true;
    if (cw.prepared.owned) {  // repacked onto the heap: the mapped original need not stay resident
      if (w.data == cw.data) release_pages(w.data, w.n_bytes);
    }
  }
  weights_[w.name] = std::move(entry);
  return {};
}

const void* CpuBackend::weight_handle(const std::string& name) const {
  auto it = weights_.find(name);
  return it == weights_.end() ? nullptr : &it->second->weight;
}

Result<std::unique_ptr<Buffer>> CpuBackend::alloc_buffer(size_t bytes) {
  auto buffer = std::make_unique<HostBuffer>(bytes);
  if (!buffer->ok()) return error(StatusCode::kOutOfRange, "CPU backend: cannot allocate {} bytes", bytes);
  return std::unique_ptr<Buffer>(std::move(buffer));
}

Status CpuBackend::execute(const Graph& graph, NodeId id, std::span<void* const> data, const ExecContext& ctx) {
  const Node& node = graph.node(id);
  ThreadPool& pool = *ctx.pool;
  auto src_node = [&](size_t i) -> const Node& { return graph.node(node.src[i]); };
  auto f32 = [&](size_t i) -> const float* {
    const Node& s = src_node(i);
    if (s.op == OpKind::kWeight) return static_cast<const float*>(static_cast<const cpu::CpuWeight*>(data[node.src[i]])->data);
    return static_cast<const float*>(data[static_cast<size_t>(node.src[i])]);
  };
  auto ids = [&](size_t i) { return static_cast<const int32_t*>(data[static_cast<size_t>(node.src[i])]); };
  auto weight = [&](size_t i) { return static_cast<const cpu::CpuWeight*>(data[static_cast<size_t>(node.src[i])]); };
  auto* out = static_cast<float*>(data[static_cast<size_t>(id)]);
  const int64_t d = node.ne[0];
  const int64_t rows = rows_of(node.ne);

  switch (node.op) {
    case OpKind::kInput:
    case OpKind::kWeight:
    case OpKind::kReshape: return {};  // bound or aliased by the scheduler
    case OpKind::kGetRows: {
      const int64_t n = src_node(1).ne[0];
      if (src_node(0).op == OpKind::kWeight) {
        const cpu::CpuWeight* w = weight(0);
        const int32_t* rows_ids = ids(1);
        for (int64_t i = 0; i < n; ++i) {
          if (rows_ids[i] < 0 || rows_ids[i] >= w->ne1) {
            return invalid_argument("node {} ({}): row id {} outside [0, {})", id, node.name, rows_ids[i], w->ne1);
          }
        }
        cpu::get_rows_weight(*w, rows_ids, n, out, pool);
      } else {
        cpu::get_rows_f32(f32(0), d, ids(1), n, out);
      }
      return {};
    }
    case OpKind::kRmsNorm: cpu::rms_norm(f32(0), f32(1), d, rows, node.params.eps, out, pool); return {};
    case OpKind::kMatMul: {
      const cpu::CpuWeight* w = weight(0);
      if (w == nullptr || !w->has_matmul) return invalid_argument("node {} ({}): weight is not a matrix", id, node.name);
      thread_local quant::MatmulScratch scratch;
      quant::matmul(w->prepared, f32(1), rows_of(src_node(1).ne), out, pool, scratch);
      return {};
    }
    case OpKind::kAdd:
    case OpKind::kMul: {
      const bool broadcast = rows_of(src_node(1).ne) == 1;
      (node.op == OpKind::kAdd ? cpu::add : cpu::mul)(f32(0), f32(1), d, rows, broadcast, out, pool);
      return {};
    }
    case OpKind::kSilu: cpu::silu(f32(0), node.n_elements(), out, pool); return {};
    case OpKind::kSwiGlu: cpu::swiglu(f32(0), f32(1), node.n_elements(), out, pool); return {};
    case OpKind::kGelu: cpu::gelu(f32(0), node.n_elements(), out, pool); return {};
    case OpKind::kScale: cpu::scale(f32(0), node.n_elements(), node.params.scale, out, pool); return {};
    case OpKind::kSoftcap: cpu::softcap(f32(0), node.n_elements(), node.params.scale, out, pool); return {};
    case OpKind::kRope: {
      const cpu::RopeSpec spec{node.params.n_rot, node.params.rope_freq_base, node.params.rope_freq_scale,
                               node.params.rope_mode == graph::RopeMode::kNeox,
                               node.src.size() > 2 ? f32(2) : nullptr};
      cpu::rope(f32(0), node.ne[0], node.ne[1], node.ne[2], ids(1), spec, out, pool);
      return {};
    }
    case OpKind::kKvStore:
    case OpKind::kKvRows:
    case OpKind::kAttention: {
      const int32_t layer = node.params.layer;
      if (layer < 0 || static_cast<size_t>(layer) >= ctx.kv.size() || ctx.batch == nullptr) {
        return invalid_argument("node {} ({}): no KV cells for layer {}", id, node.name, layer);
      }
      const KvLayerView& kv = ctx.kv[static_cast<size_t>(layer)];
      const BatchView& batch = *ctx.batch;
      const auto n_tokens = static_cast<int64_t>(batch.tokens.size());
      if (node.op == OpKind::kKvStore || node.op == OpKind::kKvRows) {
        const int64_t elems = node.op == OpKind::kKvStore ? src_node(0).n_elements() : node.n_elements();
        if (elems != n_tokens * kv.row_elems || static_cast<int64_t>(batch.store_cells.size()) != n_tokens) {
          return invalid_argument("node {} ({}): {} K elements and {} cells, the layer's cells take {} x {}", id,
                                  node.name, elems, batch.store_cells.size(), n_tokens, kv.row_elems);
        }
        for (int32_t cell : batch.store_cells) {
          if (cell < 0 || cell >= kv.n_cells) {
            return invalid_argument("node {} ({}): KV cell {} outside [0, {})", id, node.name, cell, kv.n_cells);
          }
        }
        if (node.op == OpKind::kKvRows) {
          cpu::kv_rows(kv, batch.store_cells.data(), n_tokens, out, pool);
        } else {
          cpu::kv_store(kv, f32(0), node.src.size() > 1 ? f32(1) : nullptr, batch.store_cells.data(), n_tokens,
                        pool);
        }
        return {};
      }
      const auto& p = node.params;
      if (static_cast<int64_t>(p.n_head_kv) * p.head_dim != kv.row_elems) {
        return invalid_argument("node {} ({}): {} KV heads x {} != cell width {}", id, node.name, p.n_head_kv,
                                p.head_dim, kv.row_elems);
      }
      if (p.n_swa > 0 && batch.window_positions.size() != batch.window_cells.size()) {
        return invalid_argument("node {} ({}): a sliding window needs the window cells' positions", id, node.name);
      }
      cpu::attention(kv, batch, f32(0), p.n_head, p.n_head_kv, p.head_dim, p.scale, p.n_swa, out, pool);
      return {};
    }
    case OpKind::kMoeRoute:
      cpu::moe_route(f32(0), src_node(0).ne[0], node.ne[1], node.params.n_expert_used,
                     static_cast<int32_t*>(data[static_cast<size_t>(id)]), pool);
      return {};
    case OpKind::kMoeWeights:
      cpu::moe_weights(f32(0), src_node(0).ne[0], ids(1), node.ne[1], node.params.n_expert_used,
                       node.params.moe_norm_w, out, pool);
      return {};
    case OpKind::kMatMulId: {
      const cpu::CpuWeight* w = weight(0);
      if (w == nullptr || w->experts.empty()) {
        return invalid_argument("node {} ({}): weight '{}' is not expert-stacked", id, node.name, src_node(0).name);
      }
      const int64_t n_used = node.ne[1], n_tokens = node.ne[2];
      const int32_t* expert_ids = ids(2);
      const auto n_expert = static_cast<int32_t>(w->experts.size());
      for (int64_t i = 0; i < n_used * n_tokens; ++i) {
        if (expert_ids[i] < 0 || expert_ids[i] >= n_expert) {
          return invalid_argument("node {} ({}): expert id {} outside [0, {})", id, node.name, expert_ids[i], n_expert);
        }
      }
      cpu::matmul_id(*w, f32(1), expert_ids, n_tokens, n_used, src_node(1).ne[1] != 1, out, pool);
      return {};
    }
    case OpKind::kMoeSum:
      cpu::moe_sum(f32(0), f32(1), node.ne[0], src_node(0).ne[1], node.ne[1], out, pool);
      return {};
  }
  return invalid_argument("node {}: unknown op", id);
}

}  // namespace minfer::backend
