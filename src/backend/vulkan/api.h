// The Vulkan entry points minfer uses, loaded at run time from the system loader (libvulkan.so.1) with
// dlopen, so a binary built with the backend still starts, and runs on the CPU, where no loader exists.
// Every file of the backend includes Vulkan through this header (VK_NO_PROTOTYPES: no link-time loader).
#pragma once

#ifndef VK_NO_PROTOTYPES
#define VK_NO_PROTOTYPES
#endif
#include <vulkan/vulkan_core.h>

#include <string>

namespace minfer::backend::vk {

// Entry points available before an instance exists.
#define MINFER_VK_GLOBAL_FNS(X)             \
  X(vkCreateInstance)                       \
  X(vkEnumerateInstanceVersion)             \
  X(vkEnumerateInstanceExtensionProperties) \
  X(vkEnumerateInstanceLayerProperties)

// Instance and device entry points (device ones go through the loader's trampolines).
#define MINFER_VK_INSTANCE_FNS(X)             \
  X(vkDestroyInstance)                        \
  X(vkEnumeratePhysicalDevices)               \
  X(vkGetPhysicalDeviceProperties)            \
  X(vkGetPhysicalDeviceProperties2)           \
  X(vkGetPhysicalDeviceFeatures2)             \
  X(vkGetPhysicalDeviceMemoryProperties)      \
  X(vkGetPhysicalDeviceMemoryProperties2)     \
  X(vkGetPhysicalDeviceQueueFamilyProperties) \
  X(vkEnumerateDeviceExtensionProperties)     \
  X(vkCreateDevice)                           \
  X(vkDestroyDevice)                          \
  X(vkGetDeviceQueue)                         \
  X(vkCreateBuffer)                           \
  X(vkDestroyBuffer)                          \
  X(vkGetBufferMemoryRequirements)            \
  X(vkAllocateMemory)                         \
  X(vkFreeMemory)                             \
  X(vkBindBufferMemory)                       \
  X(vkMapMemory)                              \
  X(vkUnmapMemory)                            \
  X(vkCreateShaderModule)                     \
  X(vkDestroyShaderModule)                    \
  X(vkCreateDescriptorSetLayout)              \
  X(vkDestroyDescriptorSetLayout)             \
  X(vkCreatePipelineLayout)                   \
  X(vkDestroyPipelineLayout)                  \
  X(vkCreateComputePipelines)                 \
  X(vkDestroyPipeline)                        \
  X(vkCreateDescriptorPool)                   \
  X(vkDestroyDescriptorPool)                  \
  X(vkResetDescriptorPool)                    \
  X(vkAllocateDescriptorSets)                 \
  X(vkUpdateDescriptorSets)                   \
  X(vkCreateCommandPool)                      \
  X(vkDestroyCommandPool)                     \
  X(vkAllocateCommandBuffers)                 \
  X(vkFreeCommandBuffers)                     \
  X(vkResetCommandBuffer)                     \
  X(vkBeginCommandBuffer)                     \
  X(vkEndCommandBuffer)                       \
  X(vkCmdBindPipeline)                        \
  X(vkCmdBindDescriptorSets)                  \
  X(vkCmdPushConstants)                       \
  X(vkCmdDispatch)                            \
  X(vkCmdPipelineBarrier)                     \
  X(vkCmdCopyBuffer)                          \
  X(vkCreateFence)                            \
  X(vkDestroyFence)                           \
  X(vkResetFences)                            \
  X(vkWaitForFences)                          \
  X(vkQueueSubmit)                            \
  X(vkDeviceWaitIdle)

struct Api {
#define MINFER_VK_DECLARE(name) PFN_##name name = nullptr;
  MINFER_VK_GLOBAL_FNS(MINFER_VK_DECLARE)
  MINFER_VK_INSTANCE_FNS(MINFER_VK_DECLARE)
#undef MINFER_VK_DECLARE
  PFN_vkGetInstanceProcAddr get_instance_proc_addr = nullptr;
};

// VkResult as its enumerator name ("VK_ERROR_DEVICE_LOST"); "VkResult(<n>)" for codes it does not know.
std::string result_name(VkResult result);

}  // namespace minfer::backend::vk
