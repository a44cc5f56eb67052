// Graph export for humans and the web visualizer: Graphviz DOT and JSON (nodes, edges, shapes,
// backends, fusion results).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "graph/ir.h"

namespace minfer::graph {

// backend_names[i] names backend index i (nodes with backend -1 show "unassigned").
std::string to_dot(const Graph& graph, const std::vector<std::string>& backend_names);
nlohmann::ordered_json to_json(const Graph& graph, const std::vector<std::string>& backend_names);

}  // namespace minfer::graph
