// KV cell store: allocation with sequence ownership, per-sequence windows in position order, removal,
// sharing, shifting with K re-rotation, and refusals that leave the cache unchanged.
#include <cmath>

#include <gtest/gtest.h>

#include "core/fp16.h"
#include "kv/kv_cache.h"
#include "make_cache.h"

namespace minfer::kv {
namespace {

std::unique_ptr<KvCache> make(int64_t cells, DType type = DType::F32) { return test::make_cache(cells, type); }

TEST(KvCache, WindowsArePerSequenceInPositionOrder) {
  auto kv = make(16);
  const std::vector<SeqId> seqs = {0, 1, 0, 1, 0};
  const std::vector<int32_t> pos = {0, 0, 1, 1, 2};
  auto cells = kv->allocate(seqs, pos);
  ASSERT_TRUE(cells.ok());
  EXPECT_EQ(kv->used_cells(), 5);
  std::vector<int32_t> off, win;
  kv->attention_windows(seqs, pos, &off, &win);
  ASSERT_EQ(off, (std::vector<int32_t>{0, 1, 2, 4, 6, 9}));
  const auto& c = *cells;
  EXPECT_EQ(win, (std::vector<int32_t>{c[0], c[1], c[0], c[2], c[1], c[3], c[0], c[2], c[4]}));
  EXPECT_EQ(kv->seq_pos_max(0), 2);
  EXPECT_EQ(kv->seq_pos_max(1), 1);
  EXPECT_EQ(kv->seq_pos_max(5), -1);
}

TEST(KvCache, RefusalsChangeNothing) {
  auto kv = make(4);
  ASSERT_TRUE(kv->allocate(std::vector<SeqId>{0, 0}, std::vector<int32_t>{0, 1}).ok());
  auto dup = kv->allocate(std::vector<SeqId>{0}, std::vector<int32_t>{1});
  ASSERT_FALSE(dup.ok());
  EXPECT_EQ(dup.status().message(), "KV cache: sequence 0 already holds position 1");
  auto full = kv->allocate(std::vector<SeqId>{1, 1, 1}, std::vector<int32_t>{0, 1, 2});
  ASSERT_FALSE(full.ok());
  EXPECT_EQ(full.status().code(), StatusCode::kOutOfRange);
  auto bad_seq = kv->allocate(std::vector<SeqId>{64}, std::vector<int32_t>{0});
  EXPECT_FALSE(bad_seq.ok());
  EXPECT_EQ(kv->used_cells(), 2);
}

TEST(KvCache, RemoveCopyKeep) {
  auto kv = make(8);
  ASSERT_TRUE(kv->allocate(std::vector<SeqId>{0, 0, 0, 0}, std::vector<int32_t>{0, 1, 2, 3}).ok());
  kv->seq_cp(0, 1, 0, 2);  // sequence 1 shares positions 0 and 1
  EXPECT_EQ(kv->seq_pos_max(1), 1);
  EXPECT_EQ(kv->used_cells(), 4);
  EXPECT_EQ(kv->sharing().sequences, 2);
  EXPECT_EQ(kv->sharing().shared_cells, 2);
  kv->seq_rm(0, 1, -1);  // drop 1.. from sequence 0: position 1 stays owned by sequence 1
  EXPECT_EQ(kv->seq_pos_max(0), 0);
  EXPECT_EQ(kv->used_cells(), 2);
  EXPECT_EQ(kv->sharing().shared_cells, 1);
  kv->seq_keep(1);
  EXPECT_EQ(kv->seq_pos_max(0), -1);
  EXPECT_EQ(kv->used_cells(), 2);
  kv->seq_rm(-1, 0, -1);
  EXPECT_EQ(kv->used_cells(), 0);
  EXPECT_EQ(kv->sharing().sequences, 0);
}

TEST(KvCache, ShiftReRotatesKeys) {
  for (DType type : {DType::F32, DType::F16}) {
    auto kv = make(4, type);
    auto cells = kv->allocate(std::vector<SeqId>{0, 0}, std::vector<int32_t>{0, 1});
    ASSERT_TRUE(cells.ok());
    // A K row whose first head has 1 in dim 0: rotating by delta moves it to (cos, sin) of delta * theta_0 = delta.
    std::vector<float> row(64, 0.0f);
    row[0] = 1.0f;
    const auto& view = kv->views()[0];
    auto* k = static_cast<uint8_t*>(view.k) + static_cast<size_t>((*cells)[1]) * view.row_bytes;
    if (type == DType::F32) {
      std::memcpy(k, row.data(), 64 * sizeof(float));
    } else {
      auto* h = reinterpret_cast<uint16_t*>(k);
      for (int i = 0; i < 64; ++i) h[i] = row[static_cast<size_t>(i)] == 1.0f ? 0x3c00 : 0;
    }
    RopeParams rope{32, 2, 32, 10000.0f};
    ASSERT_TRUE(kv->seq_add(0, 1, -1, 3, rope).ok());
    EXPECT_EQ(kv->seq_pos_max(0), 4);
    float x0, x1;
    if (type == DType::F32) {
      x0 = reinterpret_cast<float*>(k)[0];
      x1 = reinterpret_cast<float*>(k)[16];
    } else {
      x0 = fp16_to_fp32(reinterpret_cast<uint16_t*>(k)[0]);
      x1 = fp16_to_fp32(reinterpret_cast<uint16_t*>(k)[16]);
    }
    const float tol = type == DType::F32 ? 1e-6f : 1e-3f;  // f16 storage rounds to 11 bits
    EXPECT_NEAR(x0, std::cos(3.0f), tol);
    EXPECT_NEAR(x1, std::sin(3.0f), tol);
    kv->seq_cp(0, 1, 0, -1);
    EXPECT_FALSE(kv->seq_add(0, 0, -1, 1, rope).ok());  // shared cells cannot be shifted for one owner
  }
}

// llama's normal pairing with llama3 frequency factors: dims 0 and 1 rotate together, pair 1 (dims 2, 3) by
// delta * base^(-2/32) * freq_scale / factor_1.
TEST(KvCache, ShiftReRotatesKeysWithNormalPairsAndFactors) {
  auto kv = make(4, DType::F32);
  auto cells = kv->allocate(std::vector<SeqId>{0}, std::vector<int32_t>{0});
  ASSERT_TRUE(cells.ok());
  std::vector<float> row(64, 0.0f);
  row[0] = 1.0f;
  row[2] = 1.0f;
  auto* k = reinterpret_cast<float*>(static_cast<uint8_t*>(kv->views()[0].k) +
                                     static_cast<size_t>((*cells)[0]) * kv->views()[0].row_bytes);
  std::memcpy(k, row.data(), 64 * sizeof(float));
  RopeParams rope{32, 2, 32, 10000.0f};
  rope.neox = false;
  rope.freq_scale = 0.5f;
  rope.freq_factors.assign(16, 1.0f);
  rope.freq_factors[1] = 4.0f;
  ASSERT_TRUE(kv->seq_add(0, 0, -1, 3, rope).ok());
  const float theta1 = 0.5f * (3.0f * std::pow(10000.0f, -2.0f / 32.0f) / 4.0f);
  EXPECT_NEAR(k[0], std::cos(1.5f), 1e-6f);
  EXPECT_NEAR(k[1], std::sin(1.5f), 1e-6f);
  EXPECT_NEAR(k[2], std::cos(theta1), 1e-6f);
  EXPECT_NEAR(k[3], std::sin(theta1), 1e-6f);
  EXPECT_EQ(k[16], 0.0f);  // NEOX would have written the partner of dim 0 here
  rope.freq_factors.resize(3);
  EXPECT_FALSE(kv->seq_add(0, 0, -1, 1, rope).ok());  // factors must cover n_rot / 2 pairs
}

TEST(KvCache, RefusesUnsupportedTypes) {
  backend::CpuBackend cpu;
  KvConfig c{2, 8, 64, DType::Q4_0};
  auto kv = KvCache::create(c, cpu);
  ASSERT_FALSE(kv.ok());
  EXPECT_EQ(kv.status().message(), "KV cache type 'q4_0' is not supported (use f32, f16 or q8_0)");
}

}  // namespace
}  // namespace minfer::kv
