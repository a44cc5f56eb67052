// The Vulkan backend: weights in device-local memory (uploaded once through a staging buffer), node
// buffers in device arenas, and the ops it has shaders for: execute() describes each dispatch, and
// synchronize() submits the split's list as one command buffer, replayed when the same list ran before
// (tape.h: a cached plan's decode step records nothing). Only this class is polymorphic; device, memory,
// pipelines and tapes below it are plain code.
//
// Node buffers are device memory the host cannot touch: alloc_buffer() returns a Buffer whose base() is a
// reserved, inaccessible address range (PROT_NONE), and a node pointer inside it names (arena, offset).
// Read and write them with upload() / download(). A source pointer outside every arena is host memory
// (a bound input, a CPU node): it is copied into a host-visible ring when the op is described, each copy
// in a slot of a power of two bytes, so a plan's copies land at the same offsets every step and its
// dispatches stay equal as a window list grows (the condition for a replay).
//
//   auto vk = VulkanBackend::create(device_index);     // lavapipe too, when named
//   (*vk)->register_weight(w);                          // device-local copy
//   (*vk)->execute(graph, id, data, ctx);               // records
//   MINFER_RETURN_IF_ERROR((*vk)->synchronize());       // submits, waits (bounded), reports device errors
//
// The KV cache (kv_store and attention): ExecContext::kv[layer].k and .v must point into buffers from
// alloc_buffer(), the same (arena, offset) pointers as node buffers, at a 4-byte aligned offset, each
// holding n_cells rows of row_bytes (f32, f16 or q8_0; KvLayerView). The host reads and writes cell rows
// with download() / upload() on those pointers (e.g. `upload(kv.k + cell * row_bytes, row, row_bytes)`),
// which wait for recorded work first; owns() tells a device pointer from a host one. A layer's K (and V)
// region must fit one storage binding (device_info().max_storage_buffer_range: 128 MiB on lavapipe, 4 GiB
// on most GPUs); a larger one is refused by name at execute(). KV pointers outside every arena (a host
// cache) are refused, never copied, since kv_store's writes would be lost.
//
// One thread at a time (the scheduler's). Buffers from alloc_buffer() must be destroyed before the backend.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "backend/backend.h"
#include "backend/vulkan/device.h"
#include "backend/vulkan/memory.h"
#include "backend/vulkan/pipelines.h"
#include "backend/vulkan/tape.h"

namespace minfer::backend {

class VulkanBackend final : public Backend {
 public:
  // Opens Vulkan device `device_index` (see vk::enumerate_devices). Fails naming the device and reason.
  static Result<std::unique_ptr<VulkanBackend>> create(int device_index);
  ~VulkanBackend() override;

  std::string_view name() const override { return "Vulkan"; }
  int priority() const override { return 200; }
  bool host_memory() const override { return false; }
  std::string device_name() const override { return dev_->info().name; }
  // The device-local heaps less what this backend holds (weights and live buffers); Vulkan 1.1 has no
  // portable budget query, so other processes' use is not seen.
  uint64_t memory_free() const override;
  // Exactly the ops and types there are shaders for (docs/BACKENDS.md has the table): matmul with weights
  // of every type the CPU computes (F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K)
  // registered here and f32 activations; get_rows from such a weight or an f32 activation; rms_norm, add,
  // mul, silu, swiglu, rope (neox) and reshape on f32; kv_store of f32 K/V; attention with f32 q and heads of
  // up to 256 dimensions. The cache type is not in the graph: execute() refuses any but f32, f16 and q8_0
  // (and q8_0 heads that are not a multiple of 32) by name.
  bool supports_op(const graph::Graph& graph, const graph::Node& node) const override;
  bool supports_fused(graph::OpKind op) const override { return op == graph::OpKind::kSwiGlu; }
  // Uploads the weight to device-local memory. 1-D tensors are converted to f32 first (as the CPU does).
  // A type without shaders is refused (kUnsupported, naming tensor and type); out of device memory is
  // kOutOfRange naming the tensor and the bytes.
  Status register_weight(const WeightSource& weight) override;
  const void* weight_handle(const std::string& name) const override;
  Result<std::unique_ptr<Buffer>> alloc_buffer(size_t bytes) override;
  size_t buffer_alignment() const override;
  Status execute(const graph::Graph& graph, graph::NodeId id, std::span<void* const> data,
                 const ExecContext& ctx) override;
  Status synchronize() override;
  Status upload(void* dst, const void* src, size_t bytes) override;
  Status download(void* dst, const void* src, size_t bytes) override;

  // Whether [ptr, ptr + bytes) lies inside one buffer from alloc_buffer() (device memory the host must reach
  // through upload() / download()).
  bool owns(const void* ptr, size_t bytes) const {
    uint64_t off = 0;
    auto a = find_arena(ptr, bytes, &off);
    return a.ok() && *a != nullptr;
  }

  const vk::DeviceInfo& device_info() const { return dev_->info(); }
  vk::Device& device() { return *dev_; }
  // Device bytes held by registered weights.
  size_t weight_bytes() const { return weight_bytes_; }
  // Test hook: bind windows of at most `bytes` (a multiple of 16), as if maxStorageBufferRange were that
  // small, so the windowed paths run on small tensors. 0 restores the device's limit.
  void set_max_binding_bytes(uint64_t bytes) { max_binding_override_ = bytes; }
  // Test hook: a matmul of more than `n` tokens runs the tiled shader (matmat.comp), of up to `n` the
  // matrix-vector one (default 8; 0: always tiled; UINT32_MAX: never). Both give the same bits.
  void set_matvec_max_tokens(uint32_t n) { matvec_max_tokens_ = n; }
  // The matmul arithmetic for quantized weights: int8 (activations quantized on the device exactly as the
  // CPU quantizes them, integer dot products: shaders/matmul_q8.glsl) or f32 (shaders/matmul.glsl). Chosen
  // at create(): the boolean MINFER_VULKAN_INT_DOT when set, else int8 where the device's packed 4x8-bit
  // dot product is accelerated (not lavapipe's). F32, F16 and BF16 weights always take the f32 path.
  bool int8_matmul() const { return int8_matmul_; }
  // Switches the path (what the variable does; tests). kUnsupported on a device without integer dot.
  Status set_int8_matmul(bool on);
  std::string arithmetic() const override { return int8_matmul_ ? "int8 matmul" : "f32 matmul"; }
  // Activation quantizations the int8 path has described (matmuls over the same node in one split share
  // one).
  uint64_t activation_quantizations() const { return act_quantizations_; }
  // Recorded-once command buffers: how many splits replayed one, recorded one, or were recorded once.
  const vk::Tapes::Stats& tape_stats() const { return tapes_->stats(); }
  // Test hook: false records every split anew (no replay); results must not change.
  void set_tapes_enabled(bool enabled) { tapes_->set_enabled(enabled); }

  // Test hook: split weights into allocations of at most `bytes`, as if maxMemoryAllocationSize were that
  // small, so the parted paths run on small tensors. Applies to weights registered afterwards; 0 restores
  // the device's limit.
  void set_max_allocation_bytes(uint64_t bytes) { max_allocation_override_ = bytes; }

  // Rows of row_bytes in device memory: a weight's parts, or one node buffer's rows from `offset`.
  struct RowTable {
    std::vector<const vk::DeviceBuffer*> parts;  // part i holds rows [i * part_rows, (i + 1) * part_rows)
    uint64_t part_rows = 0;
    uint64_t offset = 0;  // of row 0 in parts[0] (a node buffer's; 0 for a weight)
    uint64_t rows = 0;
    uint64_t row_bytes = 0;
  };

  struct Weight {
    DType type = DType::F32;
    int64_t ne0 = 0;  // elements per row
    int64_t ne1 = 0;  // rows
    size_t row_bytes = 0;
    // ne1 rows of row_bytes, row-major as in the file: one part, unless the tensor is larger than the
    // device's largest allocation (maxMemoryAllocationSize: 1 GiB on SwiftShader, about 4 GiB on most GPUs).
    std::vector<std::unique_ptr<vk::DeviceBuffer>> parts;
    // The same parts as matmul and get_rows bind them, made once at registration (not at every step).
    RowTable table;
  };

 private:
  struct Arena;
  struct Tensor {  // where a node's bytes live for a binding
    const vk::DeviceBuffer* buffer = nullptr;
    uint64_t offset = 0;
    uint64_t slot = 0;  // a ring copy: the bytes of its slot, which bind() binds whole (else 0)
  };
  explicit VulkanBackend(std::unique_ptr<vk::Device> dev);
  // execute() without the node context on errors.
  Status record(const graph::Graph& graph, graph::NodeId id, std::span<void* const> data,
                const ExecContext& ctx);
  uint64_t max_binding() const;
  uint64_t max_allocation() const;  // 0: no limit
  // The arena holding [ptr, ptr + bytes) and the offset there; nullptr when ptr is in no arena; an error
  // when the range starts in one and runs past its end.
  Result<const Arena*> find_arena(const void* ptr, size_t bytes, uint64_t* offset) const;
  // The device location of `bytes` at `ptr`: an arena range, or host memory copied into the upload ring.
  Result<Tensor> locate(const void* ptr, size_t bytes);
  Result<vk::Window> bind(const Tensor& t, uint64_t bytes) const;
  Result<const vk::Pipeline*> pipeline(std::string_view shader, uint32_t n_bindings, uint32_t push_bytes,
                                       std::initializer_list<uint32_t> spec);
  Status dispatch(const vk::Pipeline& p, std::initializer_list<vk::Window> bindings, const void* push,
                  uint64_t groups);

  // kv_store and attention (record() for those ops).
  Status kv_op(const graph::Graph& graph, graph::NodeId id, std::span<void* const> data,
               const ExecContext& ctx);
  // The device location of one layer's K or V cells; they must be in an arena (see the header comment).
  Result<Tensor> locate_cells(const void* ptr, size_t bytes, const char* what, int32_t layer) const;
  // The int8 path's quantized activations: which node's tokens, in which format. A matmul of the same
  // split over the same node and tokens (Q, K and V; gate and up) reads act_q8_ as the last one left it.
  struct QuantizedActs {
    const graph::Graph* graph = nullptr;
    graph::NodeId node = 0;  // the activations' node in `graph` (its bytes are final within a split)
    uint32_t fmt = 0;        // FMT of quantize_q8.comp
    uint64_t k = 0, t0 = 0, m = 0;
    bool operator==(const QuantizedActs&) const = default;
  };
  // `x` holds the activations of node `x_node` of `graph` (the int8 path's key for reusing them).
  Status matmul(const Weight& w, const graph::Graph& graph, graph::NodeId x_node, const Tensor& x,
                const Tensor& y, int64_t m);
  // Describes quantize_q8.comp over `key.m` tokens from `key.t0` of the activations at x (its first
  // token), for a `weight_type` weight, into act_q8_ (grown as needed) unless act_q8_ already holds them;
  // returns where the quantized tokens start.
  Result<Tensor> quantize_activations(const QuantizedActs& key, const Tensor& x);
  // The binding of rows [row0, row0 + n) of `t`, at most `max_rows` and never past row0's part: `n` is
  // set to the rows bound.
  Result<vk::Window> bind_rows(const RowTable& t, uint64_t row0, uint64_t max_rows, uint64_t* n) const;
  Status get_rows(const graph::Node& node, DType type, const RowTable& table, const Tensor& ids, int64_t n,
                  const Tensor& out);

  std::unique_ptr<vk::Device> dev_;
  std::unique_ptr<vk::PipelineCache> pipelines_;
  std::unordered_map<std::string, std::unique_ptr<Weight>> weights_;
  size_t weight_bytes_ = 0;
  std::shared_ptr<size_t> buffer_bytes_ = std::make_shared<size_t>(0);  // live alloc_buffer() bytes
  uint64_t max_binding_override_ = 0;
  uint64_t max_allocation_override_ = 0;
  uint32_t matvec_max_tokens_ = 8;  // kMaxCols
  bool int8_matmul_ = false;
  std::unique_ptr<vk::DeviceBuffer> act_q8_;  // the int8 path's quantized activations, reused by every matmul
  std::vector<std::unique_ptr<vk::DeviceBuffer>> act_q8_retired_;  // outgrown, read by unsubmitted work
  std::optional<QuantizedActs> act_q8_holds_;  // what act_q8_ holds for the split being described
  uint64_t act_quantizations_ = 0;
  std::shared_ptr<std::map<uintptr_t, Arena*>> arenas_;  // by base address; shared with the arenas
  // Host data copied for the described work (bound inputs, CPU nodes), recycled after each submit.
  std::vector<std::unique_ptr<vk::DeviceBuffer>> ring_;
  size_t ring_used_ = 0;  // bytes used in ring_.back()
  std::unique_ptr<vk::Tapes> tapes_;
  vk::Staging staging_;                // upload() and download(): the per-step copies
  std::vector<vk::Dispatch> pending_;  // the split so far, submitted by synchronize()
  void reset_ring();
  // Drops what a failed node's split had described, so no part of a failed step ever runs.
  void abandon();
};

}  // namespace minfer::backend
