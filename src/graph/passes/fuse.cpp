#include "graph/passes/fuse.h"

#include "graph/passes/liveness.h"

namespace minfer::graph {

FuseStats fuse(Graph& graph, const SupportsFused& supports) {
  FuseStats stats;
  const std::vector<int> consumers = consumer_counts(graph);
  for (Node& node : graph.nodes) {
    if (node.op != OpKind::kMul) continue;
    const Node& a = graph.node(node.src[0]);
    if (a.op != OpKind::kSilu || consumers[static_cast<size_t>(node.src[0])] != 1) continue;
    if (a.backend != node.backend || graph.node(node.src[1]).n_elements() != node.n_elements()) continue;
    if (!supports(node.backend, OpKind::kSwiGlu)) continue;
    node.op = OpKind::kSwiGlu;
    node.src = {a.src[0], node.src[1]};
    node.fused_from = "mul(silu(a), b)";
    ++stats.swiglu;
  }
  return stats;
}

}  // namespace minfer::graph
