#include "graph/passes/liveness.h"

namespace minfer::graph {

std::vector<int> consumer_counts(const Graph& graph) {
  std::vector<int> counts(graph.size(), 0);
  for (const Node& n : graph.nodes) {
    for (NodeId s : n.src) ++counts[static_cast<size_t>(s)];
  }
  for (NodeId o : graph.outputs) ++counts[static_cast<size_t>(o)];
  return counts;
}

NodeId storage_root(const Graph& graph, NodeId id) {
  while (graph.node(id).op == OpKind::kReshape) id = graph.node(id).src[0];
  return id;
}

std::vector<int> last_uses(const Graph& graph) {
  std::vector<int> last(graph.size(), -1);
  for (size_t i = 0; i < graph.size(); ++i) {
    for (NodeId s : graph.nodes[i].src) {
      // A read through a view keeps the viewed storage alive too.
      last[static_cast<size_t>(s)] = static_cast<int>(i);
      last[static_cast<size_t>(storage_root(graph, s))] = static_cast<int>(i);
    }
  }
  for (NodeId o : graph.outputs) {
    last[static_cast<size_t>(o)] = static_cast<int>(graph.size());
    last[static_cast<size_t>(storage_root(graph, o))] = static_cast<int>(graph.size());
  }
  return last;
}

}  // namespace minfer::graph
