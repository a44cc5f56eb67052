// KV state files: a round trip restores rows and tokens into fresh cells; every mismatch or corruption is a
// named error that leaves the cache unchanged.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "common/fixtures.h"
#include "kv/kv_state.h"
#include "make_cache.h"

namespace minfer::kv {
namespace {

std::unique_ptr<KvCache> make(int64_t cells, DType type = DType::F32) { return test::make_cache(cells, type); }

// Fills positions 0..n-1 of `seq` with rows derived from (layer, K/V, position, seq).
void fill(KvCache& kv, SeqId seq, int32_t n) {
  std::vector<SeqId> seqs(static_cast<size_t>(n), seq);
  std::vector<int32_t> pos(static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i) pos[static_cast<size_t>(i)] = i;
  auto cells = kv.allocate(seqs, pos);
  ASSERT_TRUE(cells.ok());
  for (size_t l = 0; l < kv.views().size(); ++l) {
    const auto& v = kv.views()[l];
    for (int32_t i = 0; i < n; ++i) {
      auto* k = reinterpret_cast<float*>(static_cast<uint8_t*>(v.k) +
                                         static_cast<size_t>((*cells)[static_cast<size_t>(i)]) * v.row_bytes);
      auto* vv = reinterpret_cast<float*>(
          static_cast<uint8_t*>(v.v) + static_cast<size_t>((*cells)[static_cast<size_t>(i)]) * v.row_bytes);
      for (int64_t e = 0; e < v.row_elems; ++e) {
        k[e] = static_cast<float>(l * 1000 + i * 10 + seq) + 0.5f * static_cast<float>(e);
        vv[e] = -k[e];
      }
    }
  }
}

// The rows of `seq` in position order, K and V of every layer concatenated.
std::vector<float> rows_of(const KvCache& kv, SeqId seq) {
  std::vector<float> out;
  for (const auto& v : kv.views()) {
    for (const auto& [pos, cell] : kv.seq_cells(seq)) {
      const auto* k = reinterpret_cast<const float*>(static_cast<const uint8_t*>(v.k) +
                                                     static_cast<size_t>(cell) * v.row_bytes);
      const auto* vv = reinterpret_cast<const float*>(static_cast<const uint8_t*>(v.v) +
                                                      static_cast<size_t>(cell) * v.row_bytes);
      out.insert(out.end(), k, k + v.row_elems);
      out.insert(out.end(), vv, vv + v.row_elems);
    }
  }
  return out;
}

const KvFileIdentity kId{"model-a", 32, DType::F32};

TEST(KvState, RoundTripRestoresRowsAndTokens) {
  auto kv = make(32);
  fill(*kv, 0, 5);
  fill(*kv, 3, 7);
  const std::string path = ::minfer::test::temp_dir() + "/state.kv";
  ASSERT_TRUE(save_kv_file(path, kId, *kv, {{0, {1, 2, 3, 4, 5}}, {3, {9, 8, 7, 6, 5, 4, 3}}}).ok());
  auto fresh = make(32);
  fill(*fresh, 1, 4);  // another sequence already present: restored rows land in other cells
  auto loaded = load_kv_file(path, kId, *fresh);
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  ASSERT_EQ(loaded->size(), 2u);
  EXPECT_EQ((*loaded)[1].tokens, (std::vector<int32_t>{9, 8, 7, 6, 5, 4, 3}));
  EXPECT_EQ(rows_of(*fresh, 0), rows_of(*kv, 0));
  EXPECT_EQ(rows_of(*fresh, 3), rows_of(*kv, 3));
  EXPECT_EQ(fresh->used_cells(), 16);
}

TEST(KvState, MismatchesAndCorruptionAreNamedAndChangeNothing) {
  auto kv = make(32);
  fill(*kv, 0, 6);
  const std::string path = ::minfer::test::temp_dir() + "/state2.kv";
  ASSERT_TRUE(save_kv_file(path, kId, *kv, {{0, {1, 2, 3, 4, 5, 6}}}).ok());
  auto expect_refused = [&](const std::string& file, const KvFileIdentity& id, const std::string& why) {
    auto fresh = make(32);
    auto r = load_kv_file(file, id, *fresh);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find(why), std::string::npos) << r.status().message();
    EXPECT_EQ(fresh->used_cells(), 0);
  };
  expect_refused(path, {"model-b", 32, DType::F32}, "another model");
  expect_refused(path, {"model-a", 64, DType::F32}, "n_ctx 32");
  expect_refused(path, {"model-a", 32, DType::F16}, "cache type");
  expect_refused(path, {"model-a", 32, DType::F32, 4}, "saved with 0 sequences (--n-slots), this run uses 4");

  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto write = [&](const std::string& name, const std::string& content) {
    const std::string p = ::minfer::test::temp_dir() + "/" + name;
    std::ofstream(p, std::ios::binary) << content;
    return p;
  };
  expect_refused(write("trunc.kv", bytes.substr(0, bytes.size() - 10)), kId, "truncated");
  std::string flipped = bytes;
  flipped[flipped.size() - 3] ^= 0x40;
  expect_refused(write("flip.kv", flipped), kId, "checksum mismatch");
  std::string version = bytes;
  version[4] = 9;
  expect_refused(write("ver.kv", version), kId, "format version 9");
  expect_refused(write("junk.kv", "hello"), kId, "not a minfer KV file");
  auto fresh = make(32);
  EXPECT_EQ(load_kv_file(::minfer::test::temp_dir() + "/missing.kv", kId, *fresh).status().code(),
            StatusCode::kNotFound);
}

TEST(KvState, SaveRefusesASequenceWithHoles) {
  auto kv = make(16);
  ASSERT_TRUE(kv->allocate(std::vector<SeqId>{0, 0}, std::vector<int32_t>{0, 2}).ok());
  EXPECT_FALSE(save_kv_file(::minfer::test::temp_dir() + "/holes.kv", kId, *kv, {{0, {1, 2}}}).ok());
}

}  // namespace
}  // namespace minfer::kv
