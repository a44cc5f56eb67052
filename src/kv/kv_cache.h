// Multi-sequence KV cache: per layer, two persistent regions (K and V) of n_cells rows, plus per-cell
// metadata (logical position, owning sequences). Positions are logical per sequence; which cell holds a
// token is the allocator's business. Every index is checked: a full cache or an out-of-range cell is an
// error, never an overwrite.
//
//   auto kv = KvCache::create(config, cpu_backend);       // sized once from n_ctx
//   auto kv = KvCache::create(config, {&dev, &dev, &cpu}); // or per layer: where its attention runs
//   auto cells = kv->allocate(seq_ids, positions);        // reserve cells for a micro-batch
//   kv->attention_windows(seq_ids, positions, &offsets, &window_cells);
//   kv->seq_rm(seq, 10, -1);                              // drop positions >= 10 of `seq`
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "backend/backend.h"
#include "core/status.h"

namespace minfer::kv {

using SeqId = int32_t;
inline constexpr int32_t kMaxSequences = 64;  // a cell's owners are a 64-bit mask

struct KvConfig {
  int32_t n_layer = 0;
  int64_t n_cells = 0;    // context size in tokens, over all sequences
  int64_t row_elems = 0;  // n_head_kv * head_dim (K and V rows have the same width for Qwen)
  DType type = DType::F16;
};

// Bytes of one cell row, or nullopt when row_elems does not fit the type's blocks.
std::optional<size_t> row_bytes_of(const KvConfig& config);
// Element types the cache may hold: f32, f16, q8_0 (`--cache-type`).
Status check_cache_type(DType type);

class KvCache {
 public:
  static Result<std::unique_ptr<KvCache>> create(const KvConfig& config, backend::Backend& backend);
  // Layer l's K and V regions in per_layer[l]'s memory (n_layer entries). A device region (not host
  // visible) is reached only through the backend's upload/download: views() then hold device pointers
  // for that backend's kv_store/attention, and every row operation here (seq_add's re-rotation, the
  // session and slots files through read_row/write_row) copies rows in and out.
  static Result<std::unique_ptr<KvCache>> create(const KvConfig& config,
                                                 const std::vector<backend::Backend*>& per_layer);

  const KvConfig& config() const { return config_; }
  std::span<const backend::KvLayerView> views() const { return views_; }
  size_t bytes() const;
  // Bytes of the layers whose regions live in `backend`'s memory.
  size_t bytes_on(const backend::Backend& backend) const;
  backend::Backend& layer_backend(int32_t layer) const { return *layer_backends_[static_cast<size_t>(layer)]; }
  // One cell row (views()[layer].row_bytes bytes) of layer's K (v false) or V, copied out or in wherever
  // the layer lives. The cell index is the caller's to check.
  Status read_row(int32_t layer, bool v, int32_t cell, void* dst) const;
  Status write_row(int32_t layer, bool v, int32_t cell, const void* src);

  // Reserves one cell per token and records (seq, pos) in it. Fails without changing anything when the
  // cache lacks free cells, a sequence id is out of range, or a sequence already holds that position.
  Result<std::vector<int32_t>> allocate(std::span<const SeqId> seqs, std::span<const int32_t> positions);

  // CSR windows: token i attends the cells of its sequence with pos <= positions[i], in position order.
  // cell_positions, when given, receives each window cell's position (what a sliding window cuts by).
  void attention_windows(std::span<const SeqId> seqs, std::span<const int32_t> positions,
                         std::vector<int32_t>* offsets, std::vector<int32_t>* cells,
                         std::vector<int32_t>* cell_positions = nullptr) const;

  // Removes positions [p0, p1) of `seq` (p1 < 0: to the end; seq < 0: every sequence). Cells no sequence
  // owns any more become free.
  void seq_rm(SeqId seq, int32_t p0, int32_t p1);
  // Makes `dst` share src's cells for positions [p0, p1) (no data copied).
  void seq_cp(SeqId src, SeqId dst, int32_t p0, int32_t p1);
  // Drops every sequence but `seq`.
  void seq_keep(SeqId seq);
  // A context shift in two steps, around the K-shift graph that re-rotates the keys where each layer's cells
  // live (engine::Engine::seq_add runs it; this layer never computes). shift_cells: the cells of `seq` with
  // positions in [p0, p1) (p1 < 0: to the end), refusing a cell shared with another sequence (its K would
  // be wrong for the other owner) or a position that would become negative. add_positions: moves those
  // cells' positions by delta, once their keys are rotated.
  Result<std::vector<int32_t>> shift_cells(SeqId seq, int32_t p0, int32_t p1, int32_t delta) const;
  void add_positions(std::span<const int32_t> cells, int32_t delta);
  void clear();

  // The cells of `seq` as (position, cell), sorted by position.
  std::vector<std::pair<int32_t, int32_t>> seq_cells(SeqId seq) const;
  int32_t seq_pos_max(SeqId seq) const;  // -1 when the sequence is empty
  int32_t seq_pos_min(SeqId seq) const;
  // For monitoring (a scan of every cell): sequences holding at least one cell, and cells owned by more
  // than one sequence (a prefix shared through seq_cp).
  struct Sharing {
    int32_t sequences = 0;
    int64_t shared_cells = 0;
  };
  Sharing sharing() const;
  int64_t used_cells() const { return used_; }
  int64_t free_cells() const { return config_.n_cells - used_; }
  int64_t n_cells() const { return config_.n_cells; }

 private:
  struct Cell {
    int32_t pos = -1;
    uint64_t seqs = 0;  // bit s set: sequence s owns this cell
  };
  KvCache() = default;
  void free_if_unowned(int32_t cell);

  KvConfig config_;
  std::vector<std::unique_ptr<backend::Buffer>> buffers_;  // per layer: K then V
  std::vector<backend::KvLayerView> views_;
  std::vector<backend::Backend*> layer_backends_;  // per layer; not owned
  std::vector<bool> layer_host_;                   // per layer: its region is host memory
  std::vector<Cell> cells_;
  int64_t used_ = 0;
  int64_t search_head_ = 0;  // where the next free-cell search starts
};

}  // namespace minfer::kv
