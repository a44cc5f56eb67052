// Barriers only where a dispatch depends on an earlier one (see hazards.h).
#include "backend/vulkan/hazards.h"

#include <unordered_map>
#include <unordered_set>

namespace minfer::backend::vk {
namespace {

// The SPIR-V opcodes and decorations read here (SPIR-V 1.0 specification, sections 3.20 and 3.32).
constexpr uint32_t kOpTypeStruct = 30, kOpTypePointer = 32, kOpVariable = 59, kOpDecorate = 71,
                   kOpMemberDecorate = 72;
constexpr uint32_t kDecorationNonWritable = 24, kDecorationBinding = 33;
constexpr uint32_t kAllBindings = ~0u;

}  // namespace

uint32_t written_bindings(std::span<const uint32_t> spirv) {
  if (spirv.size() < 5 || spirv[0] != 0x07230203u) return kAllBindings;
  std::unordered_map<uint32_t, uint32_t> binding_of;        // variable -> binding
  std::unordered_set<uint32_t> nonwritable;                 // variables and struct types so decorated
  std::unordered_map<uint32_t, uint32_t> readonly_members;  // struct -> members decorated NonWritable
  std::unordered_map<uint32_t, uint32_t> member_count;      // struct -> members
  std::unordered_map<uint32_t, uint32_t> pointee;           // pointer type -> pointed-to type
  std::unordered_map<uint32_t, uint32_t> type_of;           // variable -> its pointer type
  for (size_t i = 5; i < spirv.size();) {
    const uint32_t words = spirv[i] >> 16, op = spirv[i] & 0xffffu;
    if (words == 0 || i + words > spirv.size()) return kAllBindings;
    const uint32_t* a = &spirv[i + 1];  // operands
    if (op == kOpDecorate && words >= 3) {
      if (a[1] == kDecorationBinding && words >= 4) binding_of[a[0]] = a[2];
      if (a[1] == kDecorationNonWritable) nonwritable.insert(a[0]);
    } else if (op == kOpMemberDecorate && words >= 4 && a[2] == kDecorationNonWritable) {
      ++readonly_members[a[0]];
    } else if (op == kOpTypeStruct && words >= 2) {
      member_count[a[0]] = words - 2;
    } else if (op == kOpTypePointer && words >= 4) {
      pointee[a[0]] = a[2];
    } else if (op == kOpVariable && words >= 4) {
      type_of[a[1]] = a[0];
    }
    i += words;
  }
  uint32_t mask = 0;
  for (const auto& [var, binding] : binding_of) {
    if (binding >= 32) return kAllBindings;
    bool readonly = nonwritable.count(var) != 0;
    if (!readonly) {
      const auto t = type_of.find(var);
      const auto s = t == type_of.end() ? pointee.end() : pointee.find(t->second);
      if (s != pointee.end()) {
        const uint32_t block = s->second;
        const auto n = member_count.find(block);
        readonly = nonwritable.count(block) != 0 ||
                   (n != member_count.end() && n->second > 0 && readonly_members[block] == n->second);
      }
    }
    if (!readonly) mask |= 1u << binding;
  }
  return mask;
}

bool Hazards::needs_barrier(const Dispatch& d) {
  const uint32_t written = d.pipeline->written_bindings;
  bool hazard = first_;
  for (uint32_t i = 0; i < d.n_bindings && !hazard; ++i) {
    const Window& w = d.bindings[i];
    const bool write = (written >> i) & 1u;
    for (const Access& a : since_barrier_) {
      if (a.serial == w.serial && a.begin < w.offset + w.range && w.offset < a.end && (write || a.write)) {
        hazard = true;
        break;
      }
    }
  }
  if (hazard) since_barrier_.clear();
  first_ = false;
  for (uint32_t i = 0; i < d.n_bindings; ++i) {
    const Window& w = d.bindings[i];
    since_barrier_.push_back({w.serial, w.offset, w.offset + w.range, ((written >> i) & 1u) != 0});
  }
  return hazard;
}

}  // namespace minfer::backend::vk
