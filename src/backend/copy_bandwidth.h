// A device's measured copy bandwidth (`minfer devices --bandwidth`; for Vulkan see
// vk::measure_copy_bandwidth): bytes per second, best of `reps` copies of `bytes` each.
#pragma once

#include <cstddef>

namespace minfer::backend {

struct CopyBandwidth {
  size_t bytes = 0;
  int reps = 0;
  double host_to_device = 0, device_to_host = 0, device_to_device = 0;
};

}  // namespace minfer::backend
