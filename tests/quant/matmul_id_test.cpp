// matmul_id (the expert matmul of mixture-of-experts FFNs) against quant::matmul on each chosen expert's
// matrix, one (token, slot) row at a time: bitwise equal for every compute type, thread count, batch size and
// routing, so grouping the batch's rows by expert never changes a token's result.
#include <cstring>

#include <gtest/gtest.h>

#include "core/rng.h"
#include "quant/matmul_id.h"
#include "test_util.h"

namespace minfer::quant {
namespace {

using test::kComputeTypes;
using test::quantized;
using test::random_floats;

class MatmulIdTest : public ::testing::TestWithParam<DType> {};

TEST_P(MatmulIdTest, EqualsPerRowMatmulOfTheChosenExpert) {
  const DType t = GetParam();
  const int64_t k = traits(t).block_size == 256 ? 512 : 320;
  const int64_t n = 45;  // ends in a partial repacked row group
  const int64_t n_expert = 5, n_used = 3;
  std::vector<std::vector<uint8_t>> bytes;
  std::vector<Weight> experts;
  for (int64_t e = 0; e < n_expert; ++e) {
    bytes.push_back(quantized(t, random_floats(n * k, 100 + static_cast<uint64_t>(e)), n, k));
    experts.push_back(prepare_weight(t, bytes.back().data(), n, k, /*allow_repack=*/true));
  }
  ThreadPool one(1);
  MatmulScratch ref_scratch;
  for (const bool per_slot : {false, true}) {
    for (const int64_t n_tokens : {1, 2, 7, 19}) {
      // Routing: distinct experts per token, skewed so one expert gets most rows and expert 4 often none.
      Rng rng(static_cast<uint64_t>(n_tokens) * 7 + per_slot);
      std::vector<int32_t> ids(static_cast<size_t>(n_tokens * n_used));
      for (int64_t tok = 0; tok < n_tokens; ++tok) {
        for (int64_t s = 0; s < n_used; ++s) {
          int32_t e;
          bool taken;
          do {
            e = static_cast<int32_t>(rng.next_u64() % (s == 0 ? 2 : n_expert - (tok % 2)));
            taken = false;
            for (int64_t j = 0; j < s; ++j) taken = taken || ids[static_cast<size_t>(tok * n_used + j)] == e;
          } while (taken);
          ids[static_cast<size_t>(tok * n_used + s)] = e;
        }
      }
      const int64_t x_rows = per_slot ? n_tokens * n_used : n_tokens;
      const std::vector<float> x = random_floats(x_rows * k, 5 + static_cast<uint64_t>(x_rows));
      std::vector<float> want(static_cast<size_t>(n_tokens * n_used * n));
      for (int64_t r = 0; r < n_tokens * n_used; ++r) {
        const float* xr = x.data() + (per_slot ? r : r / n_used) * k;
        matmul(experts[static_cast<size_t>(ids[static_cast<size_t>(r)])], xr, 1, want.data() + r * n, one,
               ref_scratch);
      }
      for (int threads : {1, 2, 3}) {
        ThreadPool pool(threads);
        MatmulScratch scratch;
        std::vector<float> y(want.size(), -1.0f);
        matmul_id(experts, x.data(), ids.data(), n_tokens, n_used, per_slot, y.data(), pool, scratch);
        EXPECT_EQ(0, std::memcmp(y.data(), want.data(), y.size() * sizeof(float)))
            << dtype_name(t) << " tokens=" << n_tokens << " per_slot=" << per_slot << " threads=" << threads;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Types, MatmulIdTest, ::testing::ValuesIn(kComputeTypes),
                         [](const auto& type_info) { return std::string(dtype_name(type_info.param)); });

}  // namespace
}  // namespace minfer::quant
