// The CPU backend: host buffers, weights used in place from the mmap (or repacked once by the kernels
// library), and every op the Qwen models need, threaded over a persistent pool.
#pragma once

#include <deque>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/ops/ops.h"

namespace minfer::backend {

class CpuBackend final : public Backend {
 public:
  std::string_view name() const override { return "CPU"; }
  int priority() const override { return 100; }
  bool supports_op(const graph::Graph& graph, const graph::Node& node) const override;
  bool supports_fused(graph::OpKind op) const override { return op == graph::OpKind::kSwiGlu; }
  Status register_weight(const WeightSource& weight) override;
  const void* weight_handle(const std::string& name) const override;
  Result<std::unique_ptr<Buffer>> alloc_buffer(size_t bytes) override;
  Status execute(const graph::Graph& graph, graph::NodeId id, std::span<void* const> data,
                 const ExecContext& ctx) override;

  // Bytes held on the heap for 1-D weights converted to f32.
  size_t weight_heap_bytes() const { return weight_heap_bytes_; }

 private:
  struct Entry {
    cpu::CpuWeight weight;
    std::vector<float> converted;  // 1-D tensors stored in another type, converted to f32 once
  };
  std::unordered_map<std::string, std::unique_ptr<Entry>> weights_;
  size_t weight_heap_bytes_ = 0;
};

}  // namespace minfer::backend
