// matmul against per-output vec_dot of the same ISA (bitwise: tiling and threading never change a
// result) and against the scalar reference (reordering tolerance), for prefill and decode shapes.
#include <cmath>
#include <cstdlib>
#include <cstring>

#include <gtest/gtest.h>

#include "quant/kernels/kernels.h"
#include "quant/matmul.h"
#include "test_util.h"

namespace minfer::quant {
namespace {

using test::kComputeTypes;
using test::quantized;
using test::random_floats;

class MatmulTest : public ::testing::TestWithParam<DType> {};

TEST_P(MatmulTest, EqualsVecDotForAnyThreadCountAndShape) {
  const DType t = GetParam();
  const int64_t k = traits(t).block_size == 256 ? 512 : 320;
  // Not multiples of the tile rows; 45 also ends in a partial pair of repacked row groups (13 rows).
  for (const int64_t n : {37, 45}) {
    const std::vector<uint8_t> wbytes = quantized(t, random_floats(n * k, 1), n, k);
    const Weight w = prepare_weight(t, wbytes.data(), n, k, /*allow_repack=*/true);
    const kernels::TypeKernels& tk = kernels::cpu_kernels().of(t);
    for (int64_t m : {1, 2, 5, 19}) {
      const std::vector<float> x = random_floats(m * k, 2 + static_cast<uint64_t>(m));
      // Expected: quantize each activation row, then one vec_dot per output.
      const size_t xs = *row_bytes(tk.vec_dot_type, k);
      std::vector<uint8_t> xq(xs * static_cast<size_t>(m));
      for (int64_t i = 0; i < m; ++i) tk.from_float(x.data() + i * k, xq.data() + i * xs, k);
      // Repacked quantized weights accumulate per row in block order like the scalar reference (bitwise);
      // plain layouts and repacked float types use this ISA's vec_dot.
      const bool quantized_repack = w.repack != nullptr && traits(t).block_size > 1;
      const kernels::VecDotFn dot =
          quantized_repack ? kernels::cpu_kernels_for(kernels::Isa::kGeneric)->of(t).vec_dot : tk.vec_dot;
      std::vector<float> want(static_cast<size_t>(m * n));
      for (int64_t i = 0; i < m; ++i) {
        for (int64_t r = 0; r < n; ++r)
          dot(k, &want[i * n + r], wbytes.data() + r * w.row_bytes, xq.data() + i * xs);
      }
      for (int threads : {1, 2, 3}) {
        ThreadPool pool(threads);
        MatmulScratch scratch;
        std::vector<float> y(static_cast<size_t>(m * n), -1.0f);
        matmul(w, x.data(), m, y.data(), pool, scratch);
        EXPECT_EQ(0, std::memcmp(y.data(), want.data(), y.size() * sizeof(float)))
            << dtype_name(t) << " m=" << m << " threads=" << threads;
        // Against the scalar reference dot (reordering tolerance, see kernels_test.cpp).
        const kernels::TypeKernels& ref = kernels::cpu_kernels_for(kernels::Isa::kGeneric)->of(t);
        std::vector<float> wd(static_cast<size_t>(k)), xd(static_cast<size_t>(k));
        for (int64_t i = 0; i < m; i += 3) {
          dequantize_row(tk.vec_dot_type, xq.data() + i * xs, xd.data(), k);
          for (int64_t r = 0; r < n; r += 5) {
            float s = 0;
            ref.vec_dot(k, &s, wbytes.data() + r * w.row_bytes, xq.data() + i * xs);
            dequantize_row(t, wbytes.data() + r * w.row_bytes, wd.data(), k);
            double mag = 0;
            for (int64_t j = 0; j < k; ++j) mag += std::fabs(static_cast<double>(wd[j]) * xd[j]);
            EXPECT_NEAR(y[i * n + r], s, 1e-5 * mag)
                << dtype_name(t) << " m=" << m << " i=" << i << " r=" << r;
          }
        }
      }
    }
  }
}

TEST_P(MatmulTest, RepackedAndPlainLayoutsAgree) {
  const DType t = GetParam();
  const int64_t k = 256, n = 21, m = 6;
  const std::vector<uint8_t> wbytes = quantized(t, random_floats(n * k, 8), n, k);
  const std::vector<float> x = random_floats(m * k, 9);
  ThreadPool pool(2);
  MatmulScratch scratch;
  std::vector<float> a(m * n), b(m * n);
  matmul(prepare_weight(t, wbytes.data(), n, k, /*allow_repack=*/true), x.data(), m, a.data(), pool, scratch);
  matmul(prepare_weight(t, wbytes.data(), n, k, /*allow_repack=*/false), x.data(), m, b.data(), pool,
         scratch);
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-4 * (1.0 + std::fabs(b[i]))) << i;
}

INSTANTIATE_TEST_SUITE_P(Types, MatmulTest, ::testing::ValuesIn(kComputeTypes),
                         [](const ::testing::TestParamInfo<DType>& p) {
                           return std::string(dtype_name(p.param));
                         });

TEST(Matmul, F32MatchesNaiveProduct) {
  const int64_t m = 3, n = 9, k = 40;
  const std::vector<float> w = random_floats(n * k, 3);
  const std::vector<float> x = random_floats(m * k, 4);
  ThreadPool pool(2);
  MatmulScratch scratch;
  std::vector<float> y(m * n);
  matmul(prepare_weight(DType::F32, w.data(), n, k, false), x.data(), m, y.data(), pool, scratch);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t r = 0; r < n; ++r) {
      double s = 0;
      for (int64_t j = 0; j < k; ++j) s += static_cast<double>(w[r * k + j]) * x[i * k + j];
      EXPECT_NEAR(y[i * n + r], s, 1e-5);
    }
  }
}

TEST(Matmul, CheckWeightNamesTheProblem) {
  EXPECT_TRUE(check_weight(DType::Q4_K, 8, 512).ok());
  const Status bad = check_weight(DType::Q4_K, 8, 100);
  EXPECT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("q4_K"), std::string::npos) << bad.message();
  EXPECT_FALSE(check_weight(DType::Q2_K, 8, 256).ok());
}

}  // namespace
}  // namespace minfer::quant
