// Every ISA's kernels against the scalar references, forcing each level this CPU has in turn:
// activation quantizers bitwise, dots within a float-reordering tolerance, tiles bitwise equal to the
// same ISA's vec_dot, and AVX2 == AVX-512 bitwise (same integer sums, same float order).
#include <cmath>
#include <cstring>
#include <string>

#include <gtest/gtest.h>

#include "core/fp16.h"
#include "quant/blocks.h"
#include "quant/kernels/kernels.h"
#include "quant/quant.h"
#include "quant/reference.h"
#include "test_util.h"

namespace minfer::kernels {
namespace {

using quant::test::kComputeTypes;
using quant::test::quantized;
using quant::test::random_floats;
using quant::test::test_lengths;

struct Param {
  Isa isa;
  DType type;
};

std::string param_name(const ::testing::TestParamInfo<Param>& p) {
  return std::string(isa_name(p.param.isa)) + "_" + std::string(dtype_name(p.param.type));
}

class KernelTest : public ::testing::TestWithParam<Param> {
 protected:
  const CpuKernels* table() {
    const CpuKernels* k = cpu_kernels_for(GetParam().isa);
    return k;
  }
  static const TypeKernels& reference() { return cpu_kernels_for(Isa::kGeneric)->of(GetParam().type); }
};

#define SKIP_IF_UNAVAILABLE()                                                      \
  const CpuKernels* kt = table();                                                  \
  if (kt == nullptr) GTEST_SKIP() << isa_name(GetParam().isa) << " not available"; \
  const TypeKernels& tk = kt->of(GetParam().type)

TEST_P(KernelTest, ActivationQuantizerIsBitwiseTheScalarOne) {
  SKIP_IF_UNAVAILABLE();
  const DType vdt = tk.vec_dot_type;
  ASSERT_EQ(vdt, quant::vec_dot_type(GetParam().type));
  for (int64_t n : test_lengths(GetParam().type)) {
    if (n % traits(vdt).block_size != 0) continue;
    std::vector<float> x = random_floats(n, 7 + static_cast<uint64_t>(n));
    x[0] = 0.0f;  // exact zeros and ties must round the same way
    if (n > 3) x[3] = 2.5f;
    if (n > 9) {  // two elements of the largest magnitude, opposite signs: the first one sets the sign
      x[5] = -10.0f;
      x[9] = 10.0f;
    }
    const size_t rb = *row_bytes(vdt, n);
    // Destination aligned for the blocks' scalar fields (fp16 / f32: 4 bytes) but not for vectors.
    std::vector<uint8_t> got(rb + 4), want(rb);
    tk.from_float(x.data(), got.data() + 4, n);
    reference().from_float(x.data(), want.data(), n);
    EXPECT_EQ(0, std::memcmp(got.data() + 4, want.data(), rb)) << "n=" << n;
  }
}

// Tolerance: the integer parts are exact; the float sum is reordered (8 lanes + horizontal add vs. a
// sequential sum, FMA vs separate rounding), which bounds the difference by ~n_terms * 2^-24 * sum|terms|.
// 1e-5 * sum|w*x| covers it for the lengths here (<= 4096 terms of 32-element blocks).
TEST_P(KernelTest, DotMatchesTheScalarReference) {
  SKIP_IF_UNAVAILABLE();
  const DType t = GetParam().type;
  for (int64_t n : test_lengths(t)) {
    const std::vector<float> wf = random_floats(n, 100 + static_cast<uint64_t>(n));
    const std::vector<float> xf = random_floats(n, 200 + static_cast<uint64_t>(n), 3.0f);
    // Offsets aligned for the blocks' scalar fields (4 bytes) but not for vectors.
    const std::vector<uint8_t> w = quantized(t, wf, 1, n, /*offset=*/4);
    const DType vdt = tk.vec_dot_type;
    std::vector<uint8_t> x(*row_bytes(vdt, n) + 12);
    reference().from_float(xf.data(), x.data() + 12, n);
    float got = 0, want = 0;
    tk.vec_dot(n, &got, w.data() + 4, x.data() + 12);
    reference().vec_dot(n, &want, w.data() + 4, x.data() + 12);
    std::vector<float> wd(static_cast<size_t>(n)), xd(static_cast<size_t>(n));
    quant::dequantize_row(t, w.data() + 4, wd.data(), n);
    quant::dequantize_row(vdt, x.data() + 12, xd.data(), n);
    double mag = 0;
    for (int64_t i = 0; i < n; ++i) mag += std::fabs(static_cast<double>(wd[i]) * xd[i]);
    EXPECT_NEAR(got, want, 1e-5 * mag + 1e-30) << "n=" << n;
    // The reference itself against dequantized f32 math (both sides use the same quantized values),
    // within the same reordering bound, plus for Q8_1 the fp16 rounding of its stored s = d*sum(q)
    // (the min term m_w * s uses it): at most |m_w * s| * 2^-11 per block.
    double exact = 0;
    for (int64_t i = 0; i < n; ++i) exact += static_cast<double>(wd[i]) * xd[i];
    double s_rounding = 0;
    if (vdt == DType::Q8_1) {
      const size_t wb = traits(t).block_bytes;
      for (int64_t b = 0; b < n / 32; ++b) {
        uint16_t m, sx;
        std::memcpy(&m, w.data() + 4 + b * wb + 2, 2);                         // Q4_1/Q5_1: d, m, ...
        std::memcpy(&sx, x.data() + 12 + b * sizeof(quant::BlockQ8_1) + 2, 2);  // Q8_1: d, s, ...
        s_rounding += std::fabs(fp16_to_fp32(m) * fp16_to_fp32(sx)) * 0x1p-11;
      }
    }
    EXPECT_NEAR(want, exact, 2e-5 * mag + s_rounding + 1e-30) << "reference vs dequantized, n=" << n;
  }
}

// The NEON quantized dots compute each block's exact integer sum with vectors and then the reference's
// own float expression block by block, so they are bitwise the scalar reference (F32 keeps lanes and the
// tolerance above; F16/BF16 use the generic table). Runs under qemu-aarch64 (the `neon` preset).
TEST_P(KernelTest, NeonQuantizedDotIsBitwiseTheReference) {
  SKIP_IF_UNAVAILABLE();
  const DType t = GetParam().type;
  if (GetParam().isa != Isa::kNeon || traits(t).block_size == 1) GTEST_SKIP() << "NEON quantized dots only";
  for (int64_t n : test_lengths(t)) {
    const std::vector<float> wf = random_floats(n, 300 + static_cast<uint64_t>(n));
    const std::vector<float> xf = random_floats(n, 400 + static_cast<uint64_t>(n), 3.0f);
    const std::vector<uint8_t> w = quantized(t, wf, 1, n, /*offset=*/4);
    std::vector<uint8_t> x(*row_bytes(tk.vec_dot_type, n) + 12);
    reference().from_float(xf.data(), x.data() + 12, n);
    float got = 0, want = 0;
    tk.vec_dot(n, &got, w.data() + 4, x.data() + 12);
    reference().vec_dot(n, &want, w.data() + 4, x.data() + 12);
    EXPECT_EQ(std::memcmp(&got, &want, sizeof(float)), 0) << "n=" << n << ": " << got << " vs " << want;
  }
}

TEST_P(KernelTest, EveryTileShapeEqualsVecDotBitwise) {
  SKIP_IF_UNAVAILABLE();
  const DType t = GetParam().type;
  const int64_t n = traits(t).block_size == 1 ? 300 : 512;
  const std::vector<float> wf = random_floats(n * kTileRows, 5);
  const std::vector<float> xf = random_floats(n * kTileCols, 6);
  // Pointers aligned for the blocks' scalar fields (4 bytes) but not for vectors.
  const std::vector<uint8_t> w = quantized(t, wf, kTileRows, n, 4);
  const DType vdt = tk.vec_dot_type;
  const size_t xs = *row_bytes(vdt, n);
  const size_t ws = *row_bytes(t, n);
  std::vector<uint8_t> x(xs * kTileCols + 4);
  for (int c = 0; c < kTileCols; ++c) tk.from_float(xf.data() + c * n, x.data() + 4 + c * xs, n);
  float want[kTileCols][kTileRows];
  for (int c = 0; c < kTileCols; ++c) {
    for (int r = 0; r < kTileRows; ++r)
      tk.vec_dot(n, &want[c][r], w.data() + 4 + r * ws, x.data() + 4 + c * xs);
  }
  for (int nr = 1; nr <= kTileRows; ++nr) {
    for (int nc = 1; nc <= kTileCols; ++nc) {
      float y[kTileCols][kTileRows + 1];
      std::memset(y, 0, sizeof(y));
      tk.gemm_tile(n, w.data() + 4, ws, nr, x.data() + 4, xs, nc, &y[0][0], kTileRows + 1);
      for (int c = 0; c < nc; ++c) {
        for (int r = 0; r < nr; ++r) {
          EXPECT_EQ(std::memcmp(&y[c][r], &want[c][r], sizeof(float)), 0)
              << "nr=" << nr << " nc=" << nc << " r=" << r << " c=" << c << ": " << y[c][r] << " vs "
              << want[c][r];
        }
      }
    }
  }
}

std::vector<Param> all_params() {
  std::vector<Param> out;
  for (Isa isa : {Isa::kGeneric, Isa::kAvx2, Isa::kAvxVnni, Isa::kAvx512, Isa::kAmx, Isa::kNeon}) {
    for (DType t : kComputeTypes) out.push_back({isa, t});
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Isa, KernelTest, ::testing::ValuesIn(all_params()), param_name);

TEST(KernelDispatch, Avx2AndAvx512AgreeBitwise) {
  const CpuKernels* a = cpu_kernels_for(Isa::kAvx2);
  const CpuKernels* b = cpu_kernels_for(Isa::kAvx512);
  if (a == nullptr || b == nullptr) GTEST_SKIP() << "needs AVX2 and AVX-512";
  for (DType t : kComputeTypes) {
    const int64_t n = 1024;
    const std::vector<uint8_t> w = quantized(t, random_floats(n, 11), 1, n);
    const DType vdt = a->of(t).vec_dot_type;
    std::vector<uint8_t> x(*row_bytes(vdt, n));
    a->of(t).from_float(random_floats(n, 12).data(), x.data(), n);
    float sa = 0, sb = 0;
    a->of(t).vec_dot(n, &sa, w.data(), x.data());
    b->of(t).vec_dot(n, &sb, w.data(), x.data());
    EXPECT_EQ(std::memcmp(&sa, &sb, sizeof(float)), 0) << dtype_name(t) << ": " << sa << " vs " << sb;
  }
}

TEST(KernelDispatch, DetectedIsaIsAvailableAndNamed) {
  EXPECT_TRUE(isa_available(detected_isa()));
  EXPECT_TRUE(isa_available(Isa::kGeneric));
  EXPECT_EQ(cpu_kernels().isa, detected_isa());
  for (DType t : kComputeTypes) {
    EXPECT_NE(cpu_kernels().of(t).vec_dot, nullptr) << dtype_name(t);
    EXPECT_NE(cpu_kernels().of(t).gemm_tile, nullptr) << dtype_name(t);
    EXPECT_NE(cpu_kernels().of(t).from_float, nullptr) << dtype_name(t);
  }
}

}  // namespace
}  // namespace minfer::kernels
