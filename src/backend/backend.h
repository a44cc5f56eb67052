// The backend seam: everything the scheduler needs from a device (CPU; Vulkan; CUDA later). Models never
// name a backend; the scheduler assigns each node to the highest-priority backend whose supports_op
// accepts it (a build-time decision) and runs contiguous same-backend splits.
#pragma once

#include <cstddef>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "backend/exec_context.h"
#include "core/status.h"
#include "graph/ir.h"

namespace minfer::backend {

// A block of backend memory (host RAM for the CPU, device memory for CUDA).
class Buffer {
 public:
  virtual ~Buffer() = default;
  virtual void* base() = 0;
  virtual size_t size() const = 0;
  virtual bool host_visible() const = 0;  // the host may read/write base() directly
};

// A model tensor as the loader hands it to a backend: a view into the GGUF mapping.
struct WeightSource {
  std::string name;
  DType type = DType::F32;
  graph::Shape ne = {1, 1, 1, 1};
  const void* data = nullptr;
  size_t n_bytes = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;

  virtual std::string_view name() const = 0;
  // Higher runs first when several backends support an op (CUDA 200 > CPU 100).
  virtual int priority() const = 0;
  // Whether this backend computes on host memory (the CPU): host inputs are bound to it, and the scheduler
  // stages a device node's bytes into host memory before a host split reads them. A device backend
  // (false) must read host pointers among its sources itself (copy them in when it records the op), and
  // its buffers are reached only through upload() / download().
  virtual bool host_memory() const { return true; }
  // The device, as the placement line names it ("llvmpipe (LLVM 15.0.6, 256 bits)").
  virtual std::string device_name() const { return std::string(name()); }
  // Choices made at load that change how results are computed, for the placement line ("int8 matmul");
  // empty when there are none.
  virtual std::string arithmetic() const { return {}; }
  // Device memory still free for weights, KV and activations (0: not a device; no budget applies).
  virtual uint64_t memory_free() const { return 0; }

  // Whether this backend can execute `node` (with its sources' types as in `graph`).
  virtual bool supports_op(const graph::Graph& graph, const graph::Node& node) const = 0;
  virtual bool supports_fused(graph::OpKind op) const = 0;

  // Makes a weight available for kWeight nodes of that name (may repack; never copies what it need not).
  virtual Status register_weight(const WeightSource& weight) = 0;
  // An opaque handle the backend's own execute() understands, or nullptr if not registered here.
  virtual const void* weight_handle(const std::string& name) const = 0;

  virtual Result<std::unique_ptr<Buffer>> alloc_buffer(size_t bytes) = 0;
  // Alignment every node buffer offset must respect.
  virtual size_t buffer_alignment() const { return 64; }

  // Runs node `id`. data[i] is node i's buffer (a weight handle for kWeight nodes, nullptr for nodes
  // without data). A violated kernel invariant returns an error naming the node; it never falls back.
  virtual Status execute(const graph::Graph& graph, graph::NodeId id, std::span<void* const> data,
                         const ExecContext& ctx) = 0;
  // Submits what execute() recorded and waits for it (a no-op for the synchronous CPU backend). A device
  // error (lost device, failed submit, timeout) is returned here; it never hangs.
  virtual Status synchronize() { return {}; }

  // Copies host bytes into this backend's memory at `dst` (a pointer into one of its buffers), and back.
  // A host backend copies directly; a device backend stages the bytes and waits for queued work first.
  virtual Status upload(void* dst, const void* src, size_t bytes) {
    if (bytes) std::memcpy(dst, src, bytes);
    return {};
  }
  virtual Status download(void* dst, const void* src, size_t bytes) {
    if (bytes) std::memcpy(dst, src, bytes);
    return {};
  }
};

}  // namespace minfer::backend
