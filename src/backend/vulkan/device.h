// The Vulkan device layer: the process-wide instance (loader opened once), physical-device probing
// (properties, features, limits), and a logical device with one compute queue on which work is recorded
// into a command buffer and submitted with a bounded fence wait. Errors name the call and its VkResult;
// nothing here waits without a bound.
//
//   auto devices = vk::enumerate_devices();            // error when there is no loader or instance
//   auto dev = vk::Device::open((*devices)[0].index);  // any type, lavapipe included
//   ... dev->record(...) ... ; MINFER_RETURN_IF_ERROR(dev->submit_and_wait());
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "backend/vulkan/api.h"
#include "core/status.h"

namespace minfer::backend::vk {

enum class DeviceType { kDiscrete, kIntegrated, kVirtual, kCpu, kOther };
const char* device_type_name(DeviceType type);  // "discrete", "integrated", "virtual", "cpu", "other"

// What minfer reads from a physical device once, at enumeration.
struct DeviceInfo {
  int index = 0;  // position in vkEnumeratePhysicalDevices order, the number `minfer devices` prints
  std::string name;
  DeviceType type = DeviceType::kOther;
  std::string driver;  // driver name and info ("llvmpipe: Mesa 22.3.6 (LLVM 15.0.6)")
  uint32_t api_version = 0;
  uint64_t device_local_bytes = 0;   // size of the heap device-local buffers come from
  uint32_t device_local_heap = 0;    // its index
  bool memory_budget = false;        // VK_EXT_memory_budget: the driver says what is free
  uint32_t subgroup_size = 0;        // read, never assumed (8 lavapipe, 32 NVIDIA, 64 AMD)
  bool subgroup_arithmetic = false;  // subgroupAdd in compute shaders (the reductions need it)
  bool fp16 = false;                 // shaderFloat16
  bool int8 = false;                 // shaderInt8
  bool storage16 = false;            // storageBuffer16BitAccess
  bool storage8 = false;             // storageBuffer8BitAccess
  bool integer_dot = false;          // VK_KHR_shader_integer_dot_product (or core 1.3)
  bool integer_dot_fast = false;  // integerDotProduct4x8BitPackedSignedAccelerated: the int8 matmul default
  bool cooperative_matrix = false;   // VK_KHR_cooperative_matrix
  uint64_t max_storage_buffer_range = 0;
  uint64_t min_storage_buffer_offset_alignment = 1;
  uint64_t max_allocation_bytes = 0;  // maxMemoryAllocationSize
  uint32_t max_push_constants_bytes = 0;
  uint32_t max_shared_memory_bytes = 0;
  uint32_t max_workgroup_invocations = 0;
  uint32_t max_workgroup_size_x = 0;           // maxComputeWorkGroupSize[0] (Vulkan guarantees 128)
  uint32_t max_storage_buffers_per_stage = 0;  // maxPerStageDescriptorStorageBuffers (guaranteed 4)
  uint32_t max_workgroup_count[3] = {0, 0, 0};
  int32_t compute_queue_family = -1;  // -1: no compute queue (unusable)

  // Used without being named: a discrete or integrated GPU. A CPU-type device (lavapipe) is slower than
  // minfer's own CPU kernels and is used only when asked for by index or backend name.
  bool default_use() const { return type == DeviceType::kDiscrete || type == DeviceType::kIntegrated; }
  // Empty when minfer can run on it; otherwise why not ("no subgroup arithmetic in compute shaders").
  std::string unusable_reason() const;
};

// What auto offload may still place on a device (see Device::free_memory): the driver's budget for the
// device-local heap less its usage when it reports them (they count other processes), else the heap's size
// less what minfer holds; on a device whose heap is system memory (integrated, CPU-type), at most what the
// host has available.
struct MemoryState {
  uint64_t heap_bytes = 0;
  uint64_t held = 0;  // what minfer has allocated on the device
  bool has_budget = false;
  uint64_t budget = 0, usage = 0;  // VK_EXT_memory_budget's heapBudget and heapUsage
  bool shares_host_memory = false;
  uint64_t host_available = 0;  // MemAvailable of /proc/meminfo (0: unknown, not capped)
};
uint64_t free_memory(const MemoryState& m);

// Every Vulkan device, in the loader's order. An error (naming the cause: no libvulkan.so.1, instance
// creation refused) when Vulkan cannot be used at all; an empty list when there is a loader but no device.
// Probes once per process and caches the answer.
Result<std::vector<DeviceInfo>> enumerate_devices();

// MINFER_VULKAN_VALIDATE=1 (read when the instance is created) turns on the Khronos validation layer with
// synchronization validation; each finding it reports is logged as an error and counted here (the
// loader's general messages are logged as warnings, not counted). The Vulkan
// tests fail on any (tests/backend_vulkan/vulkan_validation_check.cpp), and scripts/tiers.sh runs them so.
bool validation_enabled();       // the layer is on (creates the instance if it was not yet)
uint64_t validation_messages();  // messages reported since the process started

// Faults a test can inject into a submit or an allocation (the device layer's test hook).
enum class Fault { kNone, kDeviceLost, kSubmitFailed, kOutOfDeviceMemory };

// "oom", "lost", "submit", optionally ":N" (the N-th such event, 1-based): the value of the test hook
// MINFER_TEST_VULKAN_FAULT (backend/registry.h). Anything else is refused naming it.
struct FaultSpec {
  Fault fault = Fault::kNone;
  uint32_t nth = 1;
};
Result<FaultSpec> parse_fault(std::string_view text);

class Device {
 public:
  // Opens device `index` of enumerate_devices(). Fails, naming the device and the reason, when it has no
  // compute queue or lacks what the shaders need. Costs a vkCreateDevice (milliseconds).
  static Result<std::unique_ptr<Device>> open(int index);
  ~Device();
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  const DeviceInfo& info() const { return info_; }
  // vk::free_memory() of this device, asking the driver now; `held`: the bytes minfer has allocated on it.
  uint64_t free_memory(uint64_t held) const;
  const Api& api() const { return *api_; }
  VkDevice handle() const { return device_; }
  VkPhysicalDevice physical() const { return physical_; }
  uint32_t memory_type(VkMemoryPropertyFlags required, VkMemoryPropertyFlags preferred, uint32_t allowed_bits,
                       bool* found) const;

  // The command buffer work is recorded into; begun on first use after a submit.
  Result<VkCommandBuffer> command_buffer();
  // Recorded last in every command buffer that is submitted: makes its dispatches' and copies' writes
  // visible to the host. A fence wait makes device writes available, not visible; without this a read of
  // mapped memory may see stale bytes on a device whose caches the host does not snoop.
  void record_host_read_barrier(VkCommandBuffer cb) const;
  bool recording() const { return recording_; }
  // Ends the command buffer, submits it and waits on its fence for at most timeout_ms. A timeout or a lost
  // device marks the device lost: every later call fails fast with that error instead of hanging.
  Status submit_and_wait();
  // Descriptor sets for this command buffer; they are recycled after submit_and_wait.
  Result<VkDescriptorSet> allocate_descriptor_set(VkDescriptorSetLayout layout);

  // For work recorded once and submitted many times (tape.h): a command buffer of its own, a descriptor
  // pool of `sets` sets of up to kMaxBindings storage buffers, and the submit of such a command buffer
  // (after whatever the one-time command buffer holds), with the same faults and bounded wait as
  // submit_and_wait(). The caller frees what it allocated, never while a submit of it is pending (none is
  // once a submit returns).
  Result<VkCommandBuffer> allocate_command_buffer();
  void free_command_buffer(VkCommandBuffer cb);
  Result<VkDescriptorPool> create_descriptor_pool(uint32_t sets);
  void destroy_descriptor_pool(VkDescriptorPool pool);
  Status submit_and_wait(VkCommandBuffer recorded);
  static constexpr uint32_t kMaxBindings = 8;  // storage buffers per descriptor set

  void set_timeout_ms(uint64_t ms) { timeout_ms_ = ms; }
  // Test hook: the nth next submit (kDeviceLost, kSubmitFailed) or allocation (kOutOfDeviceMemory) fails;
  // nth 1 is the very next one. Safe to call from another thread than the one recording (the batcher's
  // worker), which is how tests arm a fault mid-generation; one fault is armed at a time.
  void inject_fault(Fault fault, uint32_t nth = 1);
  Fault take_fault(Fault kind);  // `kind` when its armed countdown reaches this event (then disarmed)
  // Device memory allocations asked for so far (each one an event kOutOfDeviceMemory's nth counts), so a
  // test can aim a fault at a given allocation of a load.
  uint64_t allocations() const { return allocations_.load(); }
  void count_allocation() { allocations_.fetch_add(1); }
  // Non-ok once the device is lost (after a timeout or VK_ERROR_DEVICE_LOST).
  const Status& lost() const { return lost_; }
  // Whether no submitted work can still be running, so what it uses may be destroyed: true at once unless
  // a fence wait timed out. Then the work may still run, and this waits for it once, at most kDrainMs;
  // false means the device is hung, and every destructor below leaks its object (left to the process's
  // exit) rather than free memory the device may still read or write.
  bool drained();
  static constexpr uint64_t kDrainMs = 10000;

 private:
  Device() = default;
  void reset_after_submit();
  // Submits an ended command buffer, waits for it (bounded) and applies the armed submit / lost faults.
  Status submit_wait(VkCommandBuffer cb);

  const Api* api_ = nullptr;
  DeviceInfo info_;
  VkPhysicalDevice physical_ = VK_NULL_HANDLE;
  VkPhysicalDeviceMemoryProperties memory_{};
  VkDevice device_ = VK_NULL_HANDLE;
  VkQueue queue_ = VK_NULL_HANDLE;
  VkCommandPool command_pool_ = VK_NULL_HANDLE;
  VkCommandBuffer command_buffer_ = VK_NULL_HANDLE;
  VkFence fence_ = VK_NULL_HANDLE;
  std::vector<VkDescriptorPool> descriptor_pools_;
  size_t pool_in_use_ = 0;
  bool recording_ = false;
  uint64_t timeout_ms_ = 60000;
  // The armed fault and how many matching events remain until it fires, packed in one word so that
  // arming from another thread is a single atomic store: (countdown << 8) | Fault.
  std::atomic<uint64_t> fault_{0};
  std::atomic<uint64_t> allocations_{0};
  Status lost_;
  bool in_flight_ = false;  // a submit whose fence wait timed out: its work may still run
  bool hung_ = false;       // drained() waited kDrainMs for it in vain
  void mark_lost(std::string_view call, VkResult r);
};

// "vulkan: <what>: VK_ERROR_..." when r is not VK_SUCCESS.
Status check_vk(VkResult r, std::string_view what);

}  // namespace minfer::backend::vk
