// What a backend needs at execution beyond node buffers: the micro-batch's host data (tokens, positions,
// KV cells to write and each token's attention window) and views of the persistent KV cells per layer.
// Filled by the scheduler from the engine's batch and the KV cache; backends only read it.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/dtype.h"

namespace minfer {
class ThreadPool;
}

namespace minfer::backend {

struct BatchView {
  std::span<const int32_t> tokens;       // [n_tokens]
  std::span<const int32_t> positions;    // [n_tokens] logical position of each token in its sequence
  std::span<const int32_t> output_rows;  // rows (token indices) whose logits are computed, ascending
  std::span<const int32_t> store_cells;  // [n_tokens] KV cell each token's K and V are written to
  // CSR attention windows: token i attends cells window_cells[window_offsets[i] .. window_offsets[i+1]),
  // ordered by position. Each token's window is its own sequence's cells with pos <= its pos, so the
  // reduction does not depend on which other tokens share the batch.
  std::span<const int32_t> window_offsets;  // [n_tokens + 1]
  std::span<const int32_t> window_cells;
  // The position of each window cell (parallel to window_cells): a sliding-window layer attends the suffix
  // of a token's window with pos > its pos - n_swa.
  std::span<const int32_t> window_positions;
};

// One layer's persistent K and V cells: n_cells rows each of row_elems elements of `type` (row_bytes
// per row, heads side by side), stored by cell so a cell is written, copied or re-roped as one row.
struct KvLayerView {
  void* k = nullptr;
  void* v = nullptr;
  DType type = DType::F32;
  int64_t row_elems = 0;  // n_head_kv * head_dim
  int64_t n_cells = 0;
  size_t row_bytes = 0;
};

struct ExecContext {
  const BatchView* batch = nullptr;
  std::span<const KvLayerView> kv;  // indexed by layer
  ThreadPool* pool = nullptr;
};

}  // namespace minfer::backend
