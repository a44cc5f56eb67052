// Pipeline creation from embedded SPIR-V and dispatch recording (see pipelines.h).
#include "backend/vulkan/pipelines.h"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "backend/vulkan/hazards.h"
#include "backend/vulkan/shaders.h"

namespace minfer::backend::vk {

PipelineCache::~PipelineCache() {
  if (!dev_.drained()) return;  // a hung device may still run them: leaked
  const Api& api = dev_.api();
  for (auto& [key, p] : pipelines_) {
    api.vkDestroyPipeline(dev_.handle(), p->pipeline, nullptr);
    api.vkDestroyPipelineLayout(dev_.handle(), p->layout, nullptr);
    api.vkDestroyDescriptorSetLayout(dev_.handle(), p->set_layout, nullptr);
  }
}

Result<const Pipeline*> PipelineCache::get(std::string_view name, uint32_t n_bindings, uint32_t push_bytes,
                                           std::span<const uint32_t> spec) {
  std::string key(name);
  for (uint32_t v : spec) key += fmt::format(":{}", v);
  if (auto it = pipelines_.find(key); it != pipelines_.end()) return it->second.get();

  const EmbeddedShader* shader = nullptr;
  for (const EmbeddedShader& s : embedded_shaders()) {
    if (s.name == name) shader = &s;
  }
  if (shader == nullptr) return not_found("vulkan: no embedded shader '{}'", name);
  const Api& api = dev_.api();
  VkDevice d = dev_.handle();
  auto p = std::make_unique<Pipeline>();
  p->n_bindings = n_bindings;
  p->push_bytes = push_bytes;
  p->written_bindings = written_bindings(shader->spirv);

  std::vector<VkDescriptorSetLayoutBinding> binds(n_bindings);
  for (uint32_t i = 0; i < n_bindings; ++i) {
    binds[i].binding = i;
    binds[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    binds[i].descriptorCount = 1;
    binds[i].stageFlags = VK_SHADER_STAGE_COMPUTE_BIT;
  }
  VkDescriptorSetLayoutCreateInfo dl{};
  dl.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO;
  dl.bindingCount = n_bindings;
  dl.pBindings = binds.data();
  MINFER_RETURN_IF_ERROR(check_vk(api.vkCreateDescriptorSetLayout(d, &dl, nullptr, &p->set_layout),
                                  fmt::format("vkCreateDescriptorSetLayout({})", name)));
  VkPushConstantRange pcr{VK_SHADER_STAGE_COMPUTE_BIT, 0, push_bytes};
  VkPipelineLayoutCreateInfo pl{};
  pl.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO;
  pl.setLayoutCount = 1;
  pl.pSetLayouts = &p->set_layout;
  pl.pushConstantRangeCount = push_bytes ? 1 : 0;
  pl.pPushConstantRanges = &pcr;
  Status st = check_vk(api.vkCreatePipelineLayout(d, &pl, nullptr, &p->layout),
                       fmt::format("vkCreatePipelineLayout({})", name));
  if (!st.ok()) {
    api.vkDestroyDescriptorSetLayout(d, p->set_layout, nullptr);
    return st;
  }
  VkShaderModuleCreateInfo mi{};
  mi.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO;
  mi.codeSize = shader->spirv.size() * sizeof(uint32_t);
  mi.pCode = shader->spirv.data();
  VkShaderModule module = VK_NULL_HANDLE;
  st = check_vk(api.vkCreateShaderModule(d, &mi, nullptr, &module),
                fmt::format("vkCreateShaderModule({})", name));
  if (st.ok()) {
    std::vector<VkSpecializationMapEntry> entries(spec.size());
    for (uint32_t i = 0; i < spec.size(); ++i) entries[i] = {i, i * 4u, 4};
    VkSpecializationInfo si{static_cast<uint32_t>(entries.size()), entries.data(),
                            spec.size() * sizeof(uint32_t), spec.data()};
    VkComputePipelineCreateInfo ci{};
    ci.sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO;
    ci.stage.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO;
    ci.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
    ci.stage.module = module;
    ci.stage.pName = "main";
    ci.stage.pSpecializationInfo = spec.empty() ? nullptr : &si;
    ci.layout = p->layout;
    st = check_vk(api.vkCreateComputePipelines(d, VK_NULL_HANDLE, 1, &ci, nullptr, &p->pipeline),
                  fmt::format("vkCreateComputePipelines({})", name));
    api.vkDestroyShaderModule(d, module, nullptr);
  }
  if (!st.ok()) {
    api.vkDestroyPipelineLayout(d, p->layout, nullptr);
    api.vkDestroyDescriptorSetLayout(d, p->set_layout, nullptr);
    return st;
  }
  const Pipeline* raw = p.get();
  pipelines_[key] = std::move(p);
  return raw;
}

Result<Dispatch> describe_dispatch(const Device& dev, const Pipeline& p, std::span<const Window> bindings,
                                   const void* push, uint32_t gx, uint32_t gy, uint32_t gz) {
  if (bindings.size() != p.n_bindings || bindings.size() > Device::kMaxBindings ||
      p.push_bytes > Dispatch::kMaxPushBytes) {
    return Status(
        StatusCode::kInternal,
        fmt::format("vulkan: dispatch with {} bindings for a pipeline of {} (at most {}) with {} push "
                    "bytes (at most {})",
                    bindings.size(), p.n_bindings, Device::kMaxBindings, p.push_bytes,
                    Dispatch::kMaxPushBytes));
  }
  const DeviceInfo& info = dev.info();
  if (gx > info.max_workgroup_count[0] || gy > info.max_workgroup_count[1] ||
      gz > info.max_workgroup_count[2]) {
    return Status(
        StatusCode::kInternal,
        fmt::format("vulkan: dispatch of {}x{}x{} groups exceeds {}x{}x{}", gx, gy, gz,
                    info.max_workgroup_count[0], info.max_workgroup_count[1], info.max_workgroup_count[2]));
  }
  Dispatch d;
  d.pipeline = &p;
  d.groups[0] = gx;
  d.groups[1] = gy;
  d.groups[2] = gz;
  d.n_bindings = static_cast<uint32_t>(bindings.size());
  std::copy(bindings.begin(), bindings.end(), d.bindings);
  if (p.push_bytes) std::memcpy(d.push, push, p.push_bytes);
  return d;
}

void record_dispatch(const Device& dev, VkCommandBuffer cb, VkDescriptorSet set, const Dispatch& d,
                     bool barrier) {
  const Pipeline& p = *d.pipeline;
  const Api& api = dev.api();
  VkDescriptorBufferInfo infos[Device::kMaxBindings];
  VkWriteDescriptorSet writes[Device::kMaxBindings];
  for (uint32_t i = 0; i < d.n_bindings; ++i) {
    infos[i] = {d.bindings[i].buffer, d.bindings[i].offset, d.bindings[i].range};
    writes[i] = {};
    writes[i].sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET;
    writes[i].dstSet = set;
    writes[i].dstBinding = i;
    writes[i].descriptorCount = 1;
    writes[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    writes[i].pBufferInfo = &infos[i];
  }
  api.vkUpdateDescriptorSets(dev.handle(), d.n_bindings, writes, 0, nullptr);
  if (barrier) {
    VkMemoryBarrier mb{};
    mb.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER;
    mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT | VK_ACCESS_HOST_WRITE_BIT;
    mb.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT;
    api.vkCmdPipelineBarrier(
        cb,
        VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT | VK_PIPELINE_STAGE_HOST_BIT,
        VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1, &mb, 0, nullptr, 0, nullptr);
  }
  api.vkCmdBindPipeline(cb, VK_PIPELINE_BIND_POINT_COMPUTE, p.pipeline);
  api.vkCmdBindDescriptorSets(cb, VK_PIPELINE_BIND_POINT_COMPUTE, p.layout, 0, 1, &set, 0, nullptr);
  if (p.push_bytes)
    api.vkCmdPushConstants(cb, p.layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, p.push_bytes, d.push);
  api.vkCmdDispatch(cb, d.groups[0], d.groups[1], d.groups[2]);
}

}  // namespace minfer::backend::vk
