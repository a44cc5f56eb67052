// The device layer and the registry on the Vulkan device under test: probing, buffers larger than one
// binding, staging round trips, honest supports_op, injected faults (lost device, failed submit, out of
// device memory) that return named errors and never hang, and `minfer devices`.
#include <gtest/gtest.h>

#include <cctype>
#include <cstdio>
#include <cstring>
#include <regex>

#include "backend/registry.h"
#include "backend/vulkan/memory.h"
#include "backend_vulkan/vulkan_harness.h"
#include "core/env.h"

namespace minfer::backend::test {
namespace {

using graph::Node;
using graph::OpKind;

TEST(VulkanDevice, ProbesTheDeviceUnderTest) {
  MINFER_VK_OR_SKIP(vk);
  const vk::DeviceInfo& info = vk->device_info();
  EXPECT_FALSE(info.name.empty());
  EXPECT_GT(info.subgroup_size, 0u);  // read from the device, never assumed
  EXPECT_TRUE(info.subgroup_arithmetic);
  EXPECT_GT(info.max_storage_buffer_range, 0u);
  EXPECT_GT(info.device_local_bytes, 0u);
  EXPECT_GE(info.compute_queue_family, 0);
  if (info.type == vk::DeviceType::kCpu) {
    EXPECT_FALSE(info.default_use());  // lavapipe only when named
  }
}

// Limits the shaders rely on beyond Vulkan's guaranteed minimums refuse the device by name; the ones
// every conformant device has are read, not assumed.
TEST(VulkanDevice, LimitsBelowWhatTheShadersUseAreNamed) {
  MINFER_VK_OR_SKIP(vk);
  const vk::DeviceInfo& real = vk->device_info();
  EXPECT_GE(real.max_workgroup_size_x, 128u);
  EXPECT_GE(real.max_storage_buffers_per_stage, 4u);
  EXPECT_EQ(real.unusable_reason(), "");
  vk::DeviceInfo few_buffers = real;
  few_buffers.max_storage_buffers_per_stage = 4;
  EXPECT_EQ(few_buffers.unusable_reason(), "4 storage buffers per shader stage; attention binds 6");
  vk::DeviceInfo narrow = real;
  narrow.max_workgroup_size_x = 32;
  EXPECT_EQ(narrow.unusable_reason(), "compute limits below what the shaders use");
}

// The `vulkan` tier's own check (MINFER_VULKAN_VALIDATE=1): two copies into the same bytes with no barrier
// between are reported as a hazard, so a barrier missing from minfer's recordings would be too.
TEST(VulkanValidation, AMissingBarrierIsReportedWhenValidationIsOn) {
  if (!env_flag("MINFER_VULKAN_VALIDATE")) GTEST_SKIP() << "MINFER_VULKAN_VALIDATE is not set";
  MINFER_VK_OR_SKIP(vk);
  ASSERT_TRUE(vk::validation_enabled());
  vk::Device& dev = vk->device();
  auto a = vk::DeviceBuffer::create(dev, 256, vk::MemoryKind::kDeviceLocal, "a");
  auto b = vk::DeviceBuffer::create(dev, 256, vk::MemoryKind::kDeviceLocal, "b");
  ASSERT_TRUE(a.ok() && b.ok());
  const uint64_t before = vk::validation_messages();
  auto cb = dev.command_buffer();
  ASSERT_TRUE(cb.ok()) << cb.status().message();
  const VkBufferCopy region{0, 0, 256};
  dev.api().vkCmdCopyBuffer(*cb, (*a)->handle(), (*b)->handle(), 1, &region);
  dev.api().vkCmdCopyBuffer(*cb, (*a)->handle(), (*b)->handle(), 1, &region);
  ASSERT_TRUE(dev.submit_and_wait().ok());
  const uint64_t reported = vk::validation_messages() - before;
  EXPECT_GE(reported, 1u) << "the write-after-write hazard went unreported";
  expect_validation_messages(reported);
}

TEST(VulkanDevice, RegistryListsVulkanAndRefusesDistinctly) {
  const std::vector<BackendListing> list = list_backends();
  ASSERT_EQ(list.size(), 2u);
  EXPECT_EQ(list[0].name, "CPU");
  EXPECT_TRUE(list[0].devices[0].used_by_default);
  EXPECT_EQ(list[1].name, "Vulkan");
  EXPECT_TRUE(list[1].compiled);
  for (const DeviceListing& d : list[1].devices) {
    if (d.type == "cpu") {
      EXPECT_FALSE(d.used_by_default) << d.name;
    }
  }
  auto unknown = create_backend("metal");
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(unknown.status().message().find("'metal'"), std::string::npos);
  auto cpu = create_backend("CPU");
  ASSERT_TRUE(cpu.ok());
  EXPECT_EQ((*cpu)->name(), "CPU");
  if (!list[1].available) {
    auto vk = create_backend("vulkan");
    ASSERT_FALSE(vk.ok());
    EXPECT_EQ(vk.status().code(), StatusCode::kUnavailable) << vk.status().message();
    return;
  }
  auto vk = create_backend("Vulkan");  // case-insensitive; lavapipe is taken when it is all there is
  ASSERT_TRUE(vk.ok()) << vk.status().message();
  EXPECT_EQ((*vk)->name(), "Vulkan");
  auto missing = create_backend("vulkan", 1000);
  EXPECT_FALSE(missing.ok());
}

// Without an index a discrete GPU is taken before an integrated one, more memory before less, and a
// CPU-type device (lavapipe) only when nothing else is usable, whatever the loader's order.
TEST(VulkanDevice, PreferredDeviceRanksGpusByTypeThenMemory) {
  auto dev = [](int index, const char* type, uint64_t gib, bool usable = true) {
    DeviceListing d;
    d.index = index;
    d.type = type;
    d.memory_bytes = gib << 30;
    d.usable = usable;
    d.used_by_default = usable && std::string(type) != "cpu";
    return d;
  };
  EXPECT_EQ(preferred_device({}), -1);
  EXPECT_EQ(preferred_device({dev(0, "cpu", 8, false)}), -1);
  EXPECT_EQ(preferred_device({dev(0, "cpu", 64), dev(1, "integrated", 16), dev(2, "discrete", 8)}), 2);
  EXPECT_EQ(preferred_device({dev(0, "discrete", 24, false), dev(1, "integrated", 16), dev(2, "cpu", 64)}),
            1);
  EXPECT_EQ(preferred_device({dev(0, "discrete", 24), dev(1, "discrete", 80), dev(2, "discrete", 80)}), 1);
  EXPECT_EQ(preferred_device({dev(0, "cpu", 8), dev(1, "cpu", 16)}), 1);
}

// Auto offload's free memory: the driver's budget less its usage where VK_EXT_memory_budget reports them
// (other processes count), else the heap less what minfer holds; on a device whose heap is system memory,
// never more than the host has available.
TEST(VulkanDevice, FreeMemoryUsesTheBudgetAndTheHostsMemory) {
  const uint64_t gib = uint64_t{1} << 30;
  vk::MemoryState m;
  m.heap_bytes = 80 * gib;
  m.held = 30 * gib;
  EXPECT_EQ(vk::free_memory(m), 50 * gib);
  m.held = 90 * gib;
  EXPECT_EQ(vk::free_memory(m), 0u);
  m.has_budget = true;  // another process holds 20 GiB: the budget says so, `held` no longer matters
  m.budget = 78 * gib;
  m.usage = 50 * gib;
  EXPECT_EQ(vk::free_memory(m), 28 * gib);
  m.usage = 79 * gib;
  EXPECT_EQ(vk::free_memory(m), 0u);
  vk::MemoryState igpu;  // an integrated GPU reporting 32 GiB of heap on a host with 6 GiB available
  igpu.heap_bytes = 32 * gib;
  igpu.shares_host_memory = true;
  igpu.host_available = 6 * gib;
  EXPECT_EQ(vk::free_memory(igpu), 6 * gib);
  igpu.host_available = 0;  // unknown: not capped
  EXPECT_EQ(vk::free_memory(igpu), 32 * gib);
  MINFER_VK_OR_SKIP(vk);  // and the real device's answer is within its heap
  EXPECT_LE(vk->memory_free(), vk->device_info().device_local_bytes);
}

// The per-step copies (inputs up, logits down) reuse one staging buffer: after the first, no allocation.
TEST(VulkanDevice, StepCopiesReuseOneStagingBuffer) {
  MINFER_VK_OR_SKIP(vk);
  const size_t n = 151936;  // a Qwen vocabulary's logits
  auto arena = vk->alloc_buffer(n * 4);
  ASSERT_TRUE(arena.ok()) << arena.status().message();
  void* base = (*arena)->base();
  std::vector<float> in = random_floats(n, 5), out(n);
  ASSERT_TRUE(vk->upload(base, in.data(), n * 4).ok());
  ASSERT_TRUE(vk->download(out.data(), base, n * 4).ok());
  const uint64_t before = vk->device().allocations();
  for (int step = 0; step < 3; ++step) {
    in = random_floats(n, 6 + static_cast<uint64_t>(step));
    ASSERT_TRUE(vk->upload(base, in.data(), n * 4).ok());
    ASSERT_TRUE(vk->download(out.data(), base, n * 4).ok());
    ASSERT_EQ(std::memcmp(in.data(), out.data(), n * 4), 0) << "step " << step;
  }
  EXPECT_EQ(vk->device().allocations(), before);
}

// More bytes than the staging chunk (64 MiB) and than lavapipe's maxStorageBufferRange (128 MiB): the
// upload goes through several staging copies and get_rows reads the table through several windows.
TEST(VulkanDevice, TableLargerThanOneBinding) {
  MINFER_VK_OR_SKIP(vk);
  const int64_t d = 1024;
  const int64_t rows = static_cast<int64_t>(vk->device_info().max_storage_buffer_range / (d * 4)) + 37;
  if (rows * d * 4 > (int64_t{1} << 31)) GTEST_SKIP() << "device binding range too large to exceed cheaply";
  std::vector<float> table(static_cast<size_t>(rows * d));
  for (size_t i = 0; i < table.size(); ++i) table[i] = static_cast<float>(i % 100003) * 0.5f;
  OpCase c;
  const auto tid = c.add_weight("big", DType::F32, {d, rows, 1, 1}, table.data(), table.size() * 4);
  const std::vector<int32_t> ids = {static_cast<int32_t>(rows - 1), 0, static_cast<int32_t>(rows / 2), 12345};
  const auto iid = c.add_ids(ids);
  Node n;
  n.op = OpKind::kGetRows;
  n.src = {tid, iid};
  n.ne = {d, static_cast<int64_t>(ids.size()), 1, 1};
  c.add_op(n);
  const std::vector<float> got = run_vulkan(*vk, c);
  ASSERT_EQ(got.size(), ids.size() * static_cast<size_t>(d));
  for (size_t t = 0; t < ids.size(); ++t) {
    ASSERT_EQ(std::memcmp(got.data() + t * static_cast<size_t>(d),
                          table.data() + static_cast<size_t>(ids[t]) * static_cast<size_t>(d),
                          static_cast<size_t>(d) * 4),
              0)
        << "row " << ids[t];
  }
}

TEST(VulkanDevice, SupportsOpIsHonest) {
  MINFER_VK_OR_SKIP(vk);
  std::vector<uint8_t> iq4(144 * 2);  // IQ4_NL: 8 blocks of 18 bytes per row
  Status st = vk->register_weight({"k_quant", DType::IQ4_NL, {256, 2, 1, 1}, iq4.data(), iq4.size()});
  EXPECT_EQ(st.code(), StatusCode::kUnsupported);
  EXPECT_NE(st.message().find("'k_quant'"), std::string::npos) << st.message();
  OpCase c;
  const auto w = c.add_weight("k_quant", DType::IQ4_NL, {256, 2, 1, 1}, iq4.data(), iq4.size());
  const auto x = c.add_activation(std::vector<float>(256), {256, 1, 1, 1});
  Node mm;
  mm.op = OpKind::kMatMul;
  mm.src = {w, x};
  mm.ne = {2, 1, 1, 1};
  c.add_op(mm);
  EXPECT_FALSE(vk->supports_op(c.graph, c.graph.node(c.target)));  // no IQ4_NL shader (nor CPU kernel)
  Node kv;
  kv.op = OpKind::kKvStore;
  kv.src = {x, x};
  const auto store = c.add_op(kv);
  EXPECT_TRUE(vk->supports_op(c.graph, c.graph.node(c.target)));  // f32 K and V (the cache type: at execute)
  Node att;
  att.op = OpKind::kAttention;
  att.src = {x, store};
  c.add_op(att);
  EXPECT_FALSE(vk->supports_op(c.graph, c.graph.node(c.target)));  // no heads
  att.params.n_head = 2;
  att.params.n_head_kv = 1;
  att.params.head_dim = 128;
  c.add_op(att);
  EXPECT_TRUE(vk->supports_op(c.graph, c.graph.node(c.target)));
  att.params.n_head_kv = 3;  // 2 query heads cannot share 3 KV heads
  c.add_op(att);
  EXPECT_FALSE(vk->supports_op(c.graph, c.graph.node(c.target)));
  att.params.n_head_kv = 1;
  att.params.head_dim = 320;  // wider than attention.comp's 256
  c.add_op(att);
  EXPECT_FALSE(vk->supports_op(c.graph, c.graph.node(c.target)));
}

// One elementwise op, recorded, with an injected fault at its submit.
Status run_add(VulkanBackend& vk) {
  OpCase c;
  const auto a = c.add_activation(std::vector<float>(16, 1.0f), {16, 1, 1, 1});
  const auto b = c.add_activation(std::vector<float>(16, 2.0f), {16, 1, 1, 1});
  Node n;
  n.op = OpKind::kAdd;
  n.src = {a, b};
  n.ne = {16, 1, 1, 1};
  c.add_op(n);
  auto arena = vk.alloc_buffer(3 * 256);
  if (!arena.ok()) return arena.status();
  auto* base = static_cast<uint8_t*>((*arena)->base());
  std::vector<void*> data = {base, base + 256, base + 512};
  MINFER_RETURN_IF_ERROR(vk.execute(c.graph, c.target, data, ExecContext{}));
  return vk.synchronize();
}

TEST(VulkanDevice, InjectedFaultsAreNamedErrors) {
  MINFER_VK_OR_SKIP(vk);
  ASSERT_TRUE(run_add(*vk).ok());
  vk->device().inject_fault(vk::Fault::kSubmitFailed);
  Status st = run_add(*vk);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("vkQueueSubmit"), std::string::npos) << st.message();
  ASSERT_TRUE(run_add(*vk).ok()) << "a failed submit does not lose the device";

  vk->device().inject_fault(vk::Fault::kOutOfDeviceMemory);
  std::vector<float> w(64);
  st = vk->register_weight({"blk.0.ffn_up.weight", DType::F32, {8, 8, 1, 1}, w.data(), w.size() * 4});
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), StatusCode::kOutOfRange);
  EXPECT_NE(st.message().find("blk.0.ffn_up.weight"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("256 bytes"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("VK_ERROR_OUT_OF_DEVICE_MEMORY"), std::string::npos) << st.message();

  vk->device().inject_fault(vk::Fault::kDeviceLost);
  st = run_add(*vk);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("VK_ERROR_DEVICE_LOST"), std::string::npos) << st.message();
  st = run_add(*vk);  // every later call fails fast with the same error
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("VK_ERROR_DEVICE_LOST"), std::string::npos) << st.message();
}

// A submit that outlives the fence wait (here a wait of 0 ms, right after submitting a matmul of a 16 MiB
// weight over 32 tokens: a few hundred ms on lavapipe; on a GPU 256 MiB over 512 tokens, 34 GFLOP, still
// milliseconds where the small one could finish within the submit's own latency) marks the device lost with
// the timeout named, and every later call fails fast. The timed-out work is still running: tearing down
// must wait for it (bounded) rather than free the buffers under it (the validation tier reports a buffer
// destroyed while in use).
TEST(VulkanDevice, ASubmitPastTheTimeoutIsANamedErrorAndTeardownWaitsForTheWork) {
  MINFER_VK_OR_SKIP(vk);
  const bool gpu = vk->device_info().type != vk::DeviceType::kCpu;
  const int64_t k = gpu ? 8192 : 2048, n = k, m = gpu ? 512 : 32;
  OpCase c;
  std::vector<float> w(static_cast<size_t>(k * n), 0.5f);
  const auto wid = c.add_weight("w", DType::F32, {k, n, 1, 1}, w.data(), w.size() * 4);
  const auto xid = c.add_activation(std::vector<float>(static_cast<size_t>(k * m), 1.0f), {k, m, 1, 1});
  c.add_op(op_node(OpKind::kMatMul, {wid, xid}, {n, m, 1, 1}));
  ASSERT_TRUE(vk->register_weight(c.weights[0]).ok());
  auto arena = vk->alloc_buffer(static_cast<size_t>(k * m + n * m) * 4);
  ASSERT_TRUE(arena.ok()) << arena.status().message();
  auto* base = static_cast<uint8_t*>((*arena)->base());
  ASSERT_TRUE(vk->upload(base, c.f32[xid].data(), c.f32[xid].size() * 4).ok());
  std::vector<void*> data = {const_cast<void*>(vk->weight_handle("w")), base, base + k * m * 4};
  vk->device().set_timeout_ms(0);
  ASSERT_TRUE(vk->execute(c.graph, c.target, data, ExecContext{}).ok());
  Status st = vk->synchronize();
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("no answer within 0 ms"), std::string::npos) << st.message();
  st = vk->execute(c.graph, c.target, data, ExecContext{});  // every later call fails fast
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("is lost"), std::string::npos) << st.message();
  arena->reset();  // the arena, the weight and the device go while the matmul may still run
  vk.reset();
}

#ifdef MINFER_BINARY
std::string run_binary(const std::string& command, int* status) {
  FILE* p = popen(command.c_str(), "r");
  if (p == nullptr) return {};
  std::string out;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof(buf), p)) out.append(buf, n);
  *status = pclose(p);
  return out;
}

// Without a loader, or with a loader but no driver, `minfer devices` still works: the CPU is listed as used
// by default and Vulkan as unavailable with the reason.
TEST(VulkanDevice, NoLoaderOrNoDeviceFallsBackToTheCpu) {
  int status = -1;
  std::string out =
      run_binary("MINFER_VULKAN_LOADER=/nonexistent/libvulkan.so.1 " MINFER_BINARY " devices 2>&1", &status);
  EXPECT_EQ(status, 0) << out;
  EXPECT_NE(out.find("unavailable: vulkan: no Vulkan loader (/nonexistent/libvulkan.so.1)"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("host CPU"), std::string::npos) << out;
  out = run_binary("VK_ICD_FILENAMES=/nonexistent.json VK_DRIVER_FILES=/nonexistent.json " MINFER_BINARY
                   " devices 2>&1",
                   &status);
  EXPECT_EQ(status, 0) << out;
  EXPECT_NE(out.find("unavailable: vulkan:"), std::string::npos) << out;
  EXPECT_NE(out.find("host CPU"), std::string::npos) << out;
}

// Validation asked for where the loader finds no layer is refused by name, never a quiet run without it:
// VK_LAYER_PATH replaces the loader's search for explicit layers, so it finds none here.
TEST(VulkanDevice, ValidationAskedForWithoutTheLayerIsRefusedByName) {
  int status = -1;
  const std::string out = run_binary(
      "VK_LAYER_PATH=/nonexistent VK_ADD_LAYER_PATH= MINFER_VULKAN_VALIDATE=1 " MINFER_BINARY " devices 2>&1",
      &status);
  EXPECT_EQ(status, 0) << out;  // the CPU still runs; Vulkan is listed as unavailable with the reason
  EXPECT_NE(out.find("unavailable: vulkan: MINFER_VULKAN_VALIDATE is set but the loader finds no "
                     "VK_LAYER_KHRONOS_validation (Debian: vulkan-validationlayers)"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("host CPU"), std::string::npos) << out;
}

TEST(VulkanDevice, DevicesCommandListsBackends) {
  FILE* p = popen(MINFER_BINARY " devices 2>&1", "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof(buf), p)) out.append(buf, n);
  ASSERT_EQ(pclose(p), 0) << out;
  EXPECT_NE(out.find("CPU"), std::string::npos) << out;
  EXPECT_NE(out.find("Vulkan"), std::string::npos) << out;
  EXPECT_NE(out.find("subgroup"), std::string::npos) << out;
  for (const BackendListing& b : list_backends()) {
    for (const DeviceListing& d : b.devices) {
      EXPECT_NE(out.find(d.name), std::string::npos) << d.name << "\n" << out;
      if (d.type == "cpu" && b.name == "Vulkan") {
        EXPECT_NE(out.find("used only when named"), std::string::npos) << out;
      }
    }
  }
}

// --bandwidth measures each usable device's copies (kept small here: 4 MiB, lavapipe is the host's memcpy)
// and prints one line per device with the three figures; the JSON carries them in bytes per second.
TEST(VulkanDevice, DevicesBandwidthMeasuresEachUsableDevice) {
  MINFER_VK_OR_SKIP(vk);
  const int index = vk->device_info().index;
  int status = -1;
  std::string out = run_binary(MINFER_BINARY " devices --bandwidth --bandwidth-mib 4 --gpu " +
                                   std::to_string(index) + " 2>&1",
                               &status);
  ASSERT_EQ(status, 0) << out;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(out, m, std::regex("bandwidth: Vulkan [0-9]+ \\(.*\\): host->device ([0-9.]+) GB/s, "
                                                   "device->host ([0-9.]+) GB/s, device->device ([0-9.]+) GB/s "
                                                   "\\(copies of 4 MiB, best of 5\\)")))
      << out;
  for (int i = 1; i <= 3; ++i) EXPECT_GT(std::stod(m[i].str()), 0.0) << out;
  out = run_binary(MINFER_BINARY " devices --json --bandwidth --bandwidth-mib 4 --gpu " + std::to_string(index), &status);
  ASSERT_EQ(status, 0) << out;
  EXPECT_NE(out.find("\"device_to_device_bytes_per_s\""), std::string::npos) << out;
  out = run_binary(MINFER_BINARY " devices --bandwidth --gpu 99 2>&1", &status);
  EXPECT_NE(status, 0) << out;
  EXPECT_NE(out.find("--bandwidth: no usable Vulkan device 99"), std::string::npos) << out;
}
#endif

}  // namespace
}  // namespace minfer::backend::test

namespace minfer::backend::test {
namespace {

// docs/BACKENDS.md's op coverage table, row by row, against each backend's supports_op: one node per row.
TEST(VulkanDevice, OpCoverageTableMatchesSupportsOp) {
  FILE* f = std::fopen(MINFER_SOURCE_DIR "/docs/BACKENDS.md", "r");
  ASSERT_NE(f, nullptr);
  std::string doc;
  char buf[4096];
  while (size_t n = std::fread(buf, 1, sizeof(buf), f)) doc.append(buf, n);
  std::fclose(f);
  const size_t at = doc.find("## Op coverage");
  ASSERT_NE(at, std::string::npos);
  std::unique_ptr<VulkanBackend> vk = open_backend();
  CpuBackend cpu;
  int rows = 0;
  size_t pos = doc.find("| matmul", at);
  while (pos != std::string::npos && doc.compare(pos, 1, "|") == 0) {
    const size_t eol = doc.find('\n', pos);
    std::string line = doc.substr(pos, eol - pos);
    pos = eol == std::string::npos ? eol : eol + 1;
    std::vector<std::string> cells;
    for (size_t s = 1, e; (e = line.find('|', s)) != std::string::npos; s = e + 1) {
      std::string cell = line.substr(s, e - s);
      cell.erase(0, cell.find_first_not_of(' '));
      cell.erase(cell.find_last_not_of(' ') + 1);
      cells.push_back(cell);
    }
    ASSERT_EQ(cells.size(), 4u) << line;
    const std::string& op = cells[0];
    const std::string& types = cells[1];
    ++rows;
    OpCase c;
    std::vector<uint8_t> wbytes;
    auto weight = [&](int64_t k, int64_t n) {
      DType t = DType::F32;
      for (DType cand : {DType::F32, DType::F16, DType::BF16, DType::Q4_0, DType::Q4_1, DType::Q5_0,
                         DType::Q5_1, DType::Q8_0, DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::IQ4_NL}) {
        std::string name(dtype_name(cand));
        for (char& ch : name) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
        if (types == name) t = cand;
      }
      wbytes.assign(*row_bytes(t, k) * static_cast<size_t>(n), 0);
      return c.add_weight("w", t, {k, n, 1, 1}, wbytes.data(), wbytes.size());
    };
    Node node;
    node.type = DType::F32;
    if (op == "matmul") {
      const auto w = weight(256, 2);
      const auto x = c.add_activation(std::vector<float>(256), {256, 1, 1, 1});
      node.op = OpKind::kMatMul;
      node.src = {w, x};
      node.ne = {2, 1, 1, 1};
    } else if (op == "get_rows") {
      const auto t = types == "f32 activation" ? c.add_activation(std::vector<float>(256 * 2), {256, 2, 1, 1})
                                               : weight(256, 2);
      node.op = OpKind::kGetRows;
      node.src = {t, c.add_ids({1})};
      node.ne = {256, 1, 1, 1};
    } else if (op == "rms_norm") {
      wbytes.assign(64 * sizeof(float), 0);  // 64 zero floats
      const auto x = c.add_activation(std::vector<float>(64), {64, 1, 1, 1});
      node.op = OpKind::kRmsNorm;
      node.src = {x, c.add_weight("norm", DType::F32, {64, 1, 1, 1}, wbytes.data(), wbytes.size())};
      node.ne = {64, 1, 1, 1};
    } else if (op == "add" || op == "mul" || op == "swiglu" || op == "silu") {
      const auto a = c.add_activation(std::vector<float>(64), {64, 1, 1, 1});
      node.op = op == "add"    ? OpKind::kAdd
                : op == "mul"  ? OpKind::kMul
                : op == "silu" ? OpKind::kSilu
                               : OpKind::kSwiGlu;
      node.src = {a};
      if (op != "silu") node.src.push_back(c.add_activation(std::vector<float>(64), {64, 1, 1, 1}));
      node.ne = {64, 1, 1, 1};
    } else if (op == "gelu" || op == "scale" || op == "softcap") {  // gemma3's unary ops
      node.op = op == "gelu" ? OpKind::kGelu : op == "scale" ? OpKind::kScale : OpKind::kSoftcap;
      node.src = {c.add_activation(std::vector<float>(64), {64, 1, 1, 1})};
      node.params.scale = 2.0f;
      node.ne = {64, 1, 1, 1};
    } else if (op == "rope") {
      const auto x = c.add_activation(std::vector<float>(128), {64, 2, 1, 1});
      node.op = OpKind::kRope;
      node.src = {x, c.add_ids({0}, graph::InputKind::kPositions)};
      node.params.n_rot = 64;
      node.params.rope_freq_base = 10000.0f;
      if (types.find("normal") != std::string::npos) node.params.rope_mode = graph::RopeMode::kNormal;
      node.ne = {64, 2, 1, 1};
    } else if (op == "kv_store") {
      const auto k = c.add_activation(std::vector<float>(64), {64, 1, 1, 1});
      node.op = OpKind::kKvStore;
      node.src = {k, c.add_activation(std::vector<float>(64), {64, 1, 1, 1})};
    } else if (op == "attention") {  // "head_dim N": heads of N dimensions, GQA 2
      const int32_t hd = std::stoi(types.substr(types.find("head_dim ") + 9));
      const auto q = c.add_activation(std::vector<float>(static_cast<size_t>(hd) * 2), {hd, 2, 1, 1});
      Node store;
      store.op = OpKind::kKvStore;
      store.src = {q, q};
      node.op = OpKind::kAttention;
      node.src = {q, c.add_op(store)};
      node.params.n_head = 2;
      node.params.n_head_kv = 1;
      node.params.head_dim = hd;
      node.params.scale = 1.0f;
      if (types.find("sliding window") != std::string::npos) node.params.n_swa = 8;
      node.ne = {hd * 2, 1, 1, 1};
    } else if (op == "mul_mat_id") {  // 2 experts of {256, 2} in the row's type; 1 token choosing expert 1
      DType t = DType::F32;
      for (DType cand : {DType::F32, DType::Q8_0, DType::Q4_K}) {
        std::string name(dtype_name(cand));
        for (char& ch : name) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
        if (types == name + " experts") t = cand;
      }
      wbytes.assign(*row_bytes(t, 256) * 4, 0);
      const auto w = c.add_weight("w", t, {256, 2, 2, 1}, wbytes.data(), wbytes.size());
      node.op = OpKind::kMatMulId;
      node.src = {w, c.add_activation(std::vector<float>(256), {256, 1, 1, 1}), c.add_ids({1})};
      node.ne = {2, 1, 1, 1};
    } else if (op == "moe_route" || op == "moe_weights" || op == "moe_sum") {
      const auto logits = c.add_activation(std::vector<float>(8), {8, 1, 1, 1});
      const auto ids = c.add_ids({3, 5});
      node.op = op == "moe_route" ? OpKind::kMoeRoute : op == "moe_weights" ? OpKind::kMoeWeights : OpKind::kMoeSum;
      node.src = {logits};
      if (op == "moe_route") {
        node.type = DType::I32;
        node.params.n_expert_used = 2;
      } else if (op == "moe_weights") {
        node.src.push_back(ids);
      } else {
        node.src = {c.add_activation(std::vector<float>(128), {64, 2, 1, 1}),
                    c.add_activation(std::vector<float>(2), {2, 1, 1, 1})};
      }
      node.ne = op == "moe_sum" ? graph::Shape{64, 1, 1, 1} : graph::Shape{2, 1, 1, 1};
    } else {
      FAIL() << "unknown op row: " << line;
    }
    c.add_op(node);
    const Node& target = c.graph.node(c.target);
    for (const WeightSource& w : c.weights) (void)cpu.register_weight(w);
    EXPECT_EQ(cpu.supports_op(c.graph, target), cells[2] == "yes") << "CPU: " << line;
    if (vk) {
      for (const WeightSource& w : c.weights)
        (void)vk->register_weight(w);  // refused types stay unregistered
      EXPECT_EQ(vk->supports_op(c.graph, target), cells[3] == "yes") << "Vulkan: " << line;
    }
  }
  EXPECT_GE(rows, 20);
}

}  // namespace
}  // namespace minfer::backend::test
