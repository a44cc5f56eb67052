// Layer offload: which backends run a model, how many transformer blocks go to the device, where each
// weight is registered, and the one placement line a load prints. The scheduler enforces the split of
// work through a placement callback (offload_placement); everything device-specific stays behind
// backend::Backend, so another device backend needs no change here.
//
//   block l < n_gpu_layers           -> the device, for each op its supports_op accepts (else the CPU)
//   token embedding, final norm, output head -> the device only when every block is offloaded
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "backend/backend.h"
#include "core/status.h"
#include "models/model.h"
#include "sched/scheduler.h"

namespace minfer::engine {

inline constexpr int32_t kGpuLayersDefault = -3;  // auto on a device backend, 0 without one
inline constexpr int32_t kGpuLayersAuto = -1;     // as many blocks as the memory budget holds
inline constexpr int32_t kGpuLayersAll = -2;

struct OffloadOptions {
  std::vector<std::string> backends;  // --backend / MINFER_BACKENDS ("cpu", "vulkan"); empty: the default
  int32_t device = -1;                // --gpu N: the device backend's device index; -1: its default
  int32_t gpu_layers = kGpuLayersDefault;  // N >= 0, kGpuLayersAuto, kGpuLayersAll
  uint64_t gpu_mem_bytes = 0;         // MINFER_GPU_MEM: auto's budget; 0: 3/4 of the device's free memory
  bool explicit_request = false;      // a flag or variable asked for something: print the placement line
};

// "N" (>= 0), "auto", "all" (case-insensitive); anything else is refused naming it.
Result<int32_t> parse_gpu_layers(std::string_view text);
// "cpu,vulkan": names split at commas, lower-cased; an empty name is refused. Whether a name exists is
// the registry's answer (create_backends).
Result<std::vector<std::string>> parse_backend_list(std::string_view text);
// Bytes: "1073741824", "512M", "4G", "4GiB" (K/M/G/T, powers of 1024).
Result<uint64_t> parse_memory_size(std::string_view text);

// `options` completed from MINFER_BACKENDS, MINFER_GPU_LAYERS and MINFER_GPU_MEM when it asks for
// nothing itself (no backends, device or layer count: a library user's defaults), so a whole test suite
// can run offloaded. The CLI resolves flags over these variables first.
Result<OffloadOptions> offload_from_env(OffloadOptions options);

// The transformer block a weight belongs to ("blk.7.attn_q.weight" -> 7), -1 outside the blocks.
int32_t weight_layer(std::string_view name);
// Whether a node (or weight) of `layer` belongs on the device when n_gpu of n_layer blocks are offloaded.
inline bool offloaded(int32_t layer, int32_t n_gpu, int32_t n_layer) {
  return layer >= 0 ? layer < n_gpu : n_gpu >= n_layer && n_gpu > 0;
}

struct OffloadPlan {
  backend::Backend* device = nullptr;  // the device backend in use, or nullptr (CPU only)
  backend::Backend* host = nullptr;    // the CPU
  int32_t n_layer = 0;
  int32_t n_gpu_layers = 0;
  size_t device_weight_bytes = 0;      // file bytes of the weights registered on the device
  std::vector<std::string> cpu_fallback_ops;  // ops of offloaded blocks the device does not run
};

// The number of blocks to offload for `options.gpu_layers` (refusing a count without a device).
// kv_bytes_per_layer and activation_bytes are the room auto keeps beside the weights.
Result<int32_t> resolve_gpu_layers(const OffloadOptions& options, const backend::Backend* device,
                                   const models::HParams& hp, const std::vector<backend::WeightSource>& weights,
                                   uint64_t kv_bytes_per_layer, uint64_t activation_bytes);

// Registers each weight on the backend that runs it: the device for offloaded blocks (a type the device
// refuses as unsupported stays on the CPU, so its op runs there), the CPU for the rest; then assigns a
// probe graph and registers on the CPU any device weight a CPU node reads. Out of device memory names
// the tensor and the bytes and suggests a smaller --gpu-layers.
Status register_weights(OffloadPlan& plan, const models::Model& model, sched::Scheduler& scheduler);

// A load step's failure (a weight, the KV cache, the activation arenas) with the offload it happened
// under: "offloading N of M blocks: ..." when a device is in use, and, for out of memory (kOutOfRange),
// "; try a smaller --gpu-layers". `st` must already name what was being allocated and its bytes.
Status offload_failure(const OffloadPlan& plan, const Status& st);

// The scheduler's placement for plan: device only for offloaded layers.
sched::Scheduler::Placement offload_placement(const OffloadPlan& plan);

// "placement: Vulkan (llvmpipe ...): blocks 0-11 of 24 + output; CPU: blocks 12-23; device weights 12.3 MiB;
// KV 4.0 MiB on CPU; 26 splits per step (on the CPU: attention, kv_store)".
std::string placement_line(const OffloadPlan& plan, size_t kv_bytes, const std::string& kv_backend,
                           size_t n_splits);

}  // namespace minfer::engine
