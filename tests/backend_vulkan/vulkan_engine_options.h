// The engine options of the Vulkan tests that load a model through the engine (offload, tapes, faults):
// a small context, 2 threads, quiet, and the offload asked for. Tests change what they need afterwards.
// And the engine's Vulkan backend, for the tests that look at its counters.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "backend/vulkan/vulkan_backend.h"
#include "engine/engine.h"

namespace minfer::backend::test {

inline engine::EngineOptions vulkan_engine_options(int device, int32_t gpu_layers = engine::kGpuLayersAll,
                                                   std::vector<std::string> backends = {"vulkan"}) {
  engine::EngineOptions o;
  o.n_ctx = 64;
  o.n_threads = 2;
  o.quiet = true;
  o.offload.backends = std::move(backends);
  o.offload.device = device;
  o.offload.gpu_layers = gpu_layers;
  return o;
}

// The Vulkan backend `e` runs on, or nullptr.
inline VulkanBackend* vulkan_of(engine::Engine& e) {
  for (Backend* b : e.backends()) {
    if (auto* vk = dynamic_cast<VulkanBackend*>(b)) return vk;
  }
  return nullptr;
}

}  // namespace minfer::backend::test
