// The repacked (x8) GEMM of every x86 level this CPU runs (avx2: maddubs/madd, avx512: vpdpbusd, amx: int8
// tiles), called directly, whatever level the process detected: each output bitwise equal to the scalar
// reference dot.
// Besides random weights, raw blocks with extreme quants (every nibble 15, Q8_0 -128, all bits set) and
// activations that quantize to +-127 everywhere put the i16 partial sums of the AVX2 kernels at their
// proved bounds: any saturation would show as a mismatch.
#include <cstring>
#include <string>

#include <gtest/gtest.h>

#include "core/fp16.h"
#include "core/rng.h"
#include "quant/blocks.h"
#include "quant/kernels/kernels.h"
#include "test_util.h"

namespace minfer::quant {
namespace {

using kernels::ActBlockInfo;
using kernels::Isa;
using kernels::kRepackRows;
using test::quantized;
using test::random_floats;

const DType kQuantTypes[] = {DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1,
                             DType::Q8_0, DType::Q4_K, DType::Q5_K, DType::Q6_K};

enum class Weights { kRandomFloats, kRandomBytes, kAllOnes, kAll0x80 };

// Sets every block's float fields (d, m, dmin) to small valid fp16 values, leaving the quants as they are.
void sane_scales(DType t, uint8_t* data, size_t n_blocks, Rng& rng) {
  const size_t bb = traits(t).block_bytes;
  auto h = [&] { return fp32_to_fp16(0.001f + 0.01f * static_cast<float>(rng.uniform())); };
  for (size_t i = 0; i < n_blocks; ++i) {
    uint8_t* b = data + i * bb;
    switch (t) {
      case DType::Q6_K:
        reinterpret_cast<BlockQ6_K*>(b)->d = h();
        break;
      case DType::Q4_K:
        reinterpret_cast<BlockQ4_K*>(b)->d = h();
        reinterpret_cast<BlockQ4_K*>(b)->dmin = h();
        break;
      case DType::Q5_K:
        reinterpret_cast<BlockQ5_K*>(b)->d = h();
        reinterpret_cast<BlockQ5_K*>(b)->dmin = h();
        break;
      case DType::Q4_1:
      case DType::Q5_1: {  // d, m
        const uint16_t v[2] = {h(), h()};
        std::memcpy(b, v, 4);
        break;
      }
      default: {  // Q4_0, Q5_0, Q8_0: d first
        const uint16_t d = h();
        std::memcpy(b, &d, 2);
        break;
      }
    }
  }
}

std::vector<uint8_t> make_weights(DType t, Weights kind, int64_t n, int64_t k, uint64_t seed) {
  if (kind == Weights::kRandomFloats) return quantized(t, random_floats(n * k, seed), n, k);
  const size_t rb = *row_bytes(t, k);
  std::vector<uint8_t> w(rb * static_cast<size_t>(n) + 64);
  Rng rng(seed);
  for (uint8_t& b : w) {
    b = kind == Weights::kAllOnes   ? 0xFF
        : kind == Weights::kAll0x80 ? 0x80
                                    : static_cast<uint8_t>(rng.next_u64());
  }
  sane_scales(t, w.data(), rb / traits(t).block_bytes * static_cast<size_t>(n), rng);
  return w;
}

void check_repack(Isa isa, DType t, Weights kind, int64_t n, int64_t k, int m, const std::vector<float>& x) {
  const kernels::CpuKernels* level = kernels::cpu_kernels_for(isa);
  const kernels::TypeKernels& ref = kernels::cpu_kernels_for(Isa::kGeneric)->of(t);
  const kernels::RepackKernels* rp = level->of(t).repack;
  ASSERT_NE(rp, nullptr);
  const std::vector<uint8_t> w = make_weights(t, kind, n, k, 11 + static_cast<uint64_t>(kind));
  const size_t rb = *row_bytes(t, k);
  // Activations: the level's quantizer (bitwise the reference's), plus the Q8_0 block info matmul builds.
  const DType vdt = ref.vec_dot_type;
  const size_t xs = *row_bytes(vdt, k);
  std::vector<uint8_t> xq(xs * static_cast<size_t>(m));
  for (int i = 0; i < m; ++i) level->of(t).from_float(x.data() + i * k, xq.data() + i * xs, k);
  const int64_t nb = vdt == DType::Q8_0 ? k / 32 : 0;
  std::vector<ActBlockInfo> info(static_cast<size_t>(m * nb) + 1);
  for (int i = 0; i < m; ++i) {
    for (int64_t b = 0; b < nb; ++b) {
      const auto& blk = reinterpret_cast<const BlockQ8_0*>(xq.data() + i * xs)[b];
      int32_t s = 0;
      for (const int8_t q : blk.qs) s += q;
      info[static_cast<size_t>(i * nb + b)] = {-rp->act_offset * s, fp16_to_fp32(blk.d)};
    }
  }
  std::vector<uint8_t> packed(rp->packed_bytes(n, k) + 64);
  rp->pack(w.data(), rb, n, k, packed.data());
  const size_t group_bytes = rp->packed_bytes(kRepackRows, k);
  const int64_t groups = (n + kRepackRows - 1) / kRepackRows;
  std::vector<int8_t> xtiles;
  if (rp->pack_tiles != nullptr && m % kernels::kTileTokens == 0) {
    xtiles.resize(static_cast<size_t>(m * k));
    rp->pack_tiles(xq.data(), xs, m, k, xtiles.data());
  }
  // The 8-row kernel, the pair kernel and the AMX tiles (pairs of groups, whole tiles of tokens).
  enum Mode { kSingle, kPair, kTiles };
  for (const Mode mode : {kSingle, kPair, kTiles}) {
    if (mode == kPair && rp->gemm_pair == nullptr) continue;
    if (mode == kTiles && (rp->gemm_tiles == nullptr || m % kernels::kTileTokens != 0)) continue;
    const bool pair = mode != kSingle;
    std::vector<float> y(static_cast<size_t>(m * n), -1.0f);
    for (int64_t g = 0; g < groups; g += pair ? 2 : 1) {
      const bool use_pair = pair && g + 1 < groups;
      const int64_t r0 = g * kRepackRows;
      const int nr = static_cast<int>(std::min<int64_t>((use_pair ? 2 : 1) * kRepackRows, n - r0));
      const uint8_t* group = packed.data() + static_cast<size_t>(g) * group_bytes;
      if (use_pair && mode == kTiles) {
        rp->gemm_tiles(k, group, nr, xq.data(), xs, info.data(), static_cast<size_t>(nb), m, y.data() + r0,
                       static_cast<size_t>(n), xtiles.data());
        continue;
      }
      (use_pair ? rp->gemm_pair : rp->gemm)(k, group, nr, xq.data(), xs, info.data(), static_cast<size_t>(nb), m,
                                            y.data() + r0, static_cast<size_t>(n));
    }
    for (int i = 0; i < m; ++i) {
      for (int64_t r = 0; r < n; ++r) {
        float want = 0;
        ref.vec_dot(k, &want, w.data() + r * rb, xq.data() + i * xs);
        const float got = y[static_cast<size_t>(i * n + r)];
        ASSERT_EQ(0, std::memcmp(&got, &want, sizeof(float)))
            << kernels::isa_name(isa) << " " << dtype_name(t) << " weights=" << static_cast<int>(kind)
            << " mode=" << mode << " m=" << m << " token " << i << " row " << r << ": " << got << " vs "
            << want;
      }
    }
  }
}

class RepackTest : public ::testing::TestWithParam<std::tuple<Isa, DType>> {};

TEST_P(RepackTest, GemmEqualsReferenceDotBitwise) {
  const auto [isa, t] = GetParam();
  if (!kernels::isa_available(isa)) GTEST_SKIP() << kernels::isa_name(isa) << " not available on this CPU";
  const int64_t k = traits(t).block_size == 256 ? 768 : 224;
  // 13 and 29 rows: a partial row group (padding rows) and, for pair kernels, a partial pair.
  for (const int64_t n : {13, 29}) {
    for (const int m : {1, 2, 3, 4, 5, 8, 9}) {
      check_repack(isa, t, Weights::kRandomFloats, n, k, m, random_floats(m * k, 100 + m));
    }
  }
}

// The amx level's tiles: whole tiles of 16 tokens over pairs of row groups (29 rows: a partial pair and a
// lone last group); at the levels without tiles this runs the vector kernels on the same shapes.
TEST_P(RepackTest, TilesEqualReferenceDotBitwise) {
  const auto [isa, t] = GetParam();
  if (!kernels::isa_available(isa)) GTEST_SKIP() << kernels::isa_name(isa) << " not available on this CPU";
  if (isa == Isa::kAmx) {
    ASSERT_NE(kernels::cpu_kernels_for(isa)->of(t).repack->gemm_tiles, nullptr);
  }
  const int64_t k = traits(t).block_size == 256 ? 768 : 224;
  for (const int m : {16, 48}) check_repack(isa, t, Weights::kRandomFloats, 29, k, m, random_floats(m * k, 300 + m));
}

TEST_P(RepackTest, ExtremeQuantsDoNotSaturate) {
  const auto [isa, t] = GetParam();
  if (!kernels::isa_available(isa)) GTEST_SKIP() << kernels::isa_name(isa) << " not available on this CPU";
  const int64_t k = traits(t).block_size == 256 ? 512 : 256, n = 27;
  const int m = 16;  // a whole AMX tile
  // Token 0: every activation +1 (quantizes to +127), token 1: -1 (-127), the others random.
  std::vector<float> x = random_floats(m * k, 7);
  for (int64_t j = 0; j < k; ++j) {
    x[static_cast<size_t>(j)] = 1.0f;
    x[static_cast<size_t>(k + j)] = -1.0f;
  }
  for (const Weights kind : {Weights::kRandomBytes, Weights::kAllOnes, Weights::kAll0x80})
    check_repack(isa, t, kind, n, k, m, x);
}

std::string param_name(const ::testing::TestParamInfo<std::tuple<Isa, DType>>& p) {
  return std::string(kernels::isa_name(std::get<0>(p.param))) + "_" +
         std::string(dtype_name(std::get<1>(p.param)));
}

INSTANTIATE_TEST_SUITE_P(X86, RepackTest,
                         ::testing::Combine(::testing::Values(Isa::kAvx2, Isa::kAvxVnni, Isa::kAvx512, Isa::kAmx),
                                            ::testing::ValuesIn(kQuantTypes)),
                         param_name);

}  // namespace
}  // namespace minfer::quant
