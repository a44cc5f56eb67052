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

// A context shift's bookkeeping: which cells move, what is refused, positions moved only when asked (the
// keys are re-rotated in between by the engine's K-shift graph, tests/engine and tests/backend_vulkan).
TEST(KvCache, ShiftCellsPicksTheRangeAndRefusesWhatCannotMove) {
  auto kv = make(8);
  auto cells = kv->allocate(std::vector<SeqId>{0, 0, 0, 1}, std::vector<int32_t>{0, 1, 2, 0});
  ASSERT_TRUE(cells.ok());
  auto moved = kv->shift_cells(0, 1, -1, 3);
  ASSERT_TRUE(moved.ok());
  EXPECT_EQ(*moved, (std::vector<int32_t>{(*cells)[1], (*cells)[2]}));
  EXPECT_EQ(kv->seq_pos_max(0), 2);  // nothing moves until add_positions
  kv->add_positions(*moved, 3);
  EXPECT_EQ(kv->seq_pos_max(0), 5);
  EXPECT_EQ(kv->seq_pos_min(0), 0);
  EXPECT_EQ(kv->seq_pos_max(1), 0);
  EXPECT_TRUE(kv->shift_cells(0, 0, -1, 0)->empty());    // delta 0: nothing to rotate
  EXPECT_FALSE(kv->shift_cells(0, 0, -1, -1).ok());      // position 0 - 1 would be negative
  EXPECT_FALSE(kv->shift_cells(kMaxSequences, 0, -1, 1).ok());
  kv->seq_cp(0, 1, 0, -1);
  EXPECT_FALSE(kv->shift_cells(0, 0, -1, 1).ok());  // shared cells cannot be shifted for one owner
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
