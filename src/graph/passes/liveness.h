// Liveness facts for the allocator: how many nodes consume each node, and the last node that reads it.
#pragma once

#include <vector>

#include "graph/ir.h"

namespace minfer::graph {

// consumers[i] = number of source slots referring to node i (graph outputs count as one more).
std::vector<int> consumer_counts(const Graph& graph);

// last_use[i] = index of the last node reading node i (graph outputs: graph.size()); -1 if never read.
std::vector<int> last_uses(const Graph& graph);

// The node whose buffer `id` really lives in: follows Reshape views down to their source.
NodeId storage_root(const Graph& graph, NodeId id);

}  // namespace minfer::graph
