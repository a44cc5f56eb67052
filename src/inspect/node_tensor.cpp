#include "inspect/node_tensor.h"

namespace minfer::inspect {

std::vector<int64_t> numpy_shape(const graph::Shape& ne) {
  size_t dims = 4;
  while (dims > 1 && ne[dims - 1] == 1) --dims;
  std::vector<int64_t> shape;
  for (size_t d = dims; d-- > 0;) shape.push_back(ne[d]);
  return shape;
}

std::string numpy_descr(DType type) {
  if (type == DType::F32) return "<f4";
  if (type == DType::I32) return "<i4";
  return "";
}

std::span<const float> node_values(const graph::Node& node, const void* data, std::vector<float>* scratch) {
  if (data == nullptr) return {};
  const auto n = static_cast<size_t>(node.n_elements());
  if (node.type == DType::F32) return {static_cast<const float*>(data), n};
  if (node.type != DType::I32) return {};
  const auto* ids = static_cast<const int32_t*>(data);
  scratch->assign(ids, ids + n);
  return *scratch;
}

}  // namespace minfer::inspect
