// Which dispatches of a command buffer need a barrier first. A barrier before every dispatch (the simple
// rule) makes a GPU drain between independent dispatches, such as Q, K and V's matmuls over the same
// activations, or gate's and up's. Here a dispatch waits only when one of its bindings reads bytes an
// earlier dispatch since the last barrier wrote (read after write), or writes bytes one read or wrote
// (write after read, write after write). Which bindings a shader writes is read from its SPIR-V: a
// `readonly` buffer block is never written. Correctness is checked by the validation layer's
// synchronization validation (scripts/tiers.sh vulkan), which reports any hazard a missing barrier leaves.
//
//   Hazards h;                                         // one per command buffer
//   for (const Dispatch& d : list) record_dispatch(dev, cb, set, d, h.needs_barrier(d));
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "backend/vulkan/pipelines.h"

namespace minfer::backend::vk {

// Bit i set when the shader may write the storage buffer at binding i of set 0: every binding whose block
// (or variable) is not decorated NonWritable. Malformed SPIR-V gives all bits (every binding written).
uint32_t written_bindings(std::span<const uint32_t> spirv);

class Hazards {
 public:
  // Whether `d` must wait for the dispatches recorded before it; then it starts a new interval. The first
  // dispatch of a command buffer always waits (host, transfer and earlier submits' writes become visible).
  bool needs_barrier(const Dispatch& d);

 private:
  struct Access {
    uint64_t serial = 0;  // DeviceBuffer::serial() of the bound buffer
    uint64_t begin = 0, end = 0;
    bool write = false;
  };
  bool first_ = true;
  std::vector<Access> since_barrier_;  // what the dispatches since the last barrier bound
};

}  // namespace minfer::backend::vk
