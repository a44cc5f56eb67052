// Compute pipelines made from the embedded SPIR-V, one per (shader, specialization constants), created on
// first use and cached; and dispatches: described (checked against the device), then recorded
// (descriptor set, push constants, barrier).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "backend/vulkan/device.h"
#include "backend/vulkan/memory.h"

namespace minfer::backend::vk {

struct Pipeline {
  VkPipeline pipeline = VK_NULL_HANDLE;
  VkPipelineLayout layout = VK_NULL_HANDLE;
  VkDescriptorSetLayout set_layout = VK_NULL_HANDLE;
  uint32_t n_bindings = 0;  // storage buffers at bindings 0..n-1 of set 0
  uint32_t push_bytes = 0;  // push constant block size
  uint32_t written_bindings = ~0u;  // bit i: binding i may be written (from the SPIR-V; hazards.h)
};

class PipelineCache {
 public:
  explicit PipelineCache(Device& dev) : dev_(dev) {}
  ~PipelineCache();
  PipelineCache(const PipelineCache&) = delete;
  PipelineCache& operator=(const PipelineCache&) = delete;

  // The pipeline of embedded shader `name` with specialization constants spec[i] at constant_id i.
  // Fails naming the shader when it is not embedded or the driver refuses it.
  Result<const Pipeline*> get(std::string_view name, uint32_t n_bindings, uint32_t push_bytes,
                              std::span<const uint32_t> spec);
  size_t size() const { return pipelines_.size(); }

 private:
  Device& dev_;
  std::map<std::string, std::unique_ptr<Pipeline>> pipelines_;
};

// One dispatch as the backend describes it, before anything is recorded: what a command buffer replayed
// later must match field for field (tape.h). Bindings are matched by buffer serial, never by handle.
struct Dispatch {
  static constexpr uint32_t kMaxPushBytes = 128;  // the minimum maxPushConstantsSize Vulkan guarantees
  const Pipeline* pipeline = nullptr;
  uint32_t groups[3] = {0, 0, 0};
  uint32_t n_bindings = 0;
  Window bindings[Device::kMaxBindings] = {};
  uint8_t push[kMaxPushBytes] = {};  // pipeline->push_bytes used, the rest zero
  bool operator==(const Dispatch&) const = default;
};

// The dispatch of `p` over groups (gx, gy, gz) with `bindings` at 0..n-1 and `push` as push constants;
// an error when the bindings or groups do not fit the pipeline and the device.
Result<Dispatch> describe_dispatch(const Device& dev, const Pipeline& p, std::span<const Window> bindings,
                                   const void* push, uint32_t gx, uint32_t gy, uint32_t gz);

// Records `d` into `cb` with `set` (a descriptor set of d.pipeline's layout, written here): when `barrier`
// (Hazards::needs_barrier), a barrier that makes every earlier shader, transfer and host write visible;
// then the dispatch.
void record_dispatch(const Device& dev, VkCommandBuffer cb, VkDescriptorSet set, const Dispatch& d,
                     bool barrier);

}  // namespace minfer::backend::vk
