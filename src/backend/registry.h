// The backend registry: every backend this build contains. The engine registers weights with the
// backends create_backends(names, device) returns and hands them to the scheduler; models never see this list. A device
// backend adds one entry to kEntries in registry.cpp (and its folder) when compiled in.
//
// The engine's backends come from create_backends(names, device): the device backend first (when one is
// named, or a GPU is present), the CPU always last. The scheduler joins them with copies at split
// boundaries.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "backend/backend.h"
#include "backend/copy_bandwidth.h"

namespace minfer::backend {

// Backends the engine runs on, highest priority first. The CPU is always last and always present.
// `names` empty: a Vulkan device used by default (a discrete or integrated GPU; device `device` when
// >= 0, which may then be a CPU-type device), else the CPU only; a default device that fails to open is
// logged and left out. `names` given ("cpu", "vulkan", any case): exactly those, each refused as
// create_backend refuses it; `device` >= 0 then needs a device backend among them.
Result<std::vector<std::unique_ptr<Backend>>> create_backends(const std::vector<std::string>& names = {},
                                                              int device = -1);
// Test hook (tests only): create_backends() calls `hook` with each device backend it makes, before the
// engine registers any weight there, so an engine-level test can arm a device fault for the load
// (vk::Device::inject_fault) or keep the backend to arm one mid-generation. An empty function removes it.
// Set and cleared by the test's own thread around Engine::load.
//
// The binary's counterpart, for tests that run `minfer`: MINFER_TEST_VULKAN_FAULT=oom|lost|submit[:N]
// arms each Vulkan backend create_backend() makes with that fault at its N-th allocation or submit
// (vk::parse_fault), and says so on stderr. It is a test hook, documented as one in docs/BACKENDS.md.
void set_device_backend_hook_for_testing(std::function<void(Backend&)> hook);

// Names of the backends compiled into this build ("CPU", "Vulkan").
std::vector<std::string> compiled_backends();

// One device of a backend, as `minfer devices` prints it.
struct DeviceListing {
  int index = 0;
  std::string name;
  std::string type;  // "discrete", "integrated", "virtual", "cpu", "other"
  uint64_t memory_bytes = 0;
  uint32_t subgroup_size = 0;  // 0: not applicable (the CPU)
  bool fp16 = false, int8 = false, integer_dot = false, cooperative_matrix = false;
  bool integer_dot_fast = false;  // accelerated in hardware: the int8 matmul is then the default
  bool usable = false;  // minfer can run on it
  bool used_by_default = false;
  std::string note;  // why it is not used by default, or why it is unusable
};

struct BackendListing {
  std::string name;
  bool compiled = false;   // in this build
  bool available = false;  // this machine can use it
  std::string reason;      // why not, when !available
  std::vector<DeviceListing> devices;
};

// Every backend minfer knows, compiled in or not, with its devices. Probes once (the Vulkan loader is
// opened at the first call); when Vulkan is compiled in but unusable, logs once that it runs on the CPU.
std::vector<BackendListing> list_backends();

// Copy bandwidth of Vulkan device `device` (see vk::measure_copy_bandwidth): `bytes` per copy, best of
// `reps`. kUnsupported in a build without Vulkan; the device's own error otherwise.
Result<CopyBandwidth> measure_copy_bandwidth(int device, size_t bytes, int reps);

// The device a backend named without an index runs on: a discrete GPU before an integrated one, then the
// one with more memory, then the loader's order; a usable CPU-type device (lavapipe) only when there is no
// GPU. -1 when none is usable.
int preferred_device(const std::vector<DeviceListing>& devices);

// The backend `name` (case-insensitive: "cpu", "vulkan") on device `device` (-1: preferred_device()). Three
// distinct refusals, each naming what was refused: an unknown name (kInvalidArgument), a backend this build
// does not contain (kUnsupported), and one this machine cannot use, with the reason (kUnavailable).
Result<std::unique_ptr<Backend>> create_backend(std::string_view name, int device = -1);

}  // namespace minfer::backend
