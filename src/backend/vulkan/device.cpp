// Instance, physical-device probing and the logical device. The only file that opens the loader and
// resolves entry points; everything else calls through the Api table it fills.
#include "backend/vulkan/device.h"

#include <dlfcn.h>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

#include "core/env.h"
#include "core/log.h"

namespace minfer::backend::vk {
namespace {

struct Instance {
  Api api;
  VkInstance instance = VK_NULL_HANDLE;
  std::vector<VkPhysicalDevice> physical;
  std::vector<DeviceInfo> infos;
};

std::atomic<uint64_t> validation_count{0};
bool validation_on = false;

// Every message of the validation layer is a defect in minfer's use of Vulkan: logged as an error with the
// layer's text (which names the rule, the call and the objects) and counted for the tests.
// Only the layer's findings (VALIDATION type) are counted: a GENERAL message is the loader's or the
// layer's own news (an ICD manifest it could not load, say), true of the machine, not of minfer's calls.
VKAPI_ATTR VkBool32 VKAPI_CALL on_validation_message(VkDebugUtilsMessageSeverityFlagBitsEXT,
                                                     VkDebugUtilsMessageTypeFlagsEXT type,
                                                     const VkDebugUtilsMessengerCallbackDataEXT* data,
                                                     void*) {
  const char* text = data->pMessage != nullptr ? data->pMessage : "(no message)";
  if ((type & VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT) != 0) {
    validation_count.fetch_add(1);
    MINFER_LOG_ERROR("vulkan validation: {}", text);
  } else {
    MINFER_LOG_WARN("vulkan (loader or layer): {}", text);
  }
  return VK_FALSE;  // the call goes on, as it would without the layer
}

constexpr const char* kValidationLayer = "VK_LAYER_KHRONOS_validation";

bool has_extension(const std::vector<VkExtensionProperties>& exts, const char* name) {
  for (const auto& e : exts) {
    if (std::strcmp(e.extensionName, name) == 0) return true;
  }
  return false;
}

DeviceType to_type(VkPhysicalDeviceType t) {
  switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU:
      return DeviceType::kDiscrete;
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU:
      return DeviceType::kIntegrated;
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU:
      return DeviceType::kVirtual;
    case VK_PHYSICAL_DEVICE_TYPE_CPU:
      return DeviceType::kCpu;
    default:
      return DeviceType::kOther;
  }
}

DeviceInfo probe(const Api& api, VkPhysicalDevice pd, int index) {
  DeviceInfo info;
  info.index = index;
  uint32_t n_ext = 0;
  api.vkEnumerateDeviceExtensionProperties(pd, nullptr, &n_ext, nullptr);
  std::vector<VkExtensionProperties> exts(n_ext);
  api.vkEnumerateDeviceExtensionProperties(pd, nullptr, &n_ext, exts.data());

  VkPhysicalDeviceProperties base{};
  api.vkGetPhysicalDeviceProperties(pd, &base);
  info.api_version = base.apiVersion;
  const bool v12 = base.apiVersion >= VK_API_VERSION_1_2;
  const bool v13 = base.apiVersion >= VK_API_VERSION_1_3;

  VkPhysicalDeviceSubgroupProperties subgroup{};
  subgroup.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES;
  VkPhysicalDeviceDriverProperties driver{};
  driver.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES;
  VkPhysicalDeviceMaintenance3Properties maint3{};
  maint3.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES;
  VkPhysicalDeviceProperties2 props{};
  props.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2;
  props.pNext = &subgroup;
  subgroup.pNext = &maint3;
  // Whether the packed 8-bit dot product runs in hardware or is emulated (lavapipe), where there is one.
  VkPhysicalDeviceShaderIntegerDotProductProperties dot{};
  dot.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_PROPERTIES;
  void** tail = &maint3.pNext;
  if (v12 || has_extension(exts, VK_KHR_DRIVER_PROPERTIES_EXTENSION_NAME)) {
    *tail = &driver;
    tail = &driver.pNext;
  }
  if (v13 || has_extension(exts, VK_KHR_SHADER_INTEGER_DOT_PRODUCT_EXTENSION_NAME)) *tail = &dot;
  api.vkGetPhysicalDeviceProperties2(pd, &props);

  info.name = base.deviceName;
  info.type = to_type(base.deviceType);
  info.driver = driver.driverName[0] ? fmt::format("{}: {}", driver.driverName, driver.driverInfo)
                                     : fmt::format("driver {:#x}", base.driverVersion);
  info.subgroup_size = subgroup.subgroupSize;
  info.subgroup_arithmetic = (subgroup.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) != 0 &&
                             (subgroup.supportedOperations & VK_SUBGROUP_FEATURE_ARITHMETIC_BIT) != 0;
  const VkPhysicalDeviceLimits& lim = base.limits;
  info.max_storage_buffer_range = lim.maxStorageBufferRange;
  info.min_storage_buffer_offset_alignment = lim.minStorageBufferOffsetAlignment;
  info.max_allocation_bytes = maint3.maxMemoryAllocationSize;
  info.max_push_constants_bytes = lim.maxPushConstantsSize;
  info.max_shared_memory_bytes = lim.maxComputeSharedMemorySize;
  info.max_workgroup_invocations = lim.maxComputeWorkGroupInvocations;
  info.max_workgroup_size_x = lim.maxComputeWorkGroupSize[0];
  info.max_storage_buffers_per_stage = lim.maxPerStageDescriptorStorageBuffers;
  for (int i = 0; i < 3; ++i) info.max_workgroup_count[i] = lim.maxComputeWorkGroupCount[i];

  VkPhysicalDeviceFeatures2 features{};
  features.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2;
  VkPhysicalDeviceVulkan11Features f11{};
  f11.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES;
  VkPhysicalDeviceVulkan12Features f12{};
  f12.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES;
  VkPhysicalDeviceVulkan13Features f13{};
  f13.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_3_FEATURES;
  VkPhysicalDevice16BitStorageFeatures s16{};
  s16.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES;
  if (v12) {
    features.pNext = &f11;
    f11.pNext = &f12;
    if (v13) f12.pNext = &f13;
  } else {
    features.pNext = &s16;
  }
  api.vkGetPhysicalDeviceFeatures2(pd, &features);
  if (v12) {
    info.storage16 = f11.storageBuffer16BitAccess;
    info.storage8 = f12.storageBuffer8BitAccess;
    info.fp16 = f12.shaderFloat16;
    info.int8 = f12.shaderInt8;
  } else {
    info.storage16 = s16.storageBuffer16BitAccess;
  }
  info.integer_dot = (v13 && f13.shaderIntegerDotProduct) ||
                     has_extension(exts, VK_KHR_SHADER_INTEGER_DOT_PRODUCT_EXTENSION_NAME);
  info.integer_dot_fast = info.integer_dot && dot.integerDotProduct4x8BitPackedSignedAccelerated;
  info.cooperative_matrix = has_extension(exts, "VK_KHR_cooperative_matrix");

  // The heap of the first DEVICE_LOCAL memory type, the one Device::memory_type() gives device-local
  // buffers; not the sum of DEVICE_LOCAL heaps, which counts a discrete GPU's 256 MiB host-mapped window
  // twice.
  VkPhysicalDeviceMemoryProperties mem{};
  api.vkGetPhysicalDeviceMemoryProperties(pd, &mem);
  for (uint32_t t = 0; t < mem.memoryTypeCount; ++t) {
    if (mem.memoryTypes[t].propertyFlags & VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT) {
      info.device_local_heap = mem.memoryTypes[t].heapIndex;
      info.device_local_bytes = mem.memoryHeaps[info.device_local_heap].size;
      break;
    }
  }
  info.memory_budget = has_extension(exts, VK_EXT_MEMORY_BUDGET_EXTENSION_NAME);
  uint32_t n_families = 0;
  api.vkGetPhysicalDeviceQueueFamilyProperties(pd, &n_families, nullptr);
  std::vector<VkQueueFamilyProperties> families(n_families);
  api.vkGetPhysicalDeviceQueueFamilyProperties(pd, &n_families, families.data());
  for (uint32_t f = 0; f < n_families; ++f) {  // a compute-only family first (async compute), else any
    if ((families[f].queueFlags & VK_QUEUE_COMPUTE_BIT) &&
        !(families[f].queueFlags & VK_QUEUE_GRAPHICS_BIT)) {
      info.compute_queue_family = static_cast<int32_t>(f);
      break;
    }
  }
  for (uint32_t f = 0; f < n_families && info.compute_queue_family < 0; ++f) {
    if (families[f].queueFlags & VK_QUEUE_COMPUTE_BIT) info.compute_queue_family = static_cast<int32_t>(f);
  }
  return info;
}

// Opens the loader and creates the instance once per process. The instance lives until exit.
Result<const Instance*> instance() {
  static std::mutex mu;
  static std::unique_ptr<Instance> inst;
  static Status failure;
  static bool tried = false;
  std::lock_guard<std::mutex> lock(mu);
  if (tried) {
    if (!failure.ok()) return failure;
    return static_cast<const Instance*>(inst.get());
  }
  tried = true;
  auto fail = [&](Status st) -> Result<const Instance*> {
    failure = st;
    return st;
  };
  // MINFER_VULKAN_LOADER names another loader library (diagnosis, and the tests' "no loader" case).
  const char* override_name = std::getenv("MINFER_VULKAN_LOADER");
  const char* lib_name = override_name != nullptr && *override_name ? override_name : "libvulkan.so.1";
  void* lib = dlopen(lib_name, RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr && override_name == nullptr) lib = dlopen("libvulkan.so", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) return fail(unavailable("vulkan: no Vulkan loader ({}): {}", lib_name, dlerror()));
  auto out = std::make_unique<Instance>();
  Api& api = out->api;
  api.get_instance_proc_addr =
      reinterpret_cast<PFN_vkGetInstanceProcAddr>(dlsym(lib, "vkGetInstanceProcAddr"));
  if (api.get_instance_proc_addr == nullptr)
    return fail(unavailable("vulkan: the loader has no vkGetInstanceProcAddr"));
#define MINFER_VK_LOAD_GLOBAL(name) \
  api.name = reinterpret_cast<PFN_##name>(api.get_instance_proc_addr(VK_NULL_HANDLE, #name));
  MINFER_VK_GLOBAL_FNS(MINFER_VK_LOAD_GLOBAL)
#undef MINFER_VK_LOAD_GLOBAL
  if (api.vkCreateInstance == nullptr) return fail(unavailable("vulkan: the loader has no vkCreateInstance"));
  uint32_t loader_version = VK_API_VERSION_1_0;
  if (api.vkEnumerateInstanceVersion) api.vkEnumerateInstanceVersion(&loader_version);
  if (loader_version < VK_API_VERSION_1_1) {
    return fail(unavailable("vulkan: the loader supports Vulkan {}.{}; minfer needs 1.1",
                            VK_API_VERSION_MAJOR(loader_version), VK_API_VERSION_MINOR(loader_version)));
  }
  uint32_t n_ext = 0;
  api.vkEnumerateInstanceExtensionProperties(nullptr, &n_ext, nullptr);
  std::vector<VkExtensionProperties> exts(n_ext);
  api.vkEnumerateInstanceExtensionProperties(nullptr, &n_ext, exts.data());
  std::vector<const char*> enabled;
  VkInstanceCreateFlags flags = 0;
  if (has_extension(exts, "VK_KHR_portability_enumeration")) {  // MoltenVK lists its devices only with it
    enabled.push_back("VK_KHR_portability_enumeration");
    flags |= 0x00000001;  // VK_INSTANCE_CREATE_ENUMERATE_PORTABILITY_BIT_KHR
  }
  // MINFER_VULKAN_VALIDATE: the Khronos validation layer with synchronization validation (a missing or
  // misplaced barrier is a hazard it names), its messages routed to on_validation_message. A diagnosis
  // and test mode: the layer slows every call. Asked for and absent is an error, never a quiet run without.
  const Result<bool> validate = env_bool("MINFER_VULKAN_VALIDATE");
  if (!validate.ok()) return fail(validate.status());
  std::vector<const char*> layers;
  VkDebugUtilsMessengerCreateInfoEXT messenger_info{};
  const VkValidationFeatureEnableEXT validation_enables[] = {
      VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION_VALIDATION_EXT};
  VkValidationFeaturesEXT validation_features{};
  if (*validate) {
    uint32_t n_layers = 0;
    api.vkEnumerateInstanceLayerProperties(&n_layers, nullptr);
    std::vector<VkLayerProperties> available(n_layers);
    api.vkEnumerateInstanceLayerProperties(&n_layers, available.data());
    const bool have_layer = std::any_of(available.begin(), available.end(), [](const VkLayerProperties& l) {
      return std::strcmp(l.layerName, kValidationLayer) == 0;
    });
    if (!have_layer) {
      return fail(
          unavailable("vulkan: MINFER_VULKAN_VALIDATE is set but the loader finds no {} (Debian: "
                      "vulkan-validationlayers)",
                      kValidationLayer));
    }
    if (!has_extension(exts, VK_EXT_DEBUG_UTILS_EXTENSION_NAME)) {
      return fail(
          unavailable("vulkan: MINFER_VULKAN_VALIDATE is set but the loader has no {}, which "
                      "carries the layer's messages",
                      VK_EXT_DEBUG_UTILS_EXTENSION_NAME));
    }
    layers.push_back(kValidationLayer);
    enabled.push_back(VK_EXT_DEBUG_UTILS_EXTENSION_NAME);
    messenger_info.sType = VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT;
    messenger_info.messageSeverity =
        VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT;
    messenger_info.messageType =
        VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT;
    messenger_info.pfnUserCallback = on_validation_message;
    validation_features.sType = VK_STRUCTURE_TYPE_VALIDATION_FEATURES_EXT;
    validation_features.pNext = &messenger_info;  // also covers vkCreateInstance itself
    validation_features.enabledValidationFeatureCount = 1;
    validation_features.pEnabledValidationFeatures = validation_enables;
  }
  VkApplicationInfo app{};
  app.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO;
  app.pApplicationName = "minfer";
  app.pEngineName = "minfer";
  app.apiVersion = loader_version >= VK_API_VERSION_1_3 ? VK_API_VERSION_1_3 : loader_version;
  VkInstanceCreateInfo ci{};
  ci.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO;
  ci.flags = flags;
  ci.pApplicationInfo = &app;
  ci.enabledExtensionCount = static_cast<uint32_t>(enabled.size());
  ci.ppEnabledExtensionNames = enabled.data();
  ci.enabledLayerCount = static_cast<uint32_t>(layers.size());
  ci.ppEnabledLayerNames = layers.data();
  if (*validate) ci.pNext = &validation_features;
  if (Status st = check_vk(api.vkCreateInstance(&ci, nullptr, &out->instance), "vkCreateInstance");
      !st.ok()) {
    return fail(st);
  }
#define MINFER_VK_LOAD_INSTANCE(name)                                                        \
  api.name = reinterpret_cast<PFN_##name>(api.get_instance_proc_addr(out->instance, #name)); \
  if (api.name == nullptr)                                                                   \
    return fail(unavailable("vulkan: the loader has no {} (Vulkan 1.1 needed)", #name));
  MINFER_VK_INSTANCE_FNS(MINFER_VK_LOAD_INSTANCE)
#undef MINFER_VK_LOAD_INSTANCE
  if (*validate) {
    auto create_messenger = reinterpret_cast<PFN_vkCreateDebugUtilsMessengerEXT>(
        api.get_instance_proc_addr(out->instance, "vkCreateDebugUtilsMessengerEXT"));
    VkDebugUtilsMessengerEXT messenger = VK_NULL_HANDLE;  // lives as long as the instance: until exit
    if (create_messenger == nullptr) return fail(unavailable("vulkan: no vkCreateDebugUtilsMessengerEXT"));
    if (Status st = check_vk(create_messenger(out->instance, &messenger_info, nullptr, &messenger),
                             "vkCreateDebugUtilsMessengerEXT");
        !st.ok()) {
      return fail(st);
    }
    validation_on = true;
    MINFER_LOG_INFO("vulkan: {} on, with synchronization validation", kValidationLayer);
  }
  uint32_t n_dev = 0;
  if (Status st = check_vk(api.vkEnumeratePhysicalDevices(out->instance, &n_dev, nullptr),
                           "vkEnumeratePhysicalDevices");
      !st.ok()) {
    return fail(st);
  }
  out->physical.resize(n_dev);
  api.vkEnumeratePhysicalDevices(out->instance, &n_dev, out->physical.data());
  out->physical.resize(n_dev);
  for (uint32_t i = 0; i < n_dev; ++i)
    out->infos.push_back(probe(api, out->physical[i], static_cast<int>(i)));
  inst = std::move(out);
  return static_cast<const Instance*>(inst.get());
}

}  // namespace

std::string result_name(VkResult r) {
  switch (r) {
#define MINFER_VK_CASE(x) \
  case x:                 \
    return #x;
    MINFER_VK_CASE(VK_SUCCESS)
    MINFER_VK_CASE(VK_NOT_READY)
    MINFER_VK_CASE(VK_TIMEOUT)
    MINFER_VK_CASE(VK_EVENT_SET)
    MINFER_VK_CASE(VK_EVENT_RESET)
    MINFER_VK_CASE(VK_INCOMPLETE)
    MINFER_VK_CASE(VK_ERROR_OUT_OF_HOST_MEMORY)
    MINFER_VK_CASE(VK_ERROR_OUT_OF_DEVICE_MEMORY)
    MINFER_VK_CASE(VK_ERROR_INITIALIZATION_FAILED)
    MINFER_VK_CASE(VK_ERROR_DEVICE_LOST)
    MINFER_VK_CASE(VK_ERROR_MEMORY_MAP_FAILED)
    MINFER_VK_CASE(VK_ERROR_LAYER_NOT_PRESENT)
    MINFER_VK_CASE(VK_ERROR_EXTENSION_NOT_PRESENT)
    MINFER_VK_CASE(VK_ERROR_FEATURE_NOT_PRESENT)
    MINFER_VK_CASE(VK_ERROR_INCOMPATIBLE_DRIVER)
    MINFER_VK_CASE(VK_ERROR_TOO_MANY_OBJECTS)
    MINFER_VK_CASE(VK_ERROR_FORMAT_NOT_SUPPORTED)
    MINFER_VK_CASE(VK_ERROR_FRAGMENTED_POOL)
    MINFER_VK_CASE(VK_ERROR_UNKNOWN)
    MINFER_VK_CASE(VK_ERROR_OUT_OF_POOL_MEMORY)
    MINFER_VK_CASE(VK_ERROR_INVALID_EXTERNAL_HANDLE)
    MINFER_VK_CASE(VK_ERROR_FRAGMENTATION)
    MINFER_VK_CASE(VK_ERROR_INVALID_OPAQUE_CAPTURE_ADDRESS)
#undef MINFER_VK_CASE
    default:
      return fmt::format("VkResult({})", static_cast<int>(r));
  }
}

Status check_vk(VkResult r, std::string_view what) {
  if (r == VK_SUCCESS) return {};
  const StatusCode code = r == VK_ERROR_OUT_OF_DEVICE_MEMORY || r == VK_ERROR_OUT_OF_HOST_MEMORY
                              ? StatusCode::kOutOfRange
                              : StatusCode::kUnavailable;
  return Status(code, fmt::format("vulkan: {}: {}", what, result_name(r)));
}

const char* device_type_name(DeviceType type) {
  switch (type) {
    case DeviceType::kDiscrete:
      return "discrete";
    case DeviceType::kIntegrated:
      return "integrated";
    case DeviceType::kVirtual:
      return "virtual";
    case DeviceType::kCpu:
      return "cpu";
    case DeviceType::kOther:
      break;
  }
  return "other";
}

uint64_t free_memory(const MemoryState& m) {
  uint64_t free = m.has_budget ? (m.budget > m.usage ? m.budget - m.usage : 0)
                               : (m.heap_bytes > m.held ? m.heap_bytes - m.held : 0);
  if (m.shares_host_memory && m.host_available != 0) free = std::min(free, m.host_available);
  return free;
}

namespace {

uint64_t host_available_bytes() {
  std::FILE* f = std::fopen("/proc/meminfo", "r");
  if (f == nullptr) return 0;
  char line[256];
  unsigned long long kib = 0;
  while (std::fgets(line, sizeof(line), f) != nullptr) {
    if (std::sscanf(line, "MemAvailable: %llu kB", &kib) == 1) break;
  }
  std::fclose(f);
  return static_cast<uint64_t>(kib) * 1024;
}

}  // namespace

uint64_t Device::free_memory(uint64_t held) const {
  MemoryState m;
  m.heap_bytes = info_.device_local_bytes;
  m.held = held;
  if (info_.memory_budget) {
    VkPhysicalDeviceMemoryBudgetPropertiesEXT budget{};
    budget.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_BUDGET_PROPERTIES_EXT;
    VkPhysicalDeviceMemoryProperties2 props{};
    props.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_PROPERTIES_2;
    props.pNext = &budget;
    api_->vkGetPhysicalDeviceMemoryProperties2(physical_, &props);
    m.has_budget = true;
    m.budget = budget.heapBudget[info_.device_local_heap];
    m.usage = budget.heapUsage[info_.device_local_heap];
  }
  m.shares_host_memory = info_.type == DeviceType::kIntegrated || info_.type == DeviceType::kCpu;
  if (m.shares_host_memory) m.host_available = host_available_bytes();
  return vk::free_memory(m);
}

std::string DeviceInfo::unusable_reason() const {
  if (compute_queue_family < 0) return "no compute queue";
  if (api_version < VK_API_VERSION_1_1) return "Vulkan 1.1 needed";
  if (!subgroup_arithmetic) return "no subgroup arithmetic in compute shaders";
  // The shaders' needs beyond Vulkan's guaranteed minimums: 64-thread workgroups in x (guaranteed 128, so
  // never refused on a conformant device), 128 bytes of push constants (guaranteed), and attention's six
  // storage buffers in one stage (guaranteed only 4). The tiled matmul's 256 threads are optional.
  if (max_workgroup_invocations < 64 || max_workgroup_size_x < 64 || max_push_constants_bytes < 128)
    return "compute limits below what the shaders use";
  if (max_storage_buffers_per_stage < 6)
    return fmt::format("{} storage buffers per shader stage; attention binds 6",
                       max_storage_buffers_per_stage);
  return {};
}

bool validation_enabled() {
  (void)instance();
  return validation_on;
}

uint64_t validation_messages() {
  return validation_count.load();
}

Result<std::vector<DeviceInfo>> enumerate_devices() {
  MINFER_ASSIGN_OR_RETURN(const Instance* inst, instance());
  return inst->infos;
}

Result<std::unique_ptr<Device>> Device::open(int index) {
  MINFER_ASSIGN_OR_RETURN(const Instance* inst, instance());
  if (index < 0 || static_cast<size_t>(index) >= inst->infos.size()) {
    return not_found("vulkan: no device {} ({} device(s); see `minfer devices`)", index, inst->infos.size());
  }
  std::unique_ptr<Device> dev(new Device());
  dev->api_ = &inst->api;
  dev->info_ = inst->infos[static_cast<size_t>(index)];
  dev->physical_ = inst->physical[static_cast<size_t>(index)];
  const Api& api = *dev->api_;
  if (std::string why = dev->info_.unusable_reason(); !why.empty()) {
    return unsupported("vulkan: device {} ({}) cannot run minfer's shaders: {}", index, dev->info_.name, why);
  }
  api.vkGetPhysicalDeviceMemoryProperties(dev->physical_, &dev->memory_);

  uint32_t n_ext = 0;
  api.vkEnumerateDeviceExtensionProperties(dev->physical_, nullptr, &n_ext, nullptr);
  std::vector<VkExtensionProperties> exts(n_ext);
  api.vkEnumerateDeviceExtensionProperties(dev->physical_, nullptr, &n_ext, exts.data());
  std::vector<const char*> enabled;
  if (has_extension(exts, "VK_KHR_portability_subset")) enabled.push_back("VK_KHR_portability_subset");
  // The int8 matmul's OpSDot (matmul_q8.glsl) needs the feature enabled; the extension where it is not core.
  VkPhysicalDeviceShaderIntegerDotProductFeatures dot{};
  dot.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_FEATURES;
  dot.shaderIntegerDotProduct = VK_TRUE;
  if (dev->info_.integer_dot && has_extension(exts, VK_KHR_SHADER_INTEGER_DOT_PRODUCT_EXTENSION_NAME))
    enabled.push_back(VK_KHR_SHADER_INTEGER_DOT_PRODUCT_EXTENSION_NAME);

  const float priority = 1.0f;
  VkDeviceQueueCreateInfo qci{};
  qci.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO;
  qci.queueFamilyIndex = static_cast<uint32_t>(dev->info_.compute_queue_family);
  qci.queueCount = 1;
  qci.pQueuePriorities = &priority;
  VkDeviceCreateInfo dci{};
  dci.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO;
  dci.queueCreateInfoCount = 1;
  dci.pQueueCreateInfos = &qci;
  dci.enabledExtensionCount = static_cast<uint32_t>(enabled.size());
  dci.ppEnabledExtensionNames = enabled.data();
  if (dev->info_.integer_dot) dci.pNext = &dot;
  MINFER_RETURN_IF_ERROR(check_vk(api.vkCreateDevice(dev->physical_, &dci, nullptr, &dev->device_),
                                  fmt::format("vkCreateDevice({})", dev->info_.name)));
  api.vkGetDeviceQueue(dev->device_, qci.queueFamilyIndex, 0, &dev->queue_);

  VkCommandPoolCreateInfo pci{};
  pci.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO;
  pci.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
  pci.queueFamilyIndex = qci.queueFamilyIndex;
  MINFER_RETURN_IF_ERROR(check_vk(api.vkCreateCommandPool(dev->device_, &pci, nullptr, &dev->command_pool_),
                                  "vkCreateCommandPool"));
  VkCommandBufferAllocateInfo cai{};
  cai.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO;
  cai.commandPool = dev->command_pool_;
  cai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  cai.commandBufferCount = 1;
  MINFER_RETURN_IF_ERROR(check_vk(api.vkAllocateCommandBuffers(dev->device_, &cai, &dev->command_buffer_),
                                  "vkAllocateCommandBuffers"));
  VkFenceCreateInfo fci{};
  fci.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO;
  MINFER_RETURN_IF_ERROR(
      check_vk(api.vkCreateFence(dev->device_, &fci, nullptr, &dev->fence_), "vkCreateFence"));
  return dev;
}

Device::~Device() {
  if (device_ == VK_NULL_HANDLE) return;
  const Api& api = *api_;
  if (lost_.ok()) api.vkDeviceWaitIdle(device_);
  if (!drained()) return;  // hung: the device and everything on it are left to the process's exit
  for (VkDescriptorPool p : descriptor_pools_) api.vkDestroyDescriptorPool(device_, p, nullptr);
  if (fence_) api.vkDestroyFence(device_, fence_, nullptr);
  if (command_pool_) api.vkDestroyCommandPool(device_, command_pool_, nullptr);
  api.vkDestroyDevice(device_, nullptr);
}

uint32_t Device::memory_type(VkMemoryPropertyFlags required, VkMemoryPropertyFlags preferred,
                             uint32_t allowed_bits, bool* found) const {
  *found = false;
  uint32_t fallback = 0;
  bool have_fallback = false;
  for (uint32_t i = 0; i < memory_.memoryTypeCount; ++i) {
    if (!(allowed_bits & (1u << i))) continue;
    const VkMemoryPropertyFlags f = memory_.memoryTypes[i].propertyFlags;
    if ((f & required) != required) continue;
    if ((f & preferred) == preferred) {
      *found = true;
      return i;
    }
    if (!have_fallback) {
      fallback = i;
      have_fallback = true;
    }
  }
  *found = have_fallback;
  return fallback;
}

Result<FaultSpec> parse_fault(std::string_view text) {
  const size_t colon = text.find(':');
  const std::string_view kind = text.substr(0, colon);
  FaultSpec spec;
  if (kind == "oom") {
    spec.fault = Fault::kOutOfDeviceMemory;
  } else if (kind == "lost") {
    spec.fault = Fault::kDeviceLost;
  } else if (kind == "submit") {
    spec.fault = Fault::kSubmitFailed;
  } else {
    return invalid_argument("vulkan fault '{}': expected oom, lost or submit, optionally :N", text);
  }
  if (colon != std::string_view::npos) {
    const std::string_view n = text.substr(colon + 1);
    const auto [end, ec] = std::from_chars(n.data(), n.data() + n.size(), spec.nth);
    if (n.empty() || ec != std::errc() || end != n.data() + n.size() || spec.nth == 0)
      return invalid_argument("vulkan fault '{}': N must be a count >= 1", text);
  }
  return spec;
}

void Device::inject_fault(Fault fault, uint32_t nth) {
  fault_.store(fault == Fault::kNone ? 0 : (uint64_t{std::max<uint32_t>(nth, 1)} << 8) | static_cast<uint64_t>(fault));
}

Fault Device::take_fault(Fault kind) {
  uint64_t cur = fault_.load();
  for (;;) {
    if (cur == 0 || static_cast<Fault>(cur & 0xff) != kind) return Fault::kNone;
    const uint64_t left = (cur >> 8) - 1;
    const uint64_t next = left == 0 ? 0 : (left << 8) | (cur & 0xff);
    if (fault_.compare_exchange_weak(cur, next)) return left == 0 ? kind : Fault::kNone;
  }
}

bool Device::drained() {
  if (!in_flight_) return true;
  if (hung_) return false;
  const VkResult r = api_->vkWaitForFences(device_, 1, &fence_, VK_TRUE, kDrainMs * 1000000ull);
  if (r == VK_TIMEOUT) {
    hung_ = true;
    MINFER_LOG_WARN(
        "vulkan: {} still runs work submitted {} ms after its deadline; its memory is left to "
        "the process's exit",
        info_.name, kDrainMs);
    return false;
  }
  in_flight_ = false;  // finished, or the device is really lost: either way its objects may go
  return true;
}

void Device::mark_lost(std::string_view call, VkResult r) {
  lost_ = unavailable(
      "vulkan: device {} is lost ({} on {}); every later step on it fails: restart minfer, or run without "
      "--backend vulkan / with --gpu-layers 0",
      info_.name, result_name(r), call);
}

Result<VkCommandBuffer> Device::command_buffer() {
  if (!lost_.ok()) return lost_;
  if (!recording_) {
    VkCommandBufferBeginInfo bi{};
    bi.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO;
    bi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
    MINFER_RETURN_IF_ERROR(
        check_vk(api_->vkBeginCommandBuffer(command_buffer_, &bi), "vkBeginCommandBuffer"));
    recording_ = true;
  }
  return command_buffer_;
}

Result<VkDescriptorPool> Device::create_descriptor_pool(uint32_t sets) {
  if (!lost_.ok()) return lost_;
  VkDescriptorPoolSize size{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, sets * kMaxBindings};
  VkDescriptorPoolCreateInfo ci{};
  ci.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO;
  ci.maxSets = sets;
  ci.poolSizeCount = 1;
  ci.pPoolSizes = &size;
  VkDescriptorPool pool = VK_NULL_HANDLE;
  MINFER_RETURN_IF_ERROR(
      check_vk(api_->vkCreateDescriptorPool(device_, &ci, nullptr, &pool), "vkCreateDescriptorPool"));
  return pool;
}

void Device::destroy_descriptor_pool(VkDescriptorPool pool) {
  if (pool != VK_NULL_HANDLE) api_->vkDestroyDescriptorPool(device_, pool, nullptr);
}

Result<VkCommandBuffer> Device::allocate_command_buffer() {
  if (!lost_.ok()) return lost_;
  VkCommandBufferAllocateInfo cai{};
  cai.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO;
  cai.commandPool = command_pool_;
  cai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  cai.commandBufferCount = 1;
  VkCommandBuffer cb = VK_NULL_HANDLE;
  MINFER_RETURN_IF_ERROR(
      check_vk(api_->vkAllocateCommandBuffers(device_, &cai, &cb), "vkAllocateCommandBuffers"));
  return cb;
}

void Device::free_command_buffer(VkCommandBuffer cb) {
  if (cb != VK_NULL_HANDLE) api_->vkFreeCommandBuffers(device_, command_pool_, 1, &cb);
}

Result<VkDescriptorSet> Device::allocate_descriptor_set(VkDescriptorSetLayout layout) {
  constexpr uint32_t kSetsPerPool = 256;
  for (;;) {
    if (pool_in_use_ == descriptor_pools_.size()) {
      MINFER_ASSIGN_OR_RETURN(VkDescriptorPool pool, create_descriptor_pool(kSetsPerPool));
      descriptor_pools_.push_back(pool);
    }
    VkDescriptorSetAllocateInfo ai{};
    ai.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO;
    ai.descriptorPool = descriptor_pools_[pool_in_use_];
    ai.descriptorSetCount = 1;
    ai.pSetLayouts = &layout;
    VkDescriptorSet set = VK_NULL_HANDLE;
    const VkResult r = api_->vkAllocateDescriptorSets(device_, &ai, &set);
    if (r == VK_SUCCESS) return set;
    if (r != VK_ERROR_OUT_OF_POOL_MEMORY && r != VK_ERROR_FRAGMENTED_POOL) {
      return check_vk(r, "vkAllocateDescriptorSets");
    }
    ++pool_in_use_;  // this pool is full: the next one (created on demand)
  }
}

void Device::reset_after_submit() {
  for (size_t i = 0; i <= pool_in_use_ && i < descriptor_pools_.size(); ++i) {
    api_->vkResetDescriptorPool(device_, descriptor_pools_[i], 0);
  }
  pool_in_use_ = 0;
  api_->vkResetCommandBuffer(command_buffer_, 0);
  recording_ = false;
}

void Device::record_host_read_barrier(VkCommandBuffer cb) const {
  VkMemoryBarrier mb{};
  mb.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER;
  mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
  mb.dstAccessMask = VK_ACCESS_HOST_READ_BIT;
  api_->vkCmdPipelineBarrier(cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                             VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &mb, 0, nullptr, 0, nullptr);
}

Status Device::submit_and_wait() {
  if (!lost_.ok()) return lost_;
  if (!recording_) return {};
  record_host_read_barrier(command_buffer_);
  Status st = check_vk(api_->vkEndCommandBuffer(command_buffer_), "vkEndCommandBuffer");
  if (st.ok()) st = submit_wait(command_buffer_);
  if (lost_.ok()) reset_after_submit();
  return st;
}

Status Device::submit_and_wait(VkCommandBuffer recorded) {
  MINFER_RETURN_IF_ERROR(submit_and_wait());
  return submit_wait(recorded);
}

Status Device::submit_wait(VkCommandBuffer cb) {
  if (!lost_.ok()) return lost_;
  const Api& api = *api_;
  VkSubmitInfo si{};
  si.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO;
  si.commandBufferCount = 1;
  si.pCommandBuffers = &cb;
  VkResult r = api.vkQueueSubmit(queue_, 1, &si, fence_);
  if (take_fault(Fault::kSubmitFailed) != Fault::kNone && r == VK_SUCCESS) {
    api.vkWaitForFences(device_, 1, &fence_, VK_TRUE, timeout_ms_ * 1000000ull);  // let the real work drain
    r = VK_ERROR_OUT_OF_HOST_MEMORY;
  }
  if (r != VK_SUCCESS) {
    api.vkResetFences(device_, 1, &fence_);
    if (r == VK_ERROR_DEVICE_LOST) {
      mark_lost("vkQueueSubmit", r);
      return lost_;
    }
    return check_vk(r, fmt::format("vkQueueSubmit on {}", info_.name));
  }
  r = api.vkWaitForFences(device_, 1, &fence_, VK_TRUE, timeout_ms_ * 1000000ull);
  if (take_fault(Fault::kDeviceLost) != Fault::kNone) r = VK_ERROR_DEVICE_LOST;
  if (r == VK_TIMEOUT) {
    in_flight_ = true;  // not lost, only late: nothing it uses may be freed before drained()
    mark_lost(fmt::format("vkWaitForFences: no answer within {} ms", timeout_ms_), r);
    return lost_;
  }
  if (r != VK_SUCCESS) {
    mark_lost("vkWaitForFences", r);
    return lost_;
  }
  api.vkResetFences(device_, 1, &fence_);
  return {};
}

}  // namespace minfer::backend::vk
