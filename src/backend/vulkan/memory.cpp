// Buffers, staging uploads and read-backs (see memory.h).
#include "backend/vulkan/memory.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>

#include <fmt/format.h>

namespace minfer::backend::vk {
namespace {

constexpr size_t kStagingChunk = size_t{64} << 20;

// Records a buffer-to-buffer copy as its own submit (after draining whatever was recorded before). The
// barrier in front makes the writes of earlier submits (dispatches, copies, the host's) visible to the copy
// and orders it after their reads; submit_and_wait's closing barrier makes its bytes visible to the host.
Status copy_now(Device& dev, VkBuffer src, size_t src_off, VkBuffer dst, size_t dst_off, size_t bytes) {
  MINFER_RETURN_IF_ERROR(dev.submit_and_wait());
  MINFER_ASSIGN_OR_RETURN(VkCommandBuffer cb, dev.command_buffer());
  VkMemoryBarrier mb{};
  mb.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER;
  mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT | VK_ACCESS_HOST_WRITE_BIT;
  mb.dstAccessMask = VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
  dev.api().vkCmdPipelineBarrier(
      cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT | VK_PIPELINE_STAGE_HOST_BIT,
      VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 1, &mb, 0, nullptr, 0, nullptr);
  VkBufferCopy region{src_off, dst_off, bytes};
  dev.api().vkCmdCopyBuffer(cb, src, dst, 1, &region);
  return dev.submit_and_wait();
}

}  // namespace

Result<std::unique_ptr<DeviceBuffer>> DeviceBuffer::create(Device& dev, size_t bytes, MemoryKind kind,
                                                           std::string_view what) {
  if (!dev.lost().ok()) return dev.lost();
  const Api& api = dev.api();
  static std::atomic<uint64_t> next_serial{1};
  std::unique_ptr<DeviceBuffer> b(new DeviceBuffer());
  b->dev_ = &dev;
  b->serial_ = next_serial.fetch_add(1);
  b->size_ = bytes;
  const size_t alloc_bytes = std::max<size_t>(16, (bytes + 15) / 16 * 16);  // shaders read whole 32-bit words
  if (dev.info().max_allocation_bytes != 0 && alloc_bytes > dev.info().max_allocation_bytes) {
    return error(StatusCode::kOutOfRange, "vulkan: {}: {} bytes exceed {}'s largest allocation ({} bytes)",
                 what, bytes, dev.info().name, dev.info().max_allocation_bytes);
  }
  VkBufferCreateInfo bci{};
  bci.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO;
  bci.size = alloc_bytes;
  bci.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
              VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  bci.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  MINFER_RETURN_IF_ERROR(check_vk(api.vkCreateBuffer(dev.handle(), &bci, nullptr, &b->buffer_),
                                  fmt::format("vkCreateBuffer for {} ({} bytes)", what, bytes)));
  VkMemoryRequirements req{};
  api.vkGetBufferMemoryRequirements(dev.handle(), b->buffer_, &req);
  bool found = false;
  const uint32_t type =
      kind == MemoryKind::kDeviceLocal
          ? dev.memory_type(VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT,
                            req.memoryTypeBits, &found)
          : dev.memory_type(VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT,
                            VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT |
                                VK_MEMORY_PROPERTY_HOST_CACHED_BIT,
                            req.memoryTypeBits, &found);
  if (!found) return unsupported("vulkan: {}: {} has no suitable memory type", what, dev.info().name);
  VkMemoryAllocateInfo mai{};
  mai.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO;
  mai.allocationSize = req.size;
  mai.memoryTypeIndex = type;
  dev.count_allocation();
  VkResult r = dev.take_fault(Fault::kOutOfDeviceMemory) != Fault::kNone
                   ? VK_ERROR_OUT_OF_DEVICE_MEMORY
                   : api.vkAllocateMemory(dev.handle(), &mai, nullptr, &b->memory_);
  if (r != VK_SUCCESS) {
    return Status(StatusCode::kOutOfRange, fmt::format("vulkan: {}: cannot allocate {} bytes on {}: {}", what,
                                                       bytes, dev.info().name, result_name(r)));
  }
  MINFER_RETURN_IF_ERROR(
      check_vk(api.vkBindBufferMemory(dev.handle(), b->buffer_, b->memory_, 0), "vkBindBufferMemory"));
  if (kind == MemoryKind::kHostVisible) {
    MINFER_RETURN_IF_ERROR(
        check_vk(api.vkMapMemory(dev.handle(), b->memory_, 0, VK_WHOLE_SIZE, 0, &b->mapped_),
                 fmt::format("vkMapMemory for {}", what)));
  }
  return b;
}

DeviceBuffer::~DeviceBuffer() {
  if (!dev_->drained()) return;  // a hung device may still use it: leaked
  const Api& api = dev_->api();
  if (mapped_) api.vkUnmapMemory(dev_->handle(), memory_);
  if (buffer_) api.vkDestroyBuffer(dev_->handle(), buffer_, nullptr);
  if (memory_) api.vkFreeMemory(dev_->handle(), memory_, nullptr);
}

Result<DeviceBuffer*> Staging::at_least(Device& dev, size_t bytes) {
  if (kept_ == nullptr || kept_->size() < bytes) {
    kept_.reset();  // before the new one: at most one kept buffer at a time
    MINFER_ASSIGN_OR_RETURN(kept_, DeviceBuffer::create(dev, std::max<size_t>(bytes, size_t{64} << 10),
                                                        MemoryKind::kHostVisible, "staging buffer"));
  }
  return kept_.get();
}

namespace {

// The host-visible buffer a copy of `bytes` stages through: `staging`'s kept one when the copy is small,
// else a new one held in `own`.
Result<DeviceBuffer*> staging_for(Device& dev, Staging* staging, size_t bytes,
                                  std::unique_ptr<DeviceBuffer>& own, const char* what) {
  const size_t n = std::min(bytes, kStagingChunk);
  if (staging != nullptr && n <= Staging::kMaxKept) return staging->at_least(dev, n);
  MINFER_ASSIGN_OR_RETURN(own, DeviceBuffer::create(dev, n, MemoryKind::kHostVisible, what));
  return own.get();
}

}  // namespace

Status upload(Device& dev, DeviceBuffer& dst, size_t offset, const void* src, size_t bytes,
              Staging* staging_cache) {
  if (offset > dst.size() || bytes > dst.size() - offset) {
    return invalid_argument("vulkan: upload of {} bytes at {} past the end of a {}-byte buffer", bytes,
                            offset, dst.size());
  }
  if (bytes == 0) return {};
  MINFER_RETURN_IF_ERROR(dev.submit_and_wait());
  if (dst.mapped()) {
    std::memcpy(static_cast<uint8_t*>(dst.mapped()) + offset, src, bytes);
    return {};
  }
  std::unique_ptr<DeviceBuffer> own;
  MINFER_ASSIGN_OR_RETURN(DeviceBuffer * staging,
                          staging_for(dev, staging_cache, bytes, own, "staging buffer"));
  for (size_t done = 0; done < bytes;) {
    const size_t n = std::min(bytes - done, kStagingChunk);
    std::memcpy(staging->mapped(), static_cast<const uint8_t*>(src) + done, n);
    MINFER_RETURN_IF_ERROR(copy_now(dev, staging->handle(), 0, dst.handle(), offset + done, n));
    done += n;
  }
  return {};
}

Status download(Device& dev, const DeviceBuffer& src, size_t offset, void* dst, size_t bytes,
                Staging* staging_cache) {
  if (offset > src.size() || bytes > src.size() - offset) {
    return invalid_argument("vulkan: read-back of {} bytes at {} past the end of a {}-byte buffer", bytes,
                            offset, src.size());
  }
  if (bytes == 0) return {};
  MINFER_RETURN_IF_ERROR(dev.submit_and_wait());
  if (src.mapped()) {
    std::memcpy(dst, static_cast<const uint8_t*>(src.mapped()) + offset, bytes);
    return {};
  }
  std::unique_ptr<DeviceBuffer> own;
  MINFER_ASSIGN_OR_RETURN(DeviceBuffer * staging,
                          staging_for(dev, staging_cache, bytes, own, "read-back buffer"));
  for (size_t done = 0; done < bytes;) {
    const size_t n = std::min(bytes - done, kStagingChunk);
    MINFER_RETURN_IF_ERROR(copy_now(dev, src.handle(), offset + done, staging->handle(), 0, n));
    std::memcpy(static_cast<uint8_t*>(dst) + done, staging->mapped(), n);
    done += n;
  }
  return {};
}

Result<CopyBandwidth> measure_copy_bandwidth(Device& dev, size_t bytes, int reps) {
  if (bytes == 0 || reps <= 0) return invalid_argument("vulkan: bandwidth: {} bytes x {} copies", bytes, reps);
  MINFER_ASSIGN_OR_RETURN(auto host, DeviceBuffer::create(dev, bytes, MemoryKind::kHostVisible, "bandwidth host buffer"));
  MINFER_ASSIGN_OR_RETURN(auto a, DeviceBuffer::create(dev, bytes, MemoryKind::kDeviceLocal, "bandwidth device buffer"));
  MINFER_ASSIGN_OR_RETURN(auto b, DeviceBuffer::create(dev, bytes, MemoryKind::kDeviceLocal, "bandwidth device buffer"));
  std::memset(host->mapped(), 0x5a, bytes);  // touch every page before timing
  auto best = [&](VkBuffer src, VkBuffer dst) -> Result<double> {
    double fastest = 0;
    for (int i = 0; i <= reps; ++i) {  // i == 0: untimed (first-touch, clocks ramping up)
      const auto t0 = std::chrono::steady_clock::now();
      MINFER_RETURN_IF_ERROR(copy_now(dev, src, 0, dst, 0, bytes));
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (i > 0 && s > 0) fastest = std::max(fastest, static_cast<double>(bytes) / s);
    }
    return fastest;
  };
  CopyBandwidth out;
  out.bytes = bytes;
  out.reps = reps;
  MINFER_ASSIGN_OR_RETURN(out.host_to_device, best(host->handle(), a->handle()));
  MINFER_ASSIGN_OR_RETURN(out.device_to_device, best(a->handle(), b->handle()));
  MINFER_ASSIGN_OR_RETURN(out.device_to_host, best(b->handle(), host->handle()));
  return out;
}

Result<Window> window(const Device& dev, const DeviceBuffer& buf, uint64_t begin, uint64_t bytes,
                      uint64_t max_range) {
  const uint64_t align = std::max<uint64_t>(4, dev.info().min_storage_buffer_offset_alignment);
  Window w;
  w.buffer = buf.handle();
  w.serial = buf.serial();
  w.offset = begin / align * align;
  w.skip = begin - w.offset;
  const uint64_t alloc = std::max<uint64_t>(16, (buf.size() + 15) / 16 * 16);
  w.range = std::min<uint64_t>((w.skip + bytes + 3) / 4 * 4, alloc - w.offset);
  if (w.range > max_range) {
    return error(StatusCode::kOutOfRange,
                 "vulkan: a binding of {} bytes exceeds the device's storage buffer range ({})", w.range,
                 max_range);
  }
  return w;
}

}  // namespace minfer::backend::vk
