// A KV cache whose layers live in device memory (the FAKE device: PROT_NONE addresses over a private
// shadow, so a direct host access faults): rows go in and out through read_row/write_row, and session/slots
// files round-trip between a device-backed and a host-backed cache byte for byte.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "backend/cpu/cpu_backend.h"
#include "common/fake_device.h"
#include "common/fixtures.h"
#include "core/fp16.h"
#include "kv/kv_state.h"

namespace minfer::kv {
namespace {

std::unique_ptr<KvCache> make(const std::vector<backend::Backend*>& per_layer, DType type) {
  KvConfig c;
  c.n_layer = static_cast<int32_t>(per_layer.size());
  c.n_cells = 8;
  c.row_elems = 64;
  c.type = type;
  auto kv = KvCache::create(c, per_layer);
  EXPECT_TRUE(kv.ok()) << kv.status().message();
  return kv.ok() ? std::move(*kv) : nullptr;
}

// Positions 0..n-1 of sequence 0, each row derived from (layer, K/V, position).
void fill(KvCache& kv, int32_t n) {
  std::vector<SeqId> seqs(static_cast<size_t>(n), 0);
  std::vector<int32_t> pos(static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i) pos[static_cast<size_t>(i)] = i;
  auto cells = kv.allocate(seqs, pos);
  ASSERT_TRUE(cells.ok());
  const size_t rb = kv.views()[0].row_bytes;
  std::vector<uint8_t> row(rb);
  for (int32_t l = 0; l < static_cast<int32_t>(kv.views().size()); ++l) {
    for (int32_t i = 0; i < n; ++i) {
      for (bool v : {false, true}) {
        for (size_t b = 0; b < rb; b += 2) {  // f16 values that stay finite
          const uint16_t h = fp32_to_fp16(static_cast<float>((l * 7 + i * 3 + (v ? 1 : 0) + static_cast<int>(b)) % 11) - 5.0f);
          std::memcpy(row.data() + b, &h, 2);
        }
        ASSERT_TRUE(kv.write_row(l, v, (*cells)[static_cast<size_t>(i)], row.data()).ok());
      }
    }
  }
}

std::vector<uint8_t> all_rows(const KvCache& kv) {
  const size_t rb = kv.views()[0].row_bytes;
  std::vector<uint8_t> out;
  std::vector<uint8_t> row(rb);
  for (int32_t l = 0; l < static_cast<int32_t>(kv.views().size()); ++l) {
    for (const auto& [pos, cell] : kv.seq_cells(0)) {
      for (bool v : {false, true}) {
        EXPECT_TRUE(kv.read_row(l, v, cell, row.data()).ok());
        out.insert(out.end(), row.begin(), row.end());
      }
    }
  }
  return out;
}

TEST(KvDevice, FilesWorkOnDeviceLayers) {
  backend::CpuBackend cpu;
  test::FakeDevice dev;
  auto on_device = make({&dev, &cpu}, DType::F16);
  auto on_host = make({&cpu, &cpu}, DType::F16);
  ASSERT_TRUE(on_device && on_host);
  EXPECT_EQ(on_device->bytes_on(dev), on_device->bytes() / 2);
  EXPECT_EQ(on_host->bytes_on(dev), 0u);
  fill(*on_device, 5);
  fill(*on_host, 5);
  EXPECT_EQ(all_rows(*on_device), all_rows(*on_host));
  EXPECT_GT(dev.uploads, 0);
  // A context shift's bookkeeping (the keys' rotation is the engine's graph, tested in tests/engine and on
  // Vulkan): positions 0, 1 go, 2..4 become 0..2.
  for (KvCache* kv : {on_device.get(), on_host.get()}) {
    kv->seq_rm(0, 0, 2);
    auto moved = kv->shift_cells(0, 2, -1, -2);
    ASSERT_TRUE(moved.ok());
    kv->add_positions(*moved, -2);
    EXPECT_EQ(kv->seq_pos_max(0), 2);
  }
  EXPECT_EQ(all_rows(*on_device), all_rows(*on_host));

  // A slots file written from the device cache restores into a host cache, and back, byte for byte.
  const KvFileIdentity id{"model", 8, DType::F16};
  const std::string dir = ::minfer::test::temp_dir();
  const Status saved = save_kv_file(dir + "/dev.kv", id, *on_device, {{0, {1, 2, 3}}});
  ASSERT_TRUE(saved.ok()) << saved.message();
  auto host2 = make({&cpu, &cpu}, DType::F16);
  auto loaded = load_kv_file(dir + "/dev.kv", id, *host2);
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  EXPECT_EQ(all_rows(*host2), all_rows(*on_host));
  ASSERT_TRUE(save_kv_file(dir + "/host.kv", id, *host2, {{0, {1, 2, 3}}}).ok());
  auto dev2 = make({&dev, &cpu}, DType::F16);
  ASSERT_TRUE(load_kv_file(dir + "/host.kv", id, *dev2).ok());
  EXPECT_EQ(all_rows(*dev2), all_rows(*on_host));
}

TEST(KvDevice, LayerBackendsMustMatchTheLayers) {
  backend::CpuBackend cpu;
  KvConfig c;
  c.n_layer = 2;
  c.n_cells = 4;
  c.row_elems = 64;
  c.type = DType::F16;
  auto kv = KvCache::create(c, std::vector<backend::Backend*>{&cpu});
  ASSERT_FALSE(kv.ok());
  EXPECT_NE(kv.status().message().find("1 layer backends for 2 layers"), std::string::npos);
}

}  // namespace
}  // namespace minfer::kv
