// Every Vulkan shader against the CPU backend (and, for matmul, a double-precision oracle) on awkward
// shapes: odd rows, rows that are not a multiple of 256, 1, 7 and 9 tokens (9 and more run the tiled
// matrix-matrix shader, which must give the matrix-vector shader's bits), and tensors read through several
// bound windows. Each tolerance says its cause.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "backend_vulkan/vulkan_harness.h"
#include "core/fp16.h"
#include "core/rng.h"
#include "quant/quant.h"

namespace minfer::backend::test {
namespace {

using graph::Node;
using graph::OpKind;

struct MatmulShape {
  DType type;
  int64_t k, n, m;
};

class VulkanMatmul : public ::testing::TestWithParam<MatmulShape> {};

// Checks Vulkan's matmul output `got` (m tokens x n rows) against a double-precision oracle and the CPU's
// `cpu`, with the bounds below. `oracle` false: the int8 path, whose activations are quantized as the CPU's
// are, so only the CPU bound applies.
void expect_matmul_close(DType type, int64_t k, int64_t n, int64_t m, const std::vector<uint8_t>& w,
                         const std::vector<float>& x, const std::vector<float>& got,
                         const std::vector<float>& cpu, bool oracle = true) {
  ASSERT_EQ(got.size(), static_cast<size_t>(n * m));
  ASSERT_EQ(cpu.size(), static_cast<size_t>(n * m));
  const size_t rb = *row_bytes(type, k);
  std::vector<float> wrow(static_cast<size_t>(k));
  const DType act = quant::vec_dot_type(type);
  for (int64_t r = 0; r < n; ++r) {
    quant::dequantize_row(type, w.data() + static_cast<size_t>(r) * rb, wrow.data(), k);
    for (int64_t t = 0; t < m; ++t) {
      const float* xt = x.data() + t * k;
      double exact = 0, sum_abs = 0, act_err = 0;
      for (int64_t i = 0; i < k; ++i) {
        exact += static_cast<double>(wrow[static_cast<size_t>(i)]) * xt[i];
        sum_abs += std::fabs(static_cast<double>(wrow[static_cast<size_t>(i)]) * xt[i]);
      }
      // The CPU converts activations to vec_dot_type first. Q8_0: per 32-block step d = max|x|/127 (stored
      // as f16), so each element moves by at most 0.6 d (0.5 d rounding + the f16 rounding of d times 127);
      // Q8_K (for Q4_K/Q6_K): the same per 256-block with a float d (0.5 d; 0.6 d kept). F16: each element
      // rounds to 11 bits. F32: no conversion.
      const int64_t qb = act == DType::Q8_K ? 256 : 32;
      for (int64_t b = 0; b < k; b += qb) {
        double amax = 0, wsum = 0;
        for (int64_t i = b; i < std::min(k, b + qb); ++i) {
          amax = std::max(amax, static_cast<double>(std::fabs(xt[i])));
          wsum += std::fabs(wrow[static_cast<size_t>(i)]);
        }
        if (act == DType::Q8_0 || act == DType::Q8_1 || act == DType::Q8_K)
          act_err += 0.6 * amax / 127.0 * wsum;
      }
      if (act == DType::F16) act_err = sum_abs * std::ldexp(1.0, -11);
      if (act == DType::BF16) act_err = sum_abs * std::ldexp(1.0, -8);  // 8 significant bits
      // Q8_1 (for Q4_1 / Q5_1) also stores s = d * sum(q) as f16, which multiplies the block's min m
      // (|m| <= max|w|): 2^-11 * |s| * max|w| more per block.
      if (act == DType::Q8_1) {
        for (int64_t b = 0; b < k; b += 32) {
          double s = 0, wmax = 0;
          for (int64_t i = b; i < b + 32; ++i) {
            s += xt[i];
            wmax = std::max(wmax, static_cast<double>(std::fabs(wrow[static_cast<size_t>(i)])));
          }
          act_err += std::ldexp(std::fabs(s) * 1.1 + 1e-3, -11) * wmax;
        }
      }
      // Both sides accumulate k products in f32 in their own order: at most k * 2^-24 * sum|w x| each
      // (the classic gamma_k bound; the shaders' order is 64 fma chains of k/64 then a 6-level tree), so
      // 2k * 2^-24 between them, plus a floor for sums that cancel to 0.
      const double acc_err = 2.0 * static_cast<double>(k) * std::ldexp(1.0, -24) * sum_abs + 1e-30;
      const size_t at = static_cast<size_t>(t * n + r);
      if (oracle) {
        ASSERT_NEAR(got[at], exact, acc_err / 2 + std::ldexp(std::fabs(exact), -24))
            << "oracle, row " << r << " token " << t;
      }
      ASSERT_NEAR(got[at], cpu[at], acc_err + act_err) << "cpu, row " << r << " token " << t;
    }
  }
}

TEST_P(VulkanMatmul, MatchesOracleAndCpu) {
  MINFER_VK_OR_SKIP(vk);
  const auto [type, k, n, m] = GetParam();
  const std::vector<uint8_t> w = make_weight(type, k, n, 11 + static_cast<uint64_t>(k * n));
  const std::vector<float> x = random_floats(static_cast<size_t>(k * m), 7 + static_cast<uint64_t>(m));
  OpCase c;
  const auto wid = c.add_weight("w", type, {k, n, 1, 1}, w.data(), w.size());
  const auto xid = c.add_activation(x, {k, m, 1, 1});
  c.add_op(op_node(OpKind::kMatMul, {wid, xid}, {n, m, 1, 1}));
  const std::vector<float> got = run_vulkan(*vk, c);
  const std::vector<float> cpu = run_cpu(c);
  expect_matmul_close(type, k, n, m, w, x, got, cpu);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, VulkanMatmul,
    ::testing::Values(MatmulShape{DType::F32, 7, 13, 1}, MatmulShape{DType::F32, 100, 5, 7},
                      MatmulShape{DType::F32, 33, 3, 9}, MatmulShape{DType::F16, 7, 13, 1},
                      MatmulShape{DType::F16, 130, 9, 7}, MatmulShape{DType::F16, 64, 4, 9},
                      MatmulShape{DType::Q8_0, 32, 5, 1}, MatmulShape{DType::Q8_0, 96, 33, 7},
                      MatmulShape{DType::Q8_0, 416, 7, 9}, MatmulShape{DType::Q4_0, 32, 5, 1},
                      MatmulShape{DType::Q4_0, 96, 33, 7}, MatmulShape{DType::Q4_0, 416, 7, 9},
                      MatmulShape{DType::Q4_0, 896, 17, 8}, MatmulShape{DType::Q4_K, 256, 5, 1},
                      MatmulShape{DType::Q4_K, 768, 13, 7}, MatmulShape{DType::Q4_K, 512, 3, 9},
                      MatmulShape{DType::Q6_K, 256, 5, 1}, MatmulShape{DType::Q6_K, 768, 13, 7},
                      MatmulShape{DType::Q6_K, 512, 3, 9}, MatmulShape{DType::BF16, 7, 13, 1},
                      MatmulShape{DType::BF16, 130, 9, 9}, MatmulShape{DType::Q4_1, 96, 33, 7},
                      MatmulShape{DType::Q4_1, 32, 5, 9}, MatmulShape{DType::Q5_0, 96, 33, 7},
                      MatmulShape{DType::Q5_0, 416, 7, 1}, MatmulShape{DType::Q5_1, 96, 33, 7},
                      MatmulShape{DType::Q5_1, 416, 7, 9}, MatmulShape{DType::Q5_K, 256, 5, 1},
                      MatmulShape{DType::Q5_K, 768, 13, 7}, MatmulShape{DType::Q5_K, 512, 3, 9}),
    [](const ::testing::TestParamInfo<MatmulShape>& p) {
      return fmt::format("{}_k{}_n{}_m{}", dtype_name(p.param.type), p.param.k, p.param.n, p.param.m);
    });

// The tiled matrix-matrix shader (matmat.comp, prefill: more than 8 tokens) against the matrix-vector one
// (matvec.comp, up to 8 tokens per dispatch), for every weight type: both compute each output with the same
// operations in the same order (shaders/matmul.glsl), so they must agree bit for bit whichever runs, at
// every token count; and each token's result is the same bits at every batch size (a request's greedy
// output must not depend on the requests sharing its batch). Shapes: rows that are not a multiple of the
// 8-row tile (and more than one tile), k spanning several 64-unit steps and, for the plain types, not a
// multiple of 4 (a short last unit); 1, 7, 9, 33 and 64 tokens (partial 32-token tiles, two tiles). Each
// result is also checked against the oracle and the CPU with expect_matmul_close's bounds.
class VulkanMatmulTiled : public ::testing::TestWithParam<WeightShape> {};

TEST_P(VulkanMatmulTiled, EqualsMatvecBitwiseAtEveryBatchSizeAndMatchesCpu) {
  MINFER_VK_OR_SKIP(vk);
  const auto [type, k, n] = GetParam();
  const int64_t max_m = 64;
  const std::vector<uint8_t> w = make_weight(type, k, n, 13 + static_cast<uint64_t>(k * n));
  const std::vector<float> x = random_floats(static_cast<size_t>(k * max_m), 17 + static_cast<uint64_t>(k));
  std::vector<float> first_run;  // the 64-token tiled result, the reference for every other run's tokens
  for (int64_t m : {max_m, int64_t{1}, int64_t{7}, int64_t{9}, int64_t{33}}) {
    SCOPED_TRACE(m);
    const std::vector<float> xm(x.begin(), x.begin() + k * m);
    OpCase c;
    const auto wid = c.add_weight("w", type, {k, n, 1, 1}, w.data(), w.size());
    const auto xid = c.add_activation(xm, {k, m, 1, 1});
    c.add_op(op_node(OpKind::kMatMul, {wid, xid}, {n, m, 1, 1}));
    vk->set_matvec_max_tokens(0);  // tiled, whatever m
    const std::vector<float> tiled = run_vulkan(*vk, c);
    vk->set_matvec_max_tokens(UINT32_MAX);  // matrix-vector, 8 tokens per dispatch
    const std::vector<float> matvec = run_vulkan(*vk, c);
    vk->set_matvec_max_tokens(8);  // the default choice
    ASSERT_EQ(tiled.size(), static_cast<size_t>(n * m));
    ASSERT_EQ(matvec.size(), tiled.size());
    if (first_run.empty()) first_run = tiled;
    for (size_t i = 0; i < tiled.size(); ++i) {
      ASSERT_EQ(std::bit_cast<uint32_t>(tiled[i]), std::bit_cast<uint32_t>(matvec[i]))
          << "token " << i / static_cast<size_t>(n) << " row " << i % static_cast<size_t>(n) << ": tiled "
          << tiled[i] << " matvec " << matvec[i];
      ASSERT_EQ(std::bit_cast<uint32_t>(tiled[i]), std::bit_cast<uint32_t>(first_run[i]))
          << "token " << i / static_cast<size_t>(n) << " differs from the 64-token batch";
    }
    if (m == max_m || m == 9) expect_matmul_close(type, k, n, m, w, xm, tiled, run_cpu(c));
  }
  vk->set_matvec_max_tokens(8);
}

INSTANTIATE_TEST_SUITE_P(
    Types, VulkanMatmulTiled,
    ::testing::Values(WeightShape{DType::F32, 301, 13}, WeightShape{DType::F16, 259, 9},
                      WeightShape{DType::BF16, 130, 17}, WeightShape{DType::Q8_0, 416, 17},
                      WeightShape{DType::Q4_0, 416, 9}, WeightShape{DType::Q4_1, 288, 33},
                      WeightShape{DType::Q5_0, 416, 7}, WeightShape{DType::Q5_1, 288, 11},
                      WeightShape{DType::Q4_K, 768, 13}, WeightShape{DType::Q5_K, 512, 9},
                      WeightShape{DType::Q6_K, 768, 11}),
    weight_shape_name);

// A weight wider than one binding: windows of 4 KiB (as if maxStorageBufferRange were that small) split the
// rows into chunks. Same arithmetic per row, so the result equals the unwindowed run bit for bit.
TEST(VulkanOps, MatmulThroughWindowsEqualsOneBinding) {
  MINFER_VK_OR_SKIP(vk);
  const int64_t k = 256, n = 300;
  const std::vector<uint8_t> w = make_weight(DType::Q4_0, k, n, 5);
  for (int64_t m : {3, 40}) {  // matvec; tiled (40 tokens, 3 per 4 KiB window)
    OpCase c;
    const auto wid = c.add_weight("w", DType::Q4_0, {k, n, 1, 1}, w.data(), w.size());
    const auto xid = c.add_activation(random_floats(static_cast<size_t>(k * m), 9), {k, m, 1, 1});
    c.add_op(op_node(OpKind::kMatMul, {wid, xid}, {n, m, 1, 1}));
    vk->set_max_binding_bytes(0);
    const std::vector<float> whole = run_vulkan(*vk, c);
    vk->set_max_binding_bytes(4096);
    const std::vector<float> windowed = run_vulkan(*vk, c);
    ASSERT_EQ(whole.size(), windowed.size());
    for (size_t i = 0; i < whole.size(); ++i) ASSERT_EQ(whole[i], windowed[i]) << "m " << m << " " << i;
  }
}

// A token's result does not depend on how many tokens share the dispatch (1 vs 7 vs 9 and 33, which run
// the tiled shader).
TEST(VulkanOps, MatmulTokenResultIndependentOfBatch) {
  MINFER_VK_OR_SKIP(vk);
  const int64_t k = 160, n = 11;
  const std::vector<uint8_t> w = make_weight(DType::Q8_0, k, n, 3);
  const std::vector<float> x = random_floats(static_cast<size_t>(k * 33), 4);
  std::vector<std::vector<float>> outs;
  for (int64_t m : {1, 7, 9, 33}) {
    OpCase c;
    const auto wid = c.add_weight("w", DType::Q8_0, {k, n, 1, 1}, w.data(), w.size());
    const auto xid = c.add_activation(std::vector<float>(x.begin(), x.begin() + k * m), {k, m, 1, 1});
    c.add_op(op_node(OpKind::kMatMul, {wid, xid}, {n, m, 1, 1}));
    outs.push_back(run_vulkan(*vk, c));
  }
  for (int64_t r = 0; r < n; ++r) {
    ASSERT_EQ(outs[0][static_cast<size_t>(r)], outs[1][static_cast<size_t>(r)]);
    ASSERT_EQ(outs[0][static_cast<size_t>(r)], outs[2][static_cast<size_t>(r)]);
    ASSERT_EQ(outs[0][static_cast<size_t>(r)], outs[3][static_cast<size_t>(r)]);
  }
}

// A weight larger than the device's largest allocation is stored in parts of whole rows (here parts of 50
// rows, as if maxMemoryAllocationSize were that small; it is 1 GiB on SwiftShader). No window spans two
// parts and each row's arithmetic is unchanged, so the results equal the one-allocation run bit for bit:
// matrix-vector and tiled, f32 and int8, with windows larger than a part and smaller.
TEST(VulkanOps, MatmulOverWeightPartsEqualsOneAllocation) {
  MINFER_VK_OR_SKIP(vk);
  const int64_t k = 256, n = 137;
  const bool int8_default = vk->int8_matmul();
  for (DType type : {DType::F32, DType::Q4_0, DType::Q4_K, DType::Q6_K}) {
    const std::vector<uint8_t> w = make_weight(type, k, n, 5);
    const uint64_t row_bytes = w.size() / static_cast<size_t>(n);
    for (bool int8 : {false, true}) {
      if (int8 && !vk->device_info().integer_dot) continue;
      ASSERT_TRUE(vk->set_int8_matmul(int8).ok());
      for (int64_t m : {3, 40}) {
        OpCase c;
        const auto wid = c.add_weight("w", type, {k, n, 1, 1}, w.data(), w.size());
        const auto xid = c.add_activation(random_floats(static_cast<size_t>(k * m), 9), {k, m, 1, 1});
        c.add_op(op_node(OpKind::kMatMul, {wid, xid}, {n, m, 1, 1}));
        vk->set_max_allocation_bytes(0);
        vk->set_max_binding_bytes(0);
        const std::vector<float> whole = run_vulkan(*vk, c);
        vk->set_max_allocation_bytes(row_bytes * 50 + 16);
        for (uint64_t binding : {uint64_t{0}, uint64_t{4096}}) {
          vk->set_max_binding_bytes(binding);
          const std::vector<float> parted = run_vulkan(*vk, c);
          const auto* handle = static_cast<const VulkanBackend::Weight*>(vk->weight_handle("w"));
          ASSERT_EQ(handle->parts.size(), 3u);  // 50 + 50 + 37 rows
          ASSERT_EQ(whole.size(), parted.size());
          for (size_t i = 0; i < whole.size(); ++i) {
            ASSERT_EQ(whole[i], parted[i]) << dtype_name(type) << (int8 ? " int8" : " f32") << " m " << m
                                           << " binding " << binding << " output " << i;
          }
        }
      }
    }
  }
  vk->set_max_allocation_bytes(0);
  vk->set_max_binding_bytes(0);
  ASSERT_TRUE(vk->set_int8_matmul(int8_default).ok());
}

struct RowsShape {
  DType type;
  int64_t d, rows;
};
class VulkanGetRows : public ::testing::TestWithParam<RowsShape> {};

// Dequantization is one f16->f32 conversion and one multiply per element on both backends: bit-exact.
TEST_P(VulkanGetRows, EqualsCpuExactly) {
  MINFER_VK_OR_SKIP(vk);
  const auto [type, d, rows] = GetParam();
  const std::vector<uint8_t> table = make_weight(type, d, rows, 21);
  OpCase c;
  const auto tid = c.add_weight("table", type, {d, rows, 1, 1}, table.data(), table.size());
  const std::vector<int32_t> ids = {static_cast<int32_t>(rows - 1), 0, 2, 2,
                                    static_cast<int32_t>(rows / 2), 1, 0};
  const auto iid = c.add_ids(ids);
  c.add_op(op_node(OpKind::kGetRows, {tid, iid}, {d, static_cast<int64_t>(ids.size()), 1, 1}));
  const std::vector<float> got = run_vulkan(*vk, c);
  const std::vector<float> cpu = run_cpu(c);
  ASSERT_EQ(got.size(), cpu.size());
  for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], cpu[i]) << i;
  // The same through 4 KiB windows: the table spans several, each dispatch fills the ids in its rows, and
  // for d = 288 the output rows are split into chunks of 3.
  vk->set_max_binding_bytes(4096);
  const std::vector<float> windowed = run_vulkan(*vk, c);
  for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(windowed[i], cpu[i]) << "windowed " << i;
  // And from a table in parts of 4 rows (as on a device whose largest allocation is smaller than it).
  vk->set_max_allocation_bytes(table.size() / static_cast<size_t>(rows) * 4 + 16);
  const std::vector<float> parted = run_vulkan(*vk, c);
  EXPECT_EQ(static_cast<const VulkanBackend::Weight*>(vk->weight_handle("table"))->parts.size(),
            static_cast<size_t>((rows + 3) / 4));
  for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(parted[i], cpu[i]) << "in parts " << i;
}

INSTANTIATE_TEST_SUITE_P(Types, VulkanGetRows,
                         ::testing::Values(RowsShape{DType::F32, 7, 9}, RowsShape{DType::F16, 7, 9},
                                           RowsShape{DType::F16, 288, 31}, RowsShape{DType::Q8_0, 64, 9},
                                           RowsShape{DType::Q8_0, 288, 31}, RowsShape{DType::Q4_0, 64, 9},
                                           RowsShape{DType::Q4_0, 288, 31}, RowsShape{DType::Q4_K, 256, 9},
                                           RowsShape{DType::Q4_K, 768, 31}, RowsShape{DType::Q6_K, 256, 9},
                                           RowsShape{DType::Q6_K, 768, 31}, RowsShape{DType::BF16, 7, 9},
                                           RowsShape{DType::BF16, 288, 31}, RowsShape{DType::Q4_1, 288, 31},
                                           RowsShape{DType::Q5_0, 288, 31}, RowsShape{DType::Q5_1, 288, 31},
                                           RowsShape{DType::Q5_K, 256, 9}, RowsShape{DType::Q5_K, 768, 31}),
                         [](const ::testing::TestParamInfo<RowsShape>& p) {
                           return fmt::format("{}_d{}_rows{}", dtype_name(p.param.type), p.param.d,
                                              p.param.rows);
                         });

// Weights small enough that their f16 block scales are subnormal (below 2^-14), as most blocks of real
// models' Q6_K and Q4_K weights are (a Q6_K d is about max|w| / 4096). Vulkan lets a driver flush denormals
// that a conversion instruction produces, so the shaders decode halves in integer arithmetic; this pins
// that decoding to the CPU's on every path that reads a scale: get_rows bit for bit, and matmul (matrix-
// vector and tiled, f32 and int8 arithmetic) within expect_matmul_close's bounds.
TEST(VulkanOps, SubnormalF16ScalesDecodeAsOnTheCpu) {
  MINFER_VK_OR_SKIP(vk);
  const bool int8_default = vk->int8_matmul();
  const std::vector<bool> paths =
      vk->device_info().integer_dot ? std::vector<bool>{false, true} : std::vector<bool>{false};
  for (DType type : {DType::F16, DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q8_0, DType::Q4_K,
                     DType::Q5_K, DType::Q6_K}) {
    SCOPED_TRACE(dtype_name(type));
    const int64_t k = 512, n = 9;
    const std::vector<uint8_t> w = make_weight(type, k, n, 31, 2e-4f);
    // At least a fifth of the block scales (elements for F16) must be subnormal, or this tests nothing.
    const size_t block = traits(type).block_bytes;
    const size_t d_at = type == DType::Q6_K ? 208 : 0;
    size_t subnormal = 0;
    for (size_t b = 0; b + block <= w.size(); b += block) {
      uint16_t h;
      std::memcpy(&h, w.data() + b + d_at, 2);
      if ((h & 0x7c00u) == 0 && (h & 0x3ffu) != 0) ++subnormal;
    }
    ASSERT_GT(subnormal, w.size() / block / 5) << "of " << w.size() / block << " blocks";
    OpCase rows;
    const auto tid = rows.add_weight("table", type, {k, n, 1, 1}, w.data(), w.size());
    rows.add_op(op_node(OpKind::kGetRows, {tid, rows.add_ids({8, 0, 3})}, {k, 3, 1, 1}));
    const std::vector<float> got = run_vulkan(*vk, rows), cpu = run_cpu(rows);
    ASSERT_EQ(got.size(), cpu.size());
    for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], cpu[i]) << i;
    for (bool int8 : paths) {
      ASSERT_TRUE(vk->set_int8_matmul(int8).ok());
      for (int64_t m : {int64_t{1}, int64_t{9}}) {
        SCOPED_TRACE(fmt::format("int8 {} m {}", int8, m));
        const std::vector<float> x = random_floats(static_cast<size_t>(k * m), 41);
        OpCase c;
        const auto wid = c.add_weight("w", type, {k, n, 1, 1}, w.data(), w.size());
        c.add_op(op_node(OpKind::kMatMul, {wid, c.add_activation(x, {k, m, 1, 1})}, {n, m, 1, 1}));
        expect_matmul_close(type, k, n, m, w, x, run_vulkan(*vk, c), run_cpu(c), !int8 || type == DType::F16);
      }
    }
  }
  ASSERT_TRUE(vk->set_int8_matmul(int8_default).ok());
}

TEST(VulkanOps, GetRowsFromActivationAndBadIdRefused) {
  MINFER_VK_OR_SKIP(vk);
  OpCase c;
  const auto tid = c.add_activation(random_floats(5 * 6, 2), {5, 6, 1, 1});
  const auto iid = c.add_ids({5, 0, 3});
  c.add_op(op_node(OpKind::kGetRows, {tid, iid}, {5, 3, 1, 1}));
  const std::vector<float> got = run_vulkan(*vk, c);
  const std::vector<float> cpu = run_cpu(c);
  for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], cpu[i]) << i;

  std::vector<int32_t> bad = {6};
  std::vector<void*> data(c.graph.size() + 1, nullptr);
  OpCase b;
  const auto t2 = b.add_activation(random_floats(5 * 6, 2), {5, 6, 1, 1});
  const auto i2 = b.add_ids(bad);
  b.add_op(op_node(OpKind::kGetRows, {t2, i2}, {5, 1, 1, 1}));
  auto arena = vk->alloc_buffer(256);
  ASSERT_TRUE(arena.ok());
  data[static_cast<size_t>(t2)] = (*arena)->base();
  data[static_cast<size_t>(i2)] = bad.data();
  data[static_cast<size_t>(b.target)] = static_cast<uint8_t*>((*arena)->base()) + 128;
  Status st = vk->execute(b.graph, b.target, data, ExecContext{});
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("row id 6 outside [0, 6)"), std::string::npos) << st.message();
}

// An elementwise op on more bytes than one binding holds is refused, naming the node (only matmul and
// get_rows split their operands into windows today).
TEST(VulkanOps, TooLargeForOneBindingIsANamedError) {
  MINFER_VK_OR_SKIP(vk);
  OpCase c;
  const auto a = c.add_activation(random_floats(100, 1), {100, 1, 1, 1});
  const auto b = c.add_activation(random_floats(100, 2), {100, 1, 1, 1});
  Node n = op_node(OpKind::kAdd, {a, b}, {100, 1, 1, 1});
  n.name = "blk.0.ffn_out";
  c.add_op(n);
  auto arena = vk->alloc_buffer(3 * 512);
  ASSERT_TRUE(arena.ok());
  auto* base = static_cast<uint8_t*>((*arena)->base());
  std::vector<void*> data = {base, base + 512, base + 1024};
  vk->set_max_binding_bytes(256);
  Status st = vk->execute(c.graph, c.target, data, ExecContext{});
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("node 2 (add 'blk.0.ffn_out')"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("exceeds the device's storage buffer range"), std::string::npos)
      << st.message();
}

struct NormShape {
  int64_t d, rows;
};
class VulkanRmsNorm : public ::testing::TestWithParam<NormShape> {};

TEST_P(VulkanRmsNorm, MatchesCpu) {
  MINFER_VK_OR_SKIP(vk);
  const auto [d, rows] = GetParam();
  const std::vector<float> w = random_floats(static_cast<size_t>(d), 31);
  OpCase c;
  const auto xid = c.add_activation(random_floats(static_cast<size_t>(d * rows), 30, 3.0f), {d, rows, 1, 1});
  const auto wid = c.add_weight("norm", DType::F32, {d, 1, 1, 1}, w.data(), w.size() * 4);
  Node n = op_node(OpKind::kRmsNorm, {xid, wid}, {d, rows, 1, 1});
  n.params.eps = 1e-6f;
  c.add_op(n);
  const std::vector<float> got = run_vulkan(*vk, c);
  const std::vector<float> cpu = run_cpu(c);
  // The CPU sums squares in double, the shader in f32 (per-thread partials, then subgroup and shared
  // memory): the sum's relative error is at most d * 2^-24, the scale's half that; plus 4 roundings
  // (sqrt, divide at 2.5 ulp in Vulkan, two multiplies).
  const double rel = (static_cast<double>(d) / 2 + 8) * std::ldexp(1.0, -24);
  for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], cpu[i], rel * std::fabs(cpu[i]) + 1e-30) << i;
}

INSTANTIATE_TEST_SUITE_P(Shapes, VulkanRmsNorm,
                         ::testing::Values(NormShape{7, 1}, NormShape{896, 7}, NormShape{1000, 3},
                                           NormShape{64, 9}),
                         [](const ::testing::TestParamInfo<NormShape>& p) {
                           return fmt::format("d{}_rows{}", p.param.d, p.param.rows);
                         });

// add and mul are one rounding each on both backends: bit-exact, with and without the row broadcast, and
// in place (the output over source 0, as the scheduler aliases them).
TEST(VulkanOps, AddMulExact) {
  MINFER_VK_OR_SKIP(vk);
  for (OpKind op : {OpKind::kAdd, OpKind::kMul}) {
    for (bool broadcast : {false, true}) {
      for (bool in_place : {false, true}) {
        const int64_t d = 37, rows = 7;
        OpCase c;
        const auto a = c.add_activation(random_floats(static_cast<size_t>(d * rows), 40), {d, rows, 1, 1});
        const int64_t brows = broadcast ? 1 : rows;
        const auto b = c.add_activation(random_floats(static_cast<size_t>(d * brows), 41), {d, brows, 1, 1});
        c.add_op(op_node(op, {a, b}, {d, rows, 1, 1}));
        c.in_place = in_place;
        const std::vector<float> got = run_vulkan(*vk, c);
        const std::vector<float> cpu = run_cpu(c);
        for (size_t i = 0; i < got.size(); ++i) {
          ASSERT_EQ(got[i], cpu[i]) << graph::op_name(op) << " broadcast " << broadcast << " in place "
                                    << in_place;
        }
      }
    }
  }
}

TEST(VulkanOps, AddBroadcastsARegisteredBias) {
  MINFER_VK_OR_SKIP(vk);
  const int64_t d = 33, rows = 7;
  const std::vector<float> bias = random_floats(static_cast<size_t>(d), 50);
  OpCase c;
  const auto a = c.add_activation(random_floats(static_cast<size_t>(d * rows), 51), {d, rows, 1, 1});
  const auto b = c.add_weight("bias", DType::F32, {d, 1, 1, 1}, bias.data(), bias.size() * 4);
  c.add_op(op_node(OpKind::kAdd, {a, b}, {d, rows, 1, 1}));
  const std::vector<float> got = run_vulkan(*vk, c);
  const std::vector<float> cpu = run_cpu(c);
  for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], cpu[i]) << i;
}

// silu / swiglu: the same exp polynomial on both sides; what may differ is the division, which Vulkan
// allows at 2.5 ulp (the CPU rounds it exactly), and fma(), which Vulkan does not require to be fused
// (a split fma rounds twice in each of the polynomial's seven steps): 16 ulp relative (2^-19).
TEST(VulkanOps, SiluSwigluMatchCpu) {
  MINFER_VK_OR_SKIP(vk);
  for (OpKind op : {OpKind::kSilu, OpKind::kSwiGlu}) {
    const int64_t n = 1001;
    std::vector<float> g = random_floats(static_cast<size_t>(n), 60, 4.0f);
    g[0] = 0.0f;
    g[1] = -100.0f;  // exp underflows to 0 below -87
    g[2] = 90.0f;
    OpCase c;
    const auto a = c.add_activation(g, {n, 1, 1, 1});
    if (op == OpKind::kSilu) {
      c.add_op(op_node(op, {a}, {n, 1, 1, 1}));
    } else {
      const auto b = c.add_activation(random_floats(static_cast<size_t>(n), 61), {n, 1, 1, 1});
      c.add_op(op_node(op, {a, b}, {n, 1, 1, 1}));
    }
    const std::vector<float> got = run_vulkan(*vk, c);
    const std::vector<float> cpu = run_cpu(c);
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_NEAR(got[i], cpu[i], std::ldexp(std::fabs(cpu[i]), -19) + 1e-37)
          << graph::op_name(op) << " " << i;
    }
  }
}

struct RopeShape {
  int64_t head_dim, n_head;
  int32_t n_rot;
  float base;
};
class VulkanRope : public ::testing::TestWithParam<RopeShape> {};

// theta is built by the same f32 multiplications; sin and cos come from the shader's own polynomials
// (about 2 ulp on values <= 1) instead of libm (correctly rounded), and the argument reduction of a large
// theta (positions up to 30000) adds about |theta| * 2^-46: each output moves by at most 3e-7 * (|x0| +
// |x1|).
TEST_P(VulkanRope, MatchesCpu) {
  MINFER_VK_OR_SKIP(vk);
  const auto [head_dim, n_head, n_rot, base] = GetParam();
  const std::vector<int32_t> pos = {0, 1, 7, 100, 4095, 30000, 12};
  const auto n_tokens = static_cast<int64_t>(pos.size());
  OpCase c;
  const auto x = c.add_activation(random_floats(static_cast<size_t>(head_dim * n_head * n_tokens), 70),
                                  {head_dim, n_head, n_tokens, 1});
  const auto p = c.add_ids(pos, graph::InputKind::kPositions);
  Node n = op_node(OpKind::kRope, {x, p}, {head_dim, n_head, n_tokens, 1});
  n.params.n_rot = n_rot;
  n.params.rope_freq_base = base;
  c.add_op(n);
  const std::vector<float> got = run_vulkan(*vk, c);
  const std::vector<float> cpu = run_cpu(c);
  const std::vector<float>& in = c.f32[static_cast<size_t>(x)];
  const int64_t half = n_rot / 2;
  for (int64_t i = 0; i < static_cast<int64_t>(got.size()); ++i) {
    const int64_t dim = i % head_dim, head0 = i - dim;
    const int64_t pair = dim < half ? dim : dim - half;
    const double mag = dim < n_rot ? std::fabs(in[static_cast<size_t>(head0 + pair)]) +
                                         std::fabs(in[static_cast<size_t>(head0 + pair + half)])
                                   : 0;
    ASSERT_NEAR(got[static_cast<size_t>(i)], cpu[static_cast<size_t>(i)], 3e-7 * mag + 1e-30)
        << "element " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, VulkanRope,
                         ::testing::Values(RopeShape{64, 3, 64, 1000000.0f}, RopeShape{128, 2, 128, 10000.0f},
                                           RopeShape{10, 3, 6, 10000.0f}),
                         [](const ::testing::TestParamInfo<RopeShape>& p) {
                           return fmt::format("hd{}_heads{}_rot{}", p.param.head_dim, p.param.n_head,
                                              p.param.n_rot);
                         });

}  // namespace
}  // namespace minfer::backend::test
