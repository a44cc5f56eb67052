// A node's output as observers read it: numpy shape (outermost first, i.e. ggml's ne reversed with the
// trailing 1s dropped), numpy dtype, and the values as floats.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "graph/ir.h"

namespace minfer::inspect {

// ne {d, n_tokens, 1, 1} -> {n_tokens, d}; a scalar-like {1,1,1,1} -> {1}.
std::vector<int64_t> numpy_shape(const graph::Shape& ne);
// "<f4" for F32, "<i4" for I32, "" for types observers do not read.
std::string numpy_descr(DType type);

// The values of a node's output as floats: a view of `data` for F32, a conversion into `scratch` for I32.
// Empty when the node has no readable output (data == nullptr or another type).
std::span<const float> node_values(const graph::Node& node, const void* data, std::vector<float>* scratch);

}  // namespace minfer::inspect
