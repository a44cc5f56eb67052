// GraphParams: everything that decides a graph's topology. Positions, KV cells and cache contents are
// deliberately absent (they are data), so a decode step with the same shape reuses the same graph.
#pragma once

#include <cstdint>

namespace minfer::graph {

struct GraphParams {
  int32_t n_tokens = 1;
  int32_t n_outputs = 1;  // rows whose logits are computed (the last rows of the batch)
  bool embeddings = false;  // true: the graph ends at the final norm (n_embd per output row), no logits
  // true: the model's K-shift graph (Model::build_kv_shift_graph) over n_tokens KV cells; n_outputs is 0
  bool kv_shift = false;
  auto operator<=>(const GraphParams&) const = default;
};

}  // namespace minfer::graph
