// The SPIR-V of every shader in shaders/, compiled by glslc at build time and embedded in the binary
// (the generated source is written by cmake/MinferVulkan.cmake).
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

namespace minfer::backend::vk {

struct EmbeddedShader {
  std::string_view name;  // file name without .comp ("matvec")
  std::span<const uint32_t> spirv;
};

std::span<const EmbeddedShader> embedded_shaders();

}  // namespace minfer::backend::vk
