// Fusion: pattern rewrites on an assigned graph, gated by what the node's backend can run fused.
#pragma once

#include <functional>

#include "graph/ir.h"

namespace minfer::graph {

// Asked per candidate: may backend `backend` run fused op `op`?
using SupportsFused = std::function<bool(int32_t backend, OpKind op)>;

struct FuseStats {
  int swiglu = 0;
};

// Mul(Silu(a), b) -> SwiGlu(a, b) when the Silu has no other consumer and both nodes share a backend.
// The orphaned Silu stays in the graph with no consumers; the allocator gives it no buffer and the
// executor skips it.
FuseStats fuse(Graph& graph, const SupportsFused& supports);

}  // namespace minfer::graph
