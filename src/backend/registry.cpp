#include "backend/registry.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <mutex>
#include <thread>

#include <fmt/format.h>

#include "backend/cpu/cpu_backend.h"
#include "core/log.h"
#ifdef MINFER_HAS_VULKAN
#include "backend/vulkan/device.h"
#include "backend/vulkan/memory.h"
#include "backend/vulkan/vulkan_backend.h"
#endif

namespace minfer::backend {
namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

std::mutex hook_mu;
std::function<void(Backend&)>& device_hook() {
  static std::function<void(Backend&)> hook;
  return hook;
}

BackendListing list_cpu() {
  BackendListing b;
  b.name = "CPU";
  b.compiled = true;
  b.available = true;
  DeviceListing d;
  d.name = fmt::format("host CPU ({} threads)", std::max(1u, std::thread::hardware_concurrency()));
  d.type = "cpu";
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  d.memory_bytes = pages > 0 && page > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) : 0;
  d.usable = true;
  d.used_by_default = true;
  b.devices.push_back(d);
  return b;
}

BackendListing list_vulkan() {
  BackendListing b;
  b.name = "Vulkan";
#ifdef MINFER_HAS_VULKAN
  b.compiled = true;
  auto devices = vk::enumerate_devices();
  if (!devices.ok()) {
    b.reason = devices.status().message();
  } else if (devices->empty()) {
    b.reason = "vulkan: the loader lists no device";
  } else {
    for (const vk::DeviceInfo& info : *devices) {
      DeviceListing d;
      d.index = info.index;
      d.name = info.name;
      d.type = vk::device_type_name(info.type);
      d.memory_bytes = info.device_local_bytes;
      d.subgroup_size = info.subgroup_size;
      d.fp16 = info.fp16;
      d.int8 = info.int8;
      d.integer_dot = info.integer_dot;
      d.integer_dot_fast = info.integer_dot_fast;
      d.cooperative_matrix = info.cooperative_matrix;
      const std::string why = info.unusable_reason();
      d.usable = why.empty();
      d.used_by_default = d.usable && info.default_use();
      d.note = !why.empty() ? why : d.used_by_default ? "" : "a CPU-type device: used only when named";
      b.available = b.available || d.usable;
      b.devices.push_back(d);
    }
    if (!b.available) b.reason = "vulkan: no device can run minfer's shaders";
  }
  static bool said = false;
  if (!b.available && !said) {
    said = true;
    MINFER_LOG_INFO("{}; running on the CPU", b.reason);
  }
#else
  b.reason =
      "this build has no Vulkan backend (configure with -DMINFER_VULKAN=ON; needs libvulkan-dev and glslc)";
#endif
  return b;
}

}  // namespace

Result<std::vector<std::unique_ptr<Backend>>> create_backends(const std::vector<std::string>& names, int device) {
  std::vector<std::unique_ptr<Backend>> out;
  if (names.empty()) {
    bool use = device >= 0;  // a device named by index is used whatever its type
    if (!use) {
      for (const BackendListing& b : list_backends()) {
        for (const DeviceListing& d : b.devices) use = use || (b.name != "CPU" && d.used_by_default);
      }
    }
    if (use) {
      auto vk = create_backend("vulkan", device);
      if (!vk.ok() && device >= 0) return vk.status().with_context(fmt::format("--gpu {}: ", device));
      if (!vk.ok()) {
        MINFER_LOG_WARN("{}; running on the CPU", vk.status().message());
      } else {
        out.push_back(std::move(*vk));
      }
    }
  } else {
    bool has_device = false;
    for (const std::string& name : names) {
      if (lower(name) == "cpu") continue;  // always present, last
      MINFER_ASSIGN_OR_RETURN(auto b, create_backend(name, device));
      has_device = true;
      out.push_back(std::move(b));
    }
    if (device >= 0 && !has_device) {
      return invalid_argument("--gpu {} names a Vulkan device, but the backends asked for are CPU only", device);
    }
  }
  std::stable_sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a->priority() > b->priority(); });
  {
    std::lock_guard<std::mutex> lock(hook_mu);
    if (device_hook()) {
      for (auto& b : out) device_hook()(*b);
    }
  }
  out.push_back(std::make_unique<CpuBackend>());
  return out;
}

void set_device_backend_hook_for_testing(std::function<void(Backend&)> hook) {
  std::lock_guard<std::mutex> lock(hook_mu);
  device_hook() = std::move(hook);
}

std::vector<std::string> compiled_backends() {
#ifdef MINFER_HAS_VULKAN
  return {"CPU", "Vulkan"};
#else
  return {"CPU"};
#endif
}

std::vector<BackendListing> list_backends() {
  return {list_cpu(), list_vulkan()};
}

Result<CopyBandwidth> measure_copy_bandwidth(int device, size_t bytes, int reps) {
#ifdef MINFER_HAS_VULKAN
  MINFER_ASSIGN_OR_RETURN(auto dev, vk::Device::open(device));
  return vk::measure_copy_bandwidth(*dev, bytes, reps);
#else
  (void)device, (void)bytes, (void)reps;
  return unsupported("copy bandwidth: this build has no Vulkan backend");
#endif
}

int preferred_device(const std::vector<DeviceListing>& devices) {
  auto rank = [](const DeviceListing& d) {
    if (!d.usable) return 0;
    if (!d.used_by_default) return 1;  // CPU-type: only when nothing else is usable
    return d.type == "discrete" ? 3 : 2;
  };
  const DeviceListing* best = nullptr;
  for (const DeviceListing& d : devices) {
    if (rank(d) == 0) continue;
    if (best == nullptr || rank(d) > rank(*best) ||
        (rank(d) == rank(*best) && d.memory_bytes > best->memory_bytes))
      best = &d;
  }
  return best != nullptr ? best->index : -1;
}

Result<std::unique_ptr<Backend>> create_backend(std::string_view name, int device) {
  const std::string key = lower(name);
  if (key == "cpu") {
    if (device > 0) return invalid_argument("backend CPU has one device (0), not {}", device);
    return std::unique_ptr<Backend>(std::make_unique<CpuBackend>());
  }
  if (key != "vulkan") return invalid_argument("unknown backend '{}' (known: cpu, vulkan)", name);
  BackendListing vk_listing = list_vulkan();
  if (!vk_listing.compiled) return unsupported("backend '{}': {}", name, vk_listing.reason);
  if (!vk_listing.available)
    return unavailable("backend '{}' cannot be used on this machine: {}", name, vk_listing.reason);
#ifdef MINFER_HAS_VULKAN
  if (device < 0) device = preferred_device(vk_listing.devices);
  auto made = VulkanBackend::create(device);
  if (!made.ok()) return made.status();
  if (const char* f = std::getenv("MINFER_TEST_VULKAN_FAULT"); f != nullptr && *f != '\0') {
    auto spec = vk::parse_fault(f);
    if (!spec.ok()) return spec.status().with_context("MINFER_TEST_VULKAN_FAULT: ");
    (*made)->device().inject_fault(spec->fault, spec->nth);
    MINFER_LOG_WARN("test hook MINFER_TEST_VULKAN_FAULT={} armed on {}", f, (*made)->device_name());
  }
  return std::unique_ptr<Backend>(std::move(*made));
#else
  return unsupported("backend '{}' is not in this build", name);
#endif
}

}  // namespace minfer::backend
