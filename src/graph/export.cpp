#include "graph/export.h"

#include <fmt/format.h>

#include "graph/passes/liveness.h"

namespace minfer::graph {
namespace {

std::string backend_label(const Node& n, const std::vector<std::string>& names) {
  if (n.backend < 0 || static_cast<size_t>(n.backend) >= names.size()) return "unassigned";
  return names[static_cast<size_t>(n.backend)];
}

std::string shape_text(const Node& n) {
  int dims = 4;
  while (dims > 1 && n.ne[static_cast<size_t>(dims - 1)] == 1) --dims;
  std::string out = "[";
  for (int d = 0; d < dims; ++d) out += fmt::format("{}{}", d ? ", " : "", n.ne[static_cast<size_t>(d)]);
  return out + "]";
}

}  // namespace

std::string to_dot(const Graph& graph, const std::vector<std::string>& backend_names) {
  const std::vector<int> consumers = consumer_counts(graph);
  std::string out = "digraph minfer {\n  rankdir=TB;\n  node [shape=box, fontname=\"monospace\", fontsize=10];\n";
  for (size_t i = 0; i < graph.size(); ++i) {
    const Node& n = graph.nodes[i];
    if (consumers[i] == 0 && n.op != OpKind::kKvStore) continue;  // fusion orphans
    const char* color = n.op == OpKind::kWeight ? "lightgrey" : n.op == OpKind::kInput ? "lightblue" : "white";
    out += fmt::format("  n{} [label=\"{}\\n{}\\n{} {}\\n{}\", style=filled, fillcolor={}];\n", i, op_name(n.op),
                       n.name, shape_text(n), dtype_name(n.type), backend_label(n, backend_names), color);
    for (NodeId s : n.src) out += fmt::format("  n{} -> n{};\n", s, i);
  }
  return out + "}\n";
}

nlohmann::ordered_json to_json(const Graph& graph, const std::vector<std::string>& backend_names) {
  using nlohmann::ordered_json;
  const std::vector<int> consumers = consumer_counts(graph);
  ordered_json nodes = ordered_json::array();
  ordered_json edges = ordered_json::array();
  int fused = 0;
  for (size_t i = 0; i < graph.size(); ++i) {
    const Node& n = graph.nodes[i];
    ordered_json j = {{"id", i},
                      {"op", std::string(op_name(n.op))},
                      {"name", n.name},
                      {"shape", n.ne},
                      {"dtype", std::string(dtype_name(n.type))},
                      {"backend", backend_label(n, backend_names)},
                      {"layer", n.layer},
                      {"src", n.src},
                      {"dead", consumers[i] == 0 && n.op != OpKind::kKvStore}};
    if (!n.fused_from.empty()) {
      j["fused_from"] = n.fused_from;
      ++fused;
    }
    nodes.push_back(std::move(j));
    for (NodeId s : n.src) edges.push_back({{"from", s}, {"to", i}});
  }
  return {{"format", "minfer-graph-v1"},
          {"n_nodes", graph.size()},
          {"n_fused", fused},
          {"outputs", graph.outputs},
          {"nodes", std::move(nodes)},
          {"edges", std::move(edges)}};
}

}  // namespace minfer::graph
