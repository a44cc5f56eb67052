#include "inspect/dump_diff.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "inspect/npy.h"

namespace minfer::inspect {
namespace {

Result<nlohmann::json> read_index(const std::string& dir) {
  const std::string path = dir + "/index.json";
  std::ifstream in(path, std::ios::binary);
  if (!in) return not_found("dump-diff: no index.json in '{}' (not a MINFER_DUMP_DIR dump)", dir);
  std::stringstream ss;
  ss << in.rdbuf();
  nlohmann::json j = nlohmann::json::parse(ss.str(), nullptr, false);
  if (j.is_discarded() || !j.is_object()) return invalid_argument("dump-diff: '{}' is not valid JSON", path);
  return j;
}

// Compares one step directory pair; sets report->first on the first node over the tolerance.
Status diff_step(const std::string& a_dir, const std::string& b_dir, double tol, DiffReport* report) {
  MINFER_ASSIGN_OR_RETURN(nlohmann::json a, read_index(a_dir));
  MINFER_ASSIGN_OR_RETURN(nlohmann::json b, read_index(b_dir));
  if (!a.contains("nodes") || !b.contains("nodes"))
    return invalid_argument("dump-diff: '{}' is not a step index", a_dir);
  const auto& na = a["nodes"];
  const auto& nb = b["nodes"];
  const int64_t step = a.value("step", int64_t{0});
  // Nodes correspond by evaluation order; a filtered dump holds a subset, so only orders in both compare.
  std::map<int64_t, const nlohmann::json*> b_by_order;
  for (const auto& n : nb) b_by_order[n.value("order", int64_t{-1})] = &n;
  int64_t common = 0;
  for (size_t i = 0; i < na.size(); ++i) {
    const std::string name = na[i].value("name", "");
    auto it = b_by_order.find(na[i].value("order", int64_t{-1}));
    if (it == b_by_order.end()) continue;
    const nlohmann::json& other = *it->second;
    if (other.value("name", "") != name || other.value("op", "") != na[i].value("op", "")) {
      return invalid_argument(
          "dump-diff: step {}: node #{} is '{}' in '{}' but '{}' in '{}' (different graphs)", step,
          na[i].value("order", int64_t{-1}), name, a_dir, other.value("name", ""), b_dir);
    }
    ++common;
    MINFER_ASSIGN_OR_RETURN(NpyArray x, read_npy(a_dir + "/" + na[i].value("file", "")));
    MINFER_ASSIGN_OR_RETURN(NpyArray y, read_npy(b_dir + "/" + other.value("file", "")));
    if (x.shape != y.shape) {
      return invalid_argument("dump-diff: step {}: node '{}' has shape [{}] in '{}' but [{}] in '{}'", step,
                              name, fmt::join(x.shape, ", "), a_dir, fmt::join(y.shape, ", "), b_dir);
    }
    NodeDiff d;
    d.step = step;
    d.order = na[i].value("order", static_cast<int64_t>(i));
    d.name = name;
    d.op = na[i].value("op", "");
    d.layer = na[i].value("layer", int64_t{-1});
    for (size_t k = 0; k < x.values.size(); ++k) {
      const float u = x.values[k], v = y.values[k];
      double delta;
      if (std::isfinite(u) && std::isfinite(v)) {
        delta = std::fabs(static_cast<double>(u) - static_cast<double>(v));
      } else {  // equal non-finite values (both NaN, same Inf) agree; anything else is infinitely far
        const bool same = (std::isnan(u) && std::isnan(v)) || u == v;
        delta = same ? 0.0 : std::numeric_limits<double>::infinity();
      }
      if (delta > d.max_abs) {
        d.max_abs = delta;
        d.at = static_cast<int64_t>(k);
        d.a = u;
        d.b = v;
      }
    }
    ++report->nodes;
    if (d.max_abs > report->largest.max_abs || report->nodes == 1) report->largest = d;
    if (d.max_abs > tol) {
      report->first = d;
      return {};
    }
  }
  if (common == 0)
    return invalid_argument("dump-diff: step {}: '{}' and '{}' have no node in common", step, a_dir, b_dir);
  return {};
}

}  // namespace

Result<DiffReport> diff_dumps(const std::string& dir_a, const std::string& dir_b, double tolerance) {
  if (!(tolerance >= 0)) return invalid_argument("dump-diff: tolerance must be >= 0 (got {})", tolerance);
  MINFER_ASSIGN_OR_RETURN(nlohmann::json a, read_index(dir_a));
  MINFER_ASSIGN_OR_RETURN(nlohmann::json b, read_index(dir_b));
  DiffReport report;
  const bool a_root = a.contains("steps"), b_root = b.contains("steps");
  if (a_root != b_root) {
    return invalid_argument(
        "dump-diff: '{}' and '{}' are not the same kind (one is a dump, the other a step)", dir_a, dir_b);
  }
  if (!a_root) {
    report.steps = 1;
    MINFER_RETURN_IF_ERROR(diff_step(dir_a, dir_b, tolerance, &report));
    return report;
  }
  const auto& sa = a["steps"];
  const auto& sb = b["steps"];
  if (sa.size() != sb.size()) {
    fmt::print(stderr, "dump-diff: '{}' has {} steps, '{}' has {}; comparing the first {}\n", dir_a,
               sa.size(), dir_b, sb.size(), std::min(sa.size(), sb.size()));
  }
  for (size_t i = 0; i < std::min(sa.size(), sb.size()); ++i) {
    if (sa[i].value("step", -1) != sb[i].value("step", -2)) {
      return invalid_argument(
          "dump-diff: the dumps hold different steps ({} vs {}): were MINFER_DUMP_STEPS the same?",
          sa[i].value("step", -1), sb[i].value("step", -1));
    }
    ++report.steps;
    MINFER_RETURN_IF_ERROR(diff_step(dir_a + "/" + sa[i].value("dir", ""),
                                     dir_b + "/" + sb[i].value("dir", ""), tolerance, &report));
    if (report.first) break;
  }
  return report;
}

std::string format_diff(const DiffReport& r, double tolerance) {
  if (r.first) {
    const NodeDiff& d = *r.first;
    return fmt::format(
        "first difference over {:g}: step {}, node #{} '{}' ({}, layer {}): max |delta| = {:g} at index {} "
        "({:g} vs "
        "{:g})\n",
        tolerance, d.step, d.order, d.name, d.op, d.layer, d.max_abs, d.at, d.a, d.b);
  }
  return fmt::format(
      "no node differs by more than {:g} ({} nodes in {} steps; largest |delta| {:g} at '{}')\n", tolerance,
      r.nodes, r.steps, r.largest.max_abs, r.largest.name);
}

}  // namespace minfer::inspect
