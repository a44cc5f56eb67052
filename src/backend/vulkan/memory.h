// Device memory: buffers (device-local, or host-visible and persistently mapped), uploads through a
// staging buffer and read-backs. One VkDeviceMemory per buffer. A buffer may be larger than the device's
// maxStorageBufferRange: shaders then see it through bound windows (see window()).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>

#include "backend/copy_bandwidth.h"
#include "backend/vulkan/device.h"

namespace minfer::backend::vk {

enum class MemoryKind {
  kDeviceLocal,  // fastest for the device; the host reaches it only through staging
  kHostVisible,  // host-coherent and mapped (uploads of per-step inputs, staging, read-back)
};

class DeviceBuffer {
 public:
  // `what` names the buffer in errors ("tensor 'blk.0.attn_q.weight'"). Out of memory is kOutOfRange with
  // the bytes asked for.
  static Result<std::unique_ptr<DeviceBuffer>> create(Device& dev, size_t bytes, MemoryKind kind,
                                                      std::string_view what);
  ~DeviceBuffer();
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  VkBuffer handle() const { return buffer_; }
  // Unique per process and never reused, unlike a handle (a destroyed buffer's VkBuffer value may come
  // back): what a recorded command buffer's bindings are matched by (tape.h).
  uint64_t serial() const { return serial_; }
  size_t size() const { return size_; }
  void* mapped() const { return mapped_; }  // non-null when the host can write it directly

 private:
  DeviceBuffer() = default;
  Device* dev_ = nullptr;
  VkBuffer buffer_ = VK_NULL_HANDLE;
  VkDeviceMemory memory_ = VK_NULL_HANDLE;
  size_t size_ = 0;
  void* mapped_ = nullptr;
  uint64_t serial_ = 0;
};

// A host-visible staging buffer kept for the small copies every step makes (inputs in, logits out), so they
// cost no allocation and mapping (on a GPU driver a vkAllocateMemory is tens to hundreds of microseconds):
// reused while it is big enough, replaced by a larger one when not. Copies over kMaxKept bytes (weights at
// load) stage through a buffer of their own, so no large staging buffer outlives the load.
class Staging {
 public:
  static constexpr size_t kMaxKept = size_t{16} << 20;
  // The kept buffer, grown to at least `bytes` (<= kMaxKept).
  Result<DeviceBuffer*> at_least(Device& dev, size_t bytes);

 private:
  std::unique_ptr<DeviceBuffer> kept_;
};

// Copies host bytes into [offset, offset + bytes) of `dst`: directly when it is mapped, else through a
// staging buffer (`staging`'s when given and the copy is small) in chunks of at most 64 MiB. Submits and
// waits first if work is recorded (so nothing recorded reads the new bytes early) and waits for the copy;
// costs one submit per chunk.
Status upload(Device& dev, DeviceBuffer& dst, size_t offset, const void* src, size_t bytes,
              Staging* staging = nullptr);
// Copies [offset, offset + bytes) of `src` to host memory, the same way in the other direction.
Status download(Device& dev, const DeviceBuffer& src, size_t offset, void* dst, size_t bytes,
                Staging* staging = nullptr);

// Copy bandwidth of a device, in bytes per second, best of `reps` timed copies of `bytes` each (after one
// untimed): host-visible to device-local and back (the DMA a staging upload or read-back does, without the
// host memcpy), and device-local to device-local (each byte is read and written once; the figure counts it
// once, as copy benchmarks do). `minfer devices --bandwidth` prints it; scripts/gpu_check.sh compares
// decode's weight bytes per second with device_to_device.
Result<CopyBandwidth> measure_copy_bandwidth(Device& dev, size_t bytes, int reps);

// A bindable window [offset, offset + range) of a buffer: offset aligned down to the device's
// minStorageBufferOffsetAlignment (the rest, `skip` bytes, is passed to the shader), range within
// maxStorageBufferRange and the buffer.
struct Window {
  VkBuffer buffer = VK_NULL_HANDLE;
  uint64_t serial = 0;  // DeviceBuffer::serial() of `buffer`
  uint64_t offset = 0;
  uint64_t range = 0;
  uint64_t skip = 0;  // bytes from `offset` to the first byte asked for
  bool operator==(const Window&) const = default;
};
// The window holding bytes [begin, begin + bytes) of `buf`; an error when they do not fit in one binding.
Result<Window> window(const Device& dev, const DeviceBuffer& buf, uint64_t begin, uint64_t bytes,
                      uint64_t max_range);

}  // namespace minfer::backend::vk
