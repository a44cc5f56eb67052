#include "kv/kv_cache.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>

#include <fmt/format.h>


namespace minfer::kv {
namespace {

uint64_t bit(SeqId s) { return uint64_t{1} << s; }

}  // namespace

Status check_cache_type(DType type) {
  if (type == DType::F32 || type == DType::F16 || type == DType::Q8_0) return {};
  return unsupported("KV cache type '{}' is not supported (use f32, f16 or q8_0)", dtype_name(type));
}

Result<std::unique_ptr<KvCache>> KvCache::create(const KvConfig& config, backend::Backend& backend) {
  return create(config, std::vector<backend::Backend*>(static_cast<size_t>(std::max(config.n_layer, 0)), &backend));
}

Result<std::unique_ptr<KvCache>> KvCache::create(const KvConfig& config,
                                                 const std::vector<backend::Backend*>& per_layer) {
  MINFER_RETURN_IF_ERROR(check_cache_type(config.type));
  if (config.n_cells <= 0 || config.n_layer <= 0 || config.row_elems <= 0) {
    return invalid_argument("KV cache: bad size ({} layers, {} cells, rows of {})", config.n_layer, config.n_cells,
                            config.row_elems);
  }
  auto row_bytes = row_bytes_of(config);
  if (!row_bytes) {
    return invalid_argument("KV cache: rows of {} elements do not fit {} blocks", config.row_elems,
                            dtype_name(config.type));
  }
  if (per_layer.size() != static_cast<size_t>(config.n_layer)) {
    return invalid_argument("KV cache: {} layer backends for {} layers", per_layer.size(), config.n_layer);
  }
  std::unique_ptr<KvCache> kv(new KvCache());
  kv->config_ = config;
  kv->cells_.resize(static_cast<size_t>(config.n_cells));
  const size_t region = *row_bytes * static_cast<size_t>(config.n_cells);
  for (int32_t l = 0; l < config.n_layer; ++l) {
    backend::Backend& backend = *per_layer[static_cast<size_t>(l)];
    // An allocation that fails (out of device memory) names the layer, K or V, and the bytes asked for.
    auto alloc = [&](const char* which) -> Result<std::unique_ptr<backend::Buffer>> {
      auto b = backend.alloc_buffer(region);
      if (!b.ok()) {
        return b.status().with_context(
            fmt::format("KV cache of layer {}, {}: {} bytes on {}: ", l, which, region, backend.name()));
      }
      return b;
    };
    MINFER_ASSIGN_OR_RETURN(auto k, alloc("K"));
    MINFER_ASSIGN_OR_RETURN(auto v, alloc("V"));
    kv->layer_backends_.push_back(&backend);
    kv->layer_host_.push_back(k->host_visible() && v->host_visible());
    if (k->size() != region || v->size() != region) {
      return error(StatusCode::kInternal, "KV cache: layer {} region is {} bytes, expected {}", l, k->size(), region);
    }
    backend::KvLayerView view;
    view.k = k->base();
    view.v = v->base();
    view.type = config.type;
    view.row_elems = config.row_elems;
    view.n_cells = config.n_cells;
    view.row_bytes = *row_bytes;
    kv->views_.push_back(view);
    kv->buffers_.push_back(std::move(k));
    kv->buffers_.push_back(std::move(v));
  }
  return kv;
}

std::optional<size_t> row_bytes_of(const KvConfig& config) {
  auto b = row_bytes(config.type, config.row_elems);
  if (!b) return std::nullopt;
  return static_cast<size_t>(*b);
}

size_t KvCache::bytes() const {
  size_t total = 0;
  for (const auto& b : buffers_) total += b->size();
  return total;
}

size_t KvCache::bytes_on(const backend::Backend& backend) const {
  size_t total = 0;
  for (size_t l = 0; l < layer_backends_.size(); ++l) {
    if (layer_backends_[l] == &backend) total += buffers_[2 * l]->size() + buffers_[2 * l + 1]->size();
  }
  return total;
}

Status KvCache::read_row(int32_t layer, bool v, int32_t cell, void* dst) const {
  const backend::KvLayerView& view = views_[static_cast<size_t>(layer)];
  const auto* src = static_cast<const uint8_t*>(v ? view.v : view.k) + static_cast<size_t>(cell) * view.row_bytes;
  if (layer_host_[static_cast<size_t>(layer)]) {
    std::memcpy(dst, src, view.row_bytes);
    return {};
  }
  return layer_backends_[static_cast<size_t>(layer)]->download(dst, src, view.row_bytes);
}

Status KvCache::write_row(int32_t layer, bool v, int32_t cell, const void* src) {
  const backend::KvLayerView& view = views_[static_cast<size_t>(layer)];
  auto* dst = static_cast<uint8_t*>(v ? view.v : view.k) + static_cast<size_t>(cell) * view.row_bytes;
  if (layer_host_[static_cast<size_t>(layer)]) {
    std::memcpy(dst, src, view.row_bytes);
    return {};
  }
  return layer_backends_[static_cast<size_t>(layer)]->upload(dst, src, view.row_bytes);
}

Result<std::vector<int32_t>> KvCache::allocate(std::span<const SeqId> seqs, std::span<const int32_t> positions) {
  if (seqs.size() != positions.size()) return invalid_argument("KV cache: {} sequence ids for {} positions", seqs.size(), positions.size());
  const auto n = static_cast<int64_t>(seqs.size());
  if (used_ + n > config_.n_cells) {
    return error(StatusCode::kOutOfRange, "KV cache full: {} of {} cells used, {} more needed", used_,
                 config_.n_cells, n);
  }
  for (int64_t i = 0; i < n; ++i) {
    if (seqs[i] < 0 || seqs[i] >= kMaxSequences) {
      return invalid_argument("KV cache: sequence id {} outside [0, {})", seqs[i], kMaxSequences);
    }
    if (positions[i] < 0) return invalid_argument("KV cache: negative position {}", positions[i]);
  }
  // Refuse a (seq, pos) already present, including twice within this batch.
  for (int64_t i = 0; i < n; ++i) {
    for (const Cell& c : cells_) {
      if (c.pos == positions[i] && (c.seqs & bit(seqs[i]))) {
        return invalid_argument("KV cache: sequence {} already holds position {}", seqs[i], positions[i]);
      }
    }
    for (int64_t j = 0; j < i; ++j) {
      if (seqs[j] == seqs[i] && positions[j] == positions[i]) {
        return invalid_argument("KV cache: batch holds sequence {} position {} twice", seqs[i], positions[i]);
      }
    }
  }
  std::vector<int32_t> out(static_cast<size_t>(n));
  int64_t cursor = search_head_;
  for (int64_t i = 0; i < n; ++i) {
    while (cells_[static_cast<size_t>(cursor)].seqs != 0) cursor = (cursor + 1) % config_.n_cells;
    Cell& c = cells_[static_cast<size_t>(cursor)];
    c.pos = positions[i];
    c.seqs = bit(seqs[i]);
    out[static_cast<size_t>(i)] = static_cast<int32_t>(cursor);
    cursor = (cursor + 1) % config_.n_cells;
  }
  used_ += n;
  search_head_ = cursor;
  return out;
}

void KvCache::attention_windows(std::span<const SeqId> seqs, std::span<const int32_t> positions,
                                std::vector<int32_t>* offsets, std::vector<int32_t>* cells,
                                std::vector<int32_t>* cell_positions) const {
  offsets->assign(1, 0);
  cells->clear();
  if (cell_positions != nullptr) cell_positions->clear();
  // Each sequence of the batch: its cells sorted by position, gathered once however the batch interleaves.
  std::array<std::vector<std::pair<int32_t, int32_t>>, kMaxSequences> by_pos;  // (pos, cell)
  uint64_t gathered = 0;
  for (size_t i = 0; i < seqs.size(); ++i) {
    const SeqId seq = seqs[i];
    auto& list = by_pos[static_cast<size_t>(seq)];
    if (!(gathered & bit(seq))) {
      gathered |= bit(seq);
      for (size_t c = 0; c < cells_.size(); ++c) {
        if (cells_[c].seqs & bit(seq)) list.emplace_back(cells_[c].pos, static_cast<int32_t>(c));
      }
      std::sort(list.begin(), list.end());
    }
    for (const auto& [pos, cell] : list) {
      if (pos > positions[i]) break;
      cells->push_back(cell);
      if (cell_positions != nullptr) cell_positions->push_back(pos);
    }
    offsets->push_back(static_cast<int32_t>(cells->size()));
  }
}

void KvCache::free_if_unowned(int32_t cell) {
  Cell& c = cells_[static_cast<size_t>(cell)];
  if (c.seqs == 0 && c.pos >= 0) {
    c.pos = -1;
    --used_;
    search_head_ = std::min<int64_t>(search_head_, cell);
  }
}

void KvCache::seq_rm(SeqId seq, int32_t p0, int32_t p1) {
  for (size_t i = 0; i < cells_.size(); ++i) {
    Cell& c = cells_[i];
    if (c.pos < 0 || c.pos < p0 || (p1 >= 0 && c.pos >= p1)) continue;
    if (seq < 0) {
      c.seqs = 0;
    } else {
      c.seqs &= ~bit(seq);
    }
    free_if_unowned(static_cast<int32_t>(i));
  }
}

void KvCache::seq_cp(SeqId src, SeqId dst, int32_t p0, int32_t p1) {
  if (src == dst) return;
  for (Cell& c : cells_) {
    if ((c.seqs & bit(src)) && c.pos >= p0 && (p1 < 0 || c.pos < p1)) c.seqs |= bit(dst);
  }
}

void KvCache::seq_keep(SeqId seq) {
  for (size_t i = 0; i < cells_.size(); ++i) {
    cells_[i].seqs &= bit(seq);
    free_if_unowned(static_cast<int32_t>(i));
  }
}

Result<std::vector<int32_t>> KvCache::shift_cells(SeqId seq, int32_t p0, int32_t p1, int32_t delta) const {
  if (seq < 0 || seq >= kMaxSequences) return invalid_argument("KV shift: sequence {} out of range", seq);
  std::vector<int32_t> moved;
  for (size_t i = 0; i < cells_.size(); ++i) {
    const Cell& c = cells_[i];
    if (!(c.seqs & bit(seq)) || c.pos < p0 || (p1 >= 0 && c.pos >= p1)) continue;
    if (c.seqs != bit(seq)) return invalid_argument("KV shift: cell {} is shared with another sequence", i);
    if (c.pos + delta < 0) return invalid_argument("KV shift: position {} + {} would be negative", c.pos, delta);
    moved.push_back(static_cast<int32_t>(i));
  }
  if (delta == 0) moved.clear();
  return moved;
}

void KvCache::add_positions(std::span<const int32_t> cells, int32_t delta) {
  for (int32_t cell : cells) cells_[static_cast<size_t>(cell)].pos += delta;
}

void KvCache::clear() {
  for (Cell& c : cells_) c = Cell();
  used_ = 0;
  search_head_ = 0;
}

std::vector<std::pair<int32_t, int32_t>> KvCache::seq_cells(SeqId seq) const {
  std::vector<std::pair<int32_t, int32_t>> out;
  if (seq < 0 || seq >= kMaxSequences) return out;
  for (size_t c = 0; c < cells_.size(); ++c) {
    if (cells_[c].seqs & bit(seq)) out.emplace_back(cells_[c].pos, static_cast<int32_t>(c));
  }
  std::sort(out.begin(), out.end());
  return out;
}

KvCache::Sharing KvCache::sharing() const {
  Sharing out;
  uint64_t seen = 0;
  for (const Cell& c : cells_) {
    seen |= c.seqs;
    if ((c.seqs & (c.seqs - 1)) != 0) ++out.shared_cells;  // more than one owner bit set
  }
  out.sequences = std::popcount(seen);
  return out;
}

int32_t KvCache::seq_pos_max(SeqId seq) const {
  int32_t best = -1;
  for (const Cell& c : cells_) {
    if (c.seqs & bit(seq)) best = std::max(best, c.pos);
  }
  return best;
}

int32_t KvCache::seq_pos_min(SeqId seq) const {
  int32_t best = -1;
  for (const Cell& c : cells_) {
    if ((c.seqs & bit(seq)) && (best < 0 || c.pos < best)) best = c.pos;
  }
  return best;
}

}  // namespace minfer::kv
