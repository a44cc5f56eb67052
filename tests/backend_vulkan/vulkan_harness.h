// Shared pieces of the Vulkan tests: opening the device under test (lavapipe is named explicitly: it is a
// CPU-type device minfer never uses by default), and running one node on the CPU backend and on Vulkan.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/vulkan/device.h"
#include "backend/vulkan/vulkan_backend.h"
#include "core/thread_pool.h"
#include "graph/ir.h"

namespace minfer::backend::test {

// The device index to test: MINFER_VULKAN_DEVICE, else the first device minfer can run on (a GPU or
// lavapipe). -1 with `why` set when there is none.
int pick_device(std::string* why);

// Opens the device under test. When there is none the test is skipped with the reason, unless
// MINFER_VULKAN_REQUIRED=1, where it fails.
std::unique_ptr<VulkanBackend> open_backend();

#define MINFER_VK_OR_SKIP(var)                                                                              \
  auto var = ::minfer::backend::test::open_backend();                                                       \
  if (!var) {                                                                                               \
    if (::minfer::backend::test::vulkan_required()) FAIL() << "MINFER_VULKAN_REQUIRED=1: no Vulkan device"; \
    GTEST_SKIP() << "no Vulkan device (install mesa-vulkan-drivers for lavapipe)";                          \
  }

bool vulkan_required();

// Under MINFER_VULKAN_VALIDATE=1 any validation message fails the test (vulkan_validation_check.cpp),
// except `n` a test provokes on purpose and declares here.
void expect_validation_messages(uint64_t n);

// `var` = the device index to test (pick_device), for tests that open it through the engine; skipped
// with the reason when there is none, failed under MINFER_VULKAN_REQUIRED=1.
#define MINFER_VK_DEVICE_OR_SKIP(var)                                                                    \
  std::string var##_why;                                                                                 \
  const int var = ::minfer::backend::test::pick_device(&var##_why);                                      \
  if (var < 0) {                                                                                         \
    if (::minfer::backend::test::vulkan_required()) FAIL() << "MINFER_VULKAN_REQUIRED=1: " << var##_why; \
    GTEST_SKIP() << var##_why;                                                                           \
  }

// One op node with its sources. Sources are weights (registered on both backends), host inputs (kInput:
// ids, positions; bound as host pointers, as the scheduler binds them) or f32 activations (uploaded into a
// Vulkan arena; plain host memory for the CPU).
struct OpCase {
  graph::Graph graph;
  std::vector<WeightSource> weights;
  std::vector<std::vector<float>> f32;    // per node: activation data (empty: none)
  std::vector<std::vector<int32_t>> i32;  // per node: host input data
  graph::NodeId target = 0;
  bool in_place = false;  // Vulkan: the output aliases source 0's storage

  graph::NodeId add_weight(const std::string& name, DType type, graph::Shape ne, const void* data,
                           size_t bytes);
  graph::NodeId add_activation(std::vector<float> values, graph::Shape ne);
  graph::NodeId add_ids(std::vector<int32_t> ids, graph::InputKind kind = graph::InputKind::kTokens);
  graph::NodeId add_op(graph::Node node);
};

// n normally distributed floats (times `scale`) from `seed`.
std::vector<float> random_floats(size_t n, uint64_t seed, float scale = 1.0f);
// A weight of n rows of k elements in `type`, quantized (or rounded) from random values.
std::vector<uint8_t> make_weight(DType type, int64_t k, int64_t n, uint64_t seed, float scale = 0.5f);
// An f32 op node with sources `src` and shape `ne`, named after its op.
graph::Node op_node(graph::OpKind op, std::vector<graph::NodeId> src, graph::Shape ne);

// A weight's type and shape: the parameter of the per-type matmul suites, named "q4_0_k416_n9".
struct WeightShape {
  DType type;
  int64_t k, n;
};
std::string weight_shape_name(const ::testing::TestParamInfo<WeightShape>& p);

std::vector<float> run_cpu(const OpCase& c);
// Runs on `vk` (a fresh arena per call); fails the test on any error and returns what it could.
std::vector<float> run_vulkan(VulkanBackend& vk, const OpCase& c);

}  // namespace minfer::backend::test
