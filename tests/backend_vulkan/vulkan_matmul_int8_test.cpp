// The int8 matmul (quantize_q8.comp + matmul_q8.glsl, VulkanBackend::set_int8_matmul) for every quantized
// weight type, on awkward shapes (rows not a multiple of the 8-row tile, k of one unit or many 64-unit
// steps, 1, 7, 9, 33 and 64 tokens):
//   - bit for bit a host model of its arithmetic: the activations quantized by the CPU's own quantizers
//     (quant::ref::act_q8_0 / act_q8_1 / act_q8_K), exact integer dots, each unit's term with the CPU's
//     float operations, and the shaders' fixed order (lane chains, then the tree). This pins the device's
//     quantizer to the CPU's bytes and scales, and the integer dots to exact sums;
//   - the tiled and matrix-vector shaders give the same bits, and a token's result does not depend on
//     how many tokens share the dispatch;
//   - against the CPU backend's matmul the only difference left is the order of the float additions.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>

#include <fmt/format.h>

#include "backend_vulkan/vulkan_harness.h"
#include "core/fp16.h"
#include "quant/blocks.h"
#include "quant/quant.h"
#include "quant/reference.h"

namespace minfer::backend::test {
namespace {

using graph::OpKind;

constexpr int64_t kUnit = 32;  // elements per unit (matmul_q8.glsl)
constexpr int kLanes = 64;     // MM_LANES

// Byte offsets of the scale fields that the host model overwrites to read back integer values through
// quant::dequantize_row, and the block size. K-quants: d at 0, dmin at 2; Q6_K: d at 208.
struct Layout {
  size_t block = 0, d = 0, min = SIZE_MAX;  // min: m (Q4_1/Q5_1) or dmin (K); SIZE_MAX: none
  int64_t elems = 32;
};
Layout layout_of(DType t) {
  switch (t) {
    case DType::Q4_0:
      return {18, 0, SIZE_MAX, 32};
    case DType::Q4_1:
      return {20, 0, 2, 32};
    case DType::Q5_0:
      return {22, 0, SIZE_MAX, 32};
    case DType::Q5_1:
      return {24, 0, 2, 32};
    case DType::Q8_0:
      return {34, 0, SIZE_MAX, 32};
    case DType::Q4_K:
      return {144, 0, 2, 256};
    case DType::Q5_K:
      return {176, 0, 2, 256};
    case DType::Q6_K:
      return {210, 208, SIZE_MAX, 256};
    default:
      return {};
  }
}

float h2f(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return fp16_to_fp32(h);
}

// One weight row decoded with every block's d set to `d` and min/dmin to `m` (f16 bits): with d = 1, m = 0
// the values are the integers the shader's dot uses times their integer scales (sc * q for K-quants,
// q - offset for Q4_0/Q5_0/Q6_K); with d = 0, m = 1 a K-quant gives -min per element.
std::vector<float> decode_with(DType t, const uint8_t* row, int64_t k, uint16_t d, uint16_t m) {
  const Layout l = layout_of(t);
  std::vector<uint8_t> copy(row, row + *row_bytes(t, k));
  for (size_t b = 0; b < copy.size(); b += l.block) {
    std::memcpy(&copy[b + l.d], &d, 2);
    if (l.min != SIZE_MAX) std::memcpy(&copy[b + l.min], &m, 2);
  }
  std::vector<float> out(static_cast<size_t>(k));
  quant::dequantize_row(t, copy.data(), out.data(), k);
  return out;
}

// The int8 matmul's output for one row and one token, computed on the host exactly as the shaders do.
// `terms_abs` returns the sum of |term| (the scale of the summation-order bound).
float host_model(DType t, const uint8_t* row, int64_t k, const float* x, double* terms_abs) {
  const Layout l = layout_of(t);
  const DType act = quant::vec_dot_type(t);
  const int64_t units = k / kUnit;
  // The CPU's activation bytes and scales, per unit: q, d, and the second word's meaning.
  std::vector<int8_t> q(static_cast<size_t>(k));
  std::vector<float> xd(static_cast<size_t>(units)), xs(static_cast<size_t>(units));
  if (act == DType::Q8_K) {
    std::vector<quant::BlockQ8_K> blocks(static_cast<size_t>(k / 256));
    quant::ref::act_q8_K(x, blocks.data(), k);
    for (int64_t u = 0; u < units; ++u) {
      const quant::BlockQ8_K& b = blocks[static_cast<size_t>(u / 8)];
      std::memcpy(&q[static_cast<size_t>(u * kUnit)], b.qs + (u % 8) * kUnit, kUnit);
      xd[static_cast<size_t>(u)] = b.d;
    }
  } else if (act == DType::Q8_1) {
    std::vector<quant::BlockQ8_1> blocks(static_cast<size_t>(units));
    quant::ref::act_q8_1(x, blocks.data(), k);
    for (int64_t u = 0; u < units; ++u) {
      std::memcpy(&q[static_cast<size_t>(u * kUnit)], blocks[static_cast<size_t>(u)].qs, kUnit);
      xd[static_cast<size_t>(u)] = fp16_to_fp32(blocks[static_cast<size_t>(u)].d);
      xs[static_cast<size_t>(u)] = fp16_to_fp32(blocks[static_cast<size_t>(u)].s);
    }
  } else {
    std::vector<quant::BlockQ8_0> blocks(static_cast<size_t>(units));
    quant::ref::act_q8_0(x, blocks.data(), k);
    for (int64_t u = 0; u < units; ++u) {
      std::memcpy(&q[static_cast<size_t>(u * kUnit)], blocks[static_cast<size_t>(u)].qs, kUnit);
      xd[static_cast<size_t>(u)] = fp16_to_fp32(blocks[static_cast<size_t>(u)].d);
    }
  }
  const std::vector<float> wi = decode_with(t, row, k, 0x3C00, 0);  // integer values (times scales)
  const bool k_min = t == DType::Q4_K || t == DType::Q5_K;
  const std::vector<float> wm = k_min ? decode_with(t, row, k, 0, 0x3C00) : std::vector<float>{};
  float lanes[kLanes] = {};
  *terms_abs = 0;
  for (int64_t u = 0; u < units; ++u) {
    const uint8_t* blk = row + static_cast<size_t>(u * kUnit / l.elems) * l.block;
    int32_t sumi = 0, summ = 0;
    for (int64_t e = u * kUnit; e < (u + 1) * kUnit; ++e) {
      sumi += static_cast<int32_t>(wi[static_cast<size_t>(e)]) * q[static_cast<size_t>(e)];
      if (k_min) summ -= static_cast<int32_t>(wm[static_cast<size_t>(e)]) * q[static_cast<size_t>(e)];
    }
    const float dx = xd[static_cast<size_t>(u)];
    float term;
    if (t == DType::Q4_1 || t == DType::Q5_1) {
      const float a = static_cast<float>(sumi) * (h2f(blk + l.d) * dx);
      const float b = h2f(blk + l.min) * xs[static_cast<size_t>(u)];
      term = a + b;
    } else if (k_min) {
      const float a = (h2f(blk + l.d) * dx) * static_cast<float>(sumi);
      const float b = (h2f(blk + l.min) * dx) * static_cast<float>(summ);
      term = a - b;
    } else if (t == DType::Q6_K) {
      term = (h2f(blk + l.d) * dx) * static_cast<float>(sumi);
    } else {
      term = static_cast<float>(sumi) * (h2f(blk + l.d) * dx);
    }
    lanes[u % kLanes] += term;
    *terms_abs += std::fabs(static_cast<double>(term));
  }
  for (int s = kLanes / 2; s > 0; s /= 2)
    for (int i = 0; i < s; ++i) lanes[i] += lanes[i + s];
  return lanes[0];
}

class VulkanInt8Matmul : public ::testing::TestWithParam<WeightShape> {};

TEST_P(VulkanInt8Matmul, EqualsTheHostModelBitwiseAtEveryBatchSizeAndMatchesCpu) {
  MINFER_VK_OR_SKIP(vk);
  if (!vk->device_info().integer_dot) GTEST_SKIP() << vk->device_info().name << " has no integer dot product";
  ASSERT_TRUE(vk->set_int8_matmul(true).ok());
  const auto [type, k, n] = GetParam();
  const int64_t max_m = 64;
  const std::vector<uint8_t> w = make_weight(type, k, n, 23 + static_cast<uint64_t>(k * n));
  const std::vector<float> x = random_floats(static_cast<size_t>(k * max_m), 29 + static_cast<uint64_t>(k));
  const size_t rb = *row_bytes(type, k);
  // The host model of every (token, row), and its summation-order bound against the CPU.
  std::vector<float> model(static_cast<size_t>(n * max_m));
  std::vector<double> bound(model.size());
  for (int64_t t = 0; t < max_m; ++t) {
    for (int64_t r = 0; r < n; ++r) {
      double terms_abs = 0;
      const size_t at = static_cast<size_t>(t * n + r);
      model[at] = host_model(type, w.data() + static_cast<size_t>(r) * rb, k, x.data() + t * k, &terms_abs);
      // Same exact integers and per-unit products on both sides; each adds its k / 32 terms (the CPU per
      // block or super-block, after at most 3 roundings of a term) in its own order: at most (k / 32 + 8)
      // roundings of 2^-24 relative to sum |term| each, so twice that between them.
      bound[at] = 2.0 * static_cast<double>(k / kUnit + 8) * std::ldexp(1.0, -24) * terms_abs + 1e-30;
    }
  }
  for (int64_t m : {max_m, int64_t{1}, int64_t{7}, int64_t{9}, int64_t{33}}) {
    SCOPED_TRACE(m);
    OpCase c;
    const auto wid = c.add_weight("w", type, {k, n, 1, 1}, w.data(), w.size());
    const auto xid = c.add_activation(std::vector<float>(x.begin(), x.begin() + k * m), {k, m, 1, 1});
    c.add_op(op_node(OpKind::kMatMul, {wid, xid}, {n, m, 1, 1}));
    vk->set_matvec_max_tokens(0);  // tiled, whatever m
    const std::vector<float> tiled = run_vulkan(*vk, c);
    vk->set_matvec_max_tokens(UINT32_MAX);  // matrix-vector, 8 tokens per dispatch
    const std::vector<float> matvec = run_vulkan(*vk, c);
    vk->set_matvec_max_tokens(8);
    ASSERT_EQ(tiled.size(), static_cast<size_t>(n * m));
    ASSERT_EQ(matvec.size(), tiled.size());
    for (size_t i = 0; i < tiled.size(); ++i) {
      ASSERT_EQ(std::bit_cast<uint32_t>(tiled[i]), std::bit_cast<uint32_t>(matvec[i]))
          << "token " << i / static_cast<size_t>(n) << " row " << i % static_cast<size_t>(n);
      ASSERT_EQ(std::bit_cast<uint32_t>(tiled[i]), std::bit_cast<uint32_t>(model[i]))
          << "token " << i / static_cast<size_t>(n) << " row " << i % static_cast<size_t>(n) << ": device "
          << tiled[i] << ", host model " << model[i];
    }
    if (m == max_m || m == 7) {
      const std::vector<float> cpu = run_cpu(c);
      ASSERT_EQ(cpu.size(), tiled.size());
      double worst = 0;
      for (size_t i = 0; i < cpu.size(); ++i) {
        ASSERT_NEAR(tiled[i], cpu[i], bound[i])
            << "cpu, token " << i / static_cast<size_t>(n) << " row " << i % static_cast<size_t>(n);
        worst = std::max(worst, std::fabs(static_cast<double>(tiled[i]) - cpu[i]) / bound[i]);
      }
      fmt::print("{} m={}: largest |device - CPU| is {:.3f} of its bound\n", dtype_name(type), m, worst);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Types, VulkanInt8Matmul,
    ::testing::Values(WeightShape{DType::Q8_0, 32, 5}, WeightShape{DType::Q8_0, 2304, 17},
                      WeightShape{DType::Q4_0, 416, 9}, WeightShape{DType::Q4_0, 512, 256},
                      WeightShape{DType::Q4_1, 288, 33}, WeightShape{DType::Q5_0, 416, 7},
                      WeightShape{DType::Q5_1, 288, 11}, WeightShape{DType::Q4_K, 768, 13},
                      WeightShape{DType::Q4_K, 2304, 9}, WeightShape{DType::Q5_K, 512, 9},
                      WeightShape{DType::Q6_K, 768, 11}),
    weight_shape_name);

// Activations that stress the quantizers: an all-zero block (d = 0), ties between +max and -max (Q8_K keeps
// the first), a value exactly halfway between two steps (round half to even), tiny subnormal-scale blocks
// (an f16 d that is subnormal) and one huge element.
TEST(VulkanInt8, QuantizerEdgeCasesEqualTheHostModel) {
  MINFER_VK_OR_SKIP(vk);
  if (!vk->device_info().integer_dot) GTEST_SKIP() << vk->device_info().name << " has no integer dot product";
  ASSERT_TRUE(vk->set_int8_matmul(true).ok());
  const int64_t k = 512, n = 3;
  std::vector<float> x = random_floats(static_cast<size_t>(k), 5);
  for (int64_t i = 0; i < 32; ++i) x[static_cast<size_t>(i)] = 0.0f;  // block 0: zero
  x[40] = 3.0f;                                                       // block 1: +-max tie
  x[41] = -3.0f;
  x[300] = -3.5f;  // super-block 1's max,
  x[301] = 3.5f;   // negative first
  for (int64_t i = 64; i < 96; ++i) x[static_cast<size_t>(i)] = 1e-6f * static_cast<float>(i - 80);  // tiny
  x[100] = 127.0f;  // block 3: x*127/127
  x[101] = 0.5f;    // 0.5: a halfway step
  x[102] = 1.5f;
  x[200] = 1e4f;  // one huge element
  for (DType type : {DType::Q8_0, DType::Q4_1, DType::Q4_K, DType::Q6_K}) {
    SCOPED_TRACE(dtype_name(type));
    const std::vector<uint8_t> w = make_weight(type, k, n, 3);
    OpCase c;
    const auto wid = c.add_weight("w", type, {k, n, 1, 1}, w.data(), w.size());
    const auto xid = c.add_activation(x, {k, 1, 1, 1});
    c.add_op(op_node(OpKind::kMatMul, {wid, xid}, {n, 1, 1, 1}));
    const std::vector<float> got = run_vulkan(*vk, c);
    ASSERT_EQ(got.size(), static_cast<size_t>(n));
    const size_t rb = *row_bytes(type, k);
    for (int64_t r = 0; r < n; ++r) {
      double terms_abs = 0;
      const float want = host_model(type, w.data() + static_cast<size_t>(r) * rb, k, x.data(), &terms_abs);
      EXPECT_EQ(std::bit_cast<uint32_t>(got[static_cast<size_t>(r)]), std::bit_cast<uint32_t>(want))
          << "row " << r << ": device " << got[static_cast<size_t>(r)] << ", host model " << want;
    }
  }
}

// The path is chosen at create() and can be switched; F32/F16/BF16 weights ignore it (their vec_dot types
// are not 8-bit), so their results are the same bits either way.
TEST(VulkanInt8, PlainTypesIgnoreThePathAndTheArithmeticIsNamed) {
  MINFER_VK_OR_SKIP(vk);
  if (!vk->device_info().integer_dot) GTEST_SKIP() << vk->device_info().name << " has no integer dot product";
  const int64_t k = 130, n = 7, m = 9;
  const std::vector<uint8_t> w = make_weight(DType::F16, k, n, 8);
  OpCase c;
  const auto wid = c.add_weight("w", DType::F16, {k, n, 1, 1}, w.data(), w.size());
  const auto xid = c.add_activation(random_floats(static_cast<size_t>(k * m), 6), {k, m, 1, 1});
  c.add_op(op_node(OpKind::kMatMul, {wid, xid}, {n, m, 1, 1}));
  ASSERT_TRUE(vk->set_int8_matmul(false).ok());
  EXPECT_EQ(vk->arithmetic(), "f32 matmul");
  const std::vector<float> f32 = run_vulkan(*vk, c);
  ASSERT_TRUE(vk->set_int8_matmul(true).ok());
  EXPECT_EQ(vk->arithmetic(), "int8 matmul");
  const std::vector<float> int8 = run_vulkan(*vk, c);
  ASSERT_EQ(f32.size(), int8.size());
  for (size_t i = 0; i < f32.size(); ++i)
    ASSERT_EQ(std::bit_cast<uint32_t>(f32[i]), std::bit_cast<uint32_t>(int8[i]));
}

// Matmuls of one split over the same activations (Q, K and V; gate and up) share one quantization when
// their weights share an activation format: Q8_0 and Q4_0 weights (both Q8_0) read the first's, a Q4_K
// weight (Q8_K) quantizes again. Each output equals the same matmul run alone, bit for bit.
TEST(VulkanInt8, MatmulsOverTheSameActivationsShareOneQuantization) {
  MINFER_VK_OR_SKIP(vk);
  if (!vk->device_info().integer_dot) GTEST_SKIP() << vk->device_info().name << " has no integer dot product";
  ASSERT_TRUE(vk->set_int8_matmul(true).ok());
  const int64_t k = 512, n = 9, m = 3;
  const std::vector<float> x = random_floats(static_cast<size_t>(k * m), 41);
  const DType types[] = {DType::Q8_0, DType::Q4_0, DType::Q4_K};
  std::vector<std::vector<uint8_t>> weights;
  std::vector<std::vector<float>> alone;
  for (DType t : types) {
    weights.push_back(make_weight(t, k, n, 43 + weights.size()));
    OpCase c;
    const auto wid = c.add_weight(fmt::format("w{}", weights.size()), t, {k, n, 1, 1}, weights.back().data(),
                                  weights.back().size());
    const auto xid = c.add_activation(x, {k, m, 1, 1});
    c.add_op(op_node(OpKind::kMatMul, {wid, xid}, {n, m, 1, 1}));
    alone.push_back(run_vulkan(*vk, c));
  }
  // One graph: x, then per type its weight and its matmul, all described before one submit.
  graph::Graph g;
  auto add = [&](graph::Node node) {
    g.nodes.push_back(std::move(node));
    return static_cast<graph::NodeId>(g.size() - 1);
  };
  graph::Node xn;
  xn.op = OpKind::kReshape;
  xn.type = DType::F32;
  xn.ne = {k, m, 1, 1};
  const graph::NodeId xid = add(xn);
  std::vector<graph::NodeId> outs;
  for (size_t i = 0; i < std::size(types); ++i) {
    graph::Node wn;
    wn.op = OpKind::kWeight;
    wn.type = types[i];
    wn.ne = {k, n, 1, 1};
    wn.name = fmt::format("w{}", i + 1);  // registered by the solo runs above
    const graph::NodeId wid = add(wn);
    outs.push_back(add(op_node(OpKind::kMatMul, {wid, xid}, {n, m, 1, 1})));
  }
  const size_t out_bytes = static_cast<size_t>(n * m) * 4, align = vk->buffer_alignment();
  const size_t x_bytes = (x.size() * 4 + align - 1) / align * align,
               o_bytes = (out_bytes + align - 1) / align * align;
  auto arena = vk->alloc_buffer(x_bytes + std::size(types) * o_bytes);
  ASSERT_TRUE(arena.ok()) << arena.status().message();
  auto* base = static_cast<uint8_t*>((*arena)->base());
  ASSERT_TRUE(vk->upload(base, x.data(), x.size() * 4).ok());
  std::vector<void*> data(g.size(), nullptr);
  data[static_cast<size_t>(xid)] = base;
  for (size_t i = 0; i < std::size(types); ++i) {
    data[static_cast<size_t>(outs[i]) - 1] = const_cast<void*>(vk->weight_handle(fmt::format("w{}", i + 1)));
    data[static_cast<size_t>(outs[i])] = base + x_bytes + i * o_bytes;
  }
  const uint64_t before = vk->activation_quantizations();
  for (graph::NodeId id : outs) ASSERT_TRUE(vk->execute(g, id, data, ExecContext{}).ok());
  ASSERT_TRUE(vk->synchronize().ok());
  EXPECT_EQ(vk->activation_quantizations() - before, 2u);  // Q8_0 once (for Q8_0 and Q4_0), Q8_K once
  for (size_t i = 0; i < std::size(types); ++i) {
    std::vector<float> got(static_cast<size_t>(n * m));
    ASSERT_TRUE(vk->download(got.data(), data[static_cast<size_t>(outs[i])], out_bytes).ok());
    for (size_t j = 0; j < got.size(); ++j)
      ASSERT_EQ(std::bit_cast<uint32_t>(got[j]), std::bit_cast<uint32_t>(alone[i][j]))
          << dtype_name(types[i]) << " " << j;
  }
}

}  // namespace
}  // namespace minfer::backend::test
