// Compares two MINFER_DUMP_DIR dumps node by node, in evaluation order, step by step: the first node
// whose max |a - b| exceeds a tolerance is where two runs (weight types, ISA levels, builds) part.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/status.h"

namespace minfer::inspect {

struct NodeDiff {
  int64_t step = 0;
  int64_t order = 0;  // evaluation order within the step
  std::string name, op;
  int64_t layer = -1;
  double max_abs = 0;  // infinity when one side is NaN/Inf where the other is not
  int64_t at = 0;      // flat index of the largest difference
  float a = 0, b = 0;  // the values there
};

struct DiffReport {
  int64_t steps = 0, nodes = 0;   // compared
  std::optional<NodeDiff> first;  // first node over the tolerance
  NodeDiff largest;               // largest difference seen (for the "all within" message)
};

// Errors: a missing or unreadable dump, steps or nodes that do not correspond (different graphs), shapes
// that differ. Both directories must be dump roots (holding index.json with a "steps" list) or both step
// directories (holding a step's index.json).
Result<DiffReport> diff_dumps(const std::string& dir_a, const std::string& dir_b, double tolerance);

std::string format_diff(const DiffReport& report, double tolerance);

}  // namespace minfer::inspect
