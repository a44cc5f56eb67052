// Recorded-once command buffers (see tape.h).
#include "backend/vulkan/tape.h"

#include "backend/vulkan/hazards.h"

#include <algorithm>
#include <cstring>

namespace minfer::backend::vk {
namespace {

uint64_t mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  return h;
}

// Over every field a replay must match (the match itself compares them all; this only narrows it).
uint64_t hash_of(const std::vector<Dispatch>& list) {
  uint64_t h = list.size();
  for (const Dispatch& d : list) {
    h = mix(h, reinterpret_cast<uintptr_t>(d.pipeline));
    h = mix(h, (uint64_t{d.groups[0]} << 32) ^ (uint64_t{d.groups[1]} << 16) ^ d.groups[2]);
    for (uint32_t i = 0; i < d.n_bindings; ++i) {
      h = mix(h, d.bindings[i].serial);
      h = mix(h, d.bindings[i].offset ^ (d.bindings[i].range << 24) ^ (d.bindings[i].skip << 52));
    }
    for (uint32_t i = 0; i + 4 <= d.pipeline->push_bytes; i += 4) {
      uint32_t w = 0;
      std::memcpy(&w, d.push + i, 4);
      h = mix(h, w);
    }
  }
  return h;
}

}  // namespace

struct Tapes::Tape {
  Device* dev = nullptr;
  uint64_t hash = 0;
  std::vector<Dispatch> dispatches;
  VkCommandBuffer cb = VK_NULL_HANDLE;
  VkDescriptorPool pool = VK_NULL_HANDLE;
  ~Tape() {
    if (!dev->drained()) return;  // a hung device may still run it: leaked
    dev->free_command_buffer(cb);
    dev->destroy_descriptor_pool(pool);
  }
};

Tapes::Tapes(Device& dev) : dev_(dev) {}
Tapes::~Tapes() = default;

void Tapes::set_enabled(bool enabled) {
  enabled_ = enabled;
  if (!enabled) tapes_.clear();
  seen_.clear();
}

Result<std::unique_ptr<Tapes::Tape>> Tapes::record(const std::vector<Dispatch>& dispatches, uint64_t hash) {
  auto t = std::make_unique<Tape>();
  t->dev = &dev_;
  t->hash = hash;
  MINFER_ASSIGN_OR_RETURN(t->pool, dev_.create_descriptor_pool(static_cast<uint32_t>(dispatches.size())));
  MINFER_ASSIGN_OR_RETURN(t->cb, dev_.allocate_command_buffer());
  const Api& api = dev_.api();
  VkCommandBufferBeginInfo bi{};
  bi.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO;
  MINFER_RETURN_IF_ERROR(check_vk(api.vkBeginCommandBuffer(t->cb, &bi), "vkBeginCommandBuffer (tape)"));
  std::vector<VkDescriptorSetLayout> layouts(dispatches.size());
  for (size_t i = 0; i < dispatches.size(); ++i) layouts[i] = dispatches[i].pipeline->set_layout;
  std::vector<VkDescriptorSet> sets(dispatches.size());
  VkDescriptorSetAllocateInfo ai{};
  ai.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO;
  ai.descriptorPool = t->pool;
  ai.descriptorSetCount = static_cast<uint32_t>(layouts.size());
  ai.pSetLayouts = layouts.data();
  MINFER_RETURN_IF_ERROR(check_vk(api.vkAllocateDescriptorSets(dev_.handle(), &ai, sets.data()),
                                  "vkAllocateDescriptorSets (tape)"));
  Hazards hazards;
  for (size_t i = 0; i < dispatches.size(); ++i) record_one(t->cb, sets[i], dispatches[i], hazards);
  dev_.record_host_read_barrier(t->cb);
  MINFER_RETURN_IF_ERROR(check_vk(api.vkEndCommandBuffer(t->cb), "vkEndCommandBuffer (tape)"));
  t->dispatches = dispatches;
  return t;
}

Status Tapes::run_once(const std::vector<Dispatch>& dispatches) {
  MINFER_ASSIGN_OR_RETURN(VkCommandBuffer cb, dev_.command_buffer());
  Hazards hazards;
  for (const Dispatch& d : dispatches) {
    MINFER_ASSIGN_OR_RETURN(VkDescriptorSet set, dev_.allocate_descriptor_set(d.pipeline->set_layout));
    record_one(cb, set, d, hazards);
  }
  ++stats_.one_time;
  return dev_.submit_and_wait();
}

void Tapes::record_one(VkCommandBuffer cb, VkDescriptorSet set, const Dispatch& d, Hazards& hazards) {
  const bool barrier = hazards.needs_barrier(d);
  record_dispatch(dev_, cb, set, d, barrier);
  ++stats_.recorded_dispatches;
  stats_.recorded_barriers += barrier ? 1 : 0;
}

Status Tapes::run(std::vector<Dispatch>& dispatches) {
  Status st = run_list(dispatches);
  dispatches.clear();  // keeps its capacity for the next split
  return st;
}

Status Tapes::run_list(const std::vector<Dispatch>& list) {
  if (list.empty()) return dev_.submit_and_wait();
  if (!dev_.lost().ok()) return dev_.lost();
  if (!enabled_ || list.size() < kMinDispatches) return run_once(list);
  const uint64_t hash = hash_of(list);
  for (size_t i = tapes_.size(); i-- > 0;) {
    if (tapes_[i]->hash != hash || tapes_[i]->dispatches != list) continue;
    std::rotate(tapes_.begin() + static_cast<ptrdiff_t>(i), tapes_.begin() + static_cast<ptrdiff_t>(i) + 1,
                tapes_.end());  // now the most recently used
    ++stats_.replayed;
    // A failed submit leaves the tape as it was: the next step's submit of it is a fresh try.
    return dev_.submit_and_wait(tapes_.back()->cb);
  }
  if (seen_.insert(hash).second) {  // first sight: a prefill of one size, a plan's first step
    if (seen_.size() > 4 * kMaxTapes) seen_ = {hash};
    return run_once(list);
  }
  MINFER_ASSIGN_OR_RETURN(auto tape, record(list, hash));
  if (tapes_.size() >= kMaxTapes) tapes_.erase(tapes_.begin());
  tapes_.push_back(std::move(tape));
  ++stats_.recorded;
  return dev_.submit_and_wait(tapes_.back()->cb);
}

}  // namespace minfer::backend::vk
