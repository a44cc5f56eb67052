// The float kernels (tiled attention, SwiGLU) at every ISA level against the scalar kernels, bitwise,
// and the scalar attention against a double-precision softmax attention written independently here; the
// same for sliding windows (rows reducing over cells [start, len) of the shared window).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <vector>

#include "core/fp16.h"
#include "core/rng.h"
#include "quant/kernels/kernel_math.h"
#include "quant/kernels/kernels.h"

namespace minfer::kernels {
namespace {

std::vector<Isa> simd_levels() {
  std::vector<Isa> out;
  for (Isa isa : {Isa::kAvx2, Isa::kAvxVnni, Isa::kAvx512, Isa::kAmx, Isa::kNeon}) {
    if (cpu_kernels_for(isa) != nullptr) out.push_back(isa);
  }
  return out;
}

struct Case {
  int32_t head_dim;
  int32_t n_rows;
  int32_t n_cells;  // cells in the shared window
  DType type;
};

// A KV head's cells (n_cells rows of a wider KV row, as in the cache), a shuffled window and rows whose
// windows are prefixes of it, some empty.
struct Problem {
  Case c;
  size_t row_bytes = 0;
  std::vector<uint8_t> k, v;
  std::vector<int32_t> cells, lens;
  std::vector<int32_t> starts;  // empty: no sliding window
  std::vector<std::vector<float>> q;

  explicit Problem(const Case& cs, uint64_t seed) : c(cs) {
    Rng rng(seed);
    const size_t elem = c.type == DType::F16 ? 2 : 4;
    const int32_t total_cells = c.n_cells + 5;
    row_bytes = static_cast<size_t>(c.head_dim) * 3 * elem;  // this head sits among two others
    k.resize(row_bytes * static_cast<size_t>(total_cells));
    v.resize(k.size());
    for (size_t cell = 0; cell < static_cast<size_t>(total_cells); ++cell) {
      for (int32_t d = 0; d < 3 * c.head_dim; ++d) {
        const float kv[2] = {static_cast<float>(rng.normal()) * 2.0f, static_cast<float>(rng.normal())};
        for (int s = 0; s < 2; ++s) {
          uint8_t* dst = (s == 0 ? k : v).data() + cell * row_bytes + static_cast<size_t>(d) * elem;
          if (c.type == DType::F16) {
            const uint16_t h = fp32_to_fp16(kv[s]);
            std::memcpy(dst, &h, 2);
          } else {
            std::memcpy(dst, &kv[s], 4);
          }
        }
      }
    }
    cells.resize(static_cast<size_t>(total_cells));
    std::iota(cells.begin(), cells.end(), 0);
    for (size_t i = cells.size() - 1; i > 0; --i) std::swap(cells[i], cells[rng.next_u64() % (i + 1)]);
    cells.resize(static_cast<size_t>(c.n_cells));
    for (int32_t r = 0; r < c.n_rows; ++r) {
      lens.push_back(
          r % 7 == 3 ? 0 : static_cast<int32_t>(rng.next_u64() % static_cast<uint64_t>(c.n_cells + 1)));
      std::vector<float> qr(static_cast<size_t>(c.head_dim));
      for (float& x : qr) x = static_cast<float>(rng.normal());
      q.push_back(std::move(qr));
    }
    if (c.n_rows > 0) lens.back() = c.n_cells;
  }

  // Sliding windows: each row starts somewhere in its window (every third row at 0).
  void add_starts(uint64_t seed) {
    Rng rng(seed);
    starts.clear();
    for (int32_t len : lens) {
      starts.push_back(len == 0 || starts.size() % 3 == 0 ? 0 : static_cast<int32_t>(rng.next_u64() % static_cast<uint64_t>(len)));
    }
  }

  // base > 0: the kernel gets the window from cell `base` on, with lens and starts shifted to match.
  std::vector<float> run(AttentionFn fn, int32_t head, int32_t base = 0) const {
    std::vector<float> out(static_cast<size_t>(c.n_rows * c.head_dim), -1.0f);
    std::vector<const float*> qp;
    std::vector<float*> op;
    for (int32_t r = 0; r < c.n_rows; ++r) {
      qp.push_back(q[static_cast<size_t>(r)].data());
      op.push_back(out.data() + static_cast<size_t>(r) * c.head_dim);
    }
    const size_t head_bytes = row_bytes / 3;
    AttnRows a;
    a.head_dim = c.head_dim;
    a.n_rows = c.n_rows;
    a.q = qp.data();
    a.out = op.data();
    std::vector<int32_t> l = lens, st = starts;
    for (int32_t& x : l) x = std::max(0, x - base);
    for (int32_t& x : st) x = std::max(0, x - base);
    a.lens = l.data();
    a.starts = starts.empty() ? nullptr : st.data();
    a.cells = cells.data() + base;
    a.k = k.data() + static_cast<size_t>(head) * head_bytes;
    a.v = v.data() + static_cast<size_t>(head) * head_bytes;
    a.row_bytes = row_bytes;
    a.scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
    fn(a);
    return out;
  }

  float load(const std::vector<uint8_t>& m, int32_t cell, int32_t head, int32_t d) const {
    const size_t off = static_cast<size_t>(cell) * row_bytes +
                       static_cast<size_t>(head * c.head_dim + d) * (c.type == DType::F16 ? 2 : 4);
    if (c.type == DType::F16) {
      uint16_t h;
      std::memcpy(&h, m.data() + off, 2);
      return fp16_to_fp32(h);
    }
    float f;
    std::memcpy(&f, m.data() + off, 4);
    return f;
  }
};

const Case kCases[] = {
    {64, 28, 300, DType::F16}, {64, 1, 37, DType::F16}, {128, 16, 129, DType::F16},
    {128, 3, 16, DType::F16},  {16, 5, 1, DType::F16},  {32, 13, 70, DType::F32},
    {64, 7, 513, DType::F32},  {24, 4, 40, DType::F16}, {8, 2, 9, DType::F32},
};

TEST(FloatKernels, ScalarAttentionMatchesADoublePrecisionSoftmax) {
  const AttentionFn fn_f16 = cpu_kernels_for(Isa::kGeneric)->of(DType::F16).attention;
  const AttentionFn fn_f32 = cpu_kernels_for(Isa::kGeneric)->of(DType::F32).attention;
  for (const Case& cs : kCases) {
    const Problem p(cs, 7);
    const std::vector<float> got = p.run(cs.type == DType::F16 ? fn_f16 : fn_f32, 1);
    const double scale = 1.0 / std::sqrt(static_cast<double>(cs.head_dim));
    for (int32_t r = 0; r < cs.n_rows; ++r) {
      const int32_t len = p.lens[static_cast<size_t>(r)];
      std::vector<double> s(static_cast<size_t>(len));
      for (int32_t j = 0; j < len; ++j) {
        double dot = 0;
        for (int32_t d = 0; d < cs.head_dim; ++d) {
          float qd = p.q[static_cast<size_t>(r)][static_cast<size_t>(d)];
          if (cs.type == DType::F16) qd = fp16_to_fp32(fp32_to_fp16(qd));  // q is rounded to the cache type
          dot += static_cast<double>(qd) * p.load(p.k, p.cells[static_cast<size_t>(j)], 1, d);
        }
        s[static_cast<size_t>(j)] = dot * scale;
      }
      const double mx = len > 0 ? *std::max_element(s.begin(), s.end()) : 0.0;
      double sum = 0;
      for (double& x : s) sum += (x = std::exp(x - mx));
      for (int32_t d = 0; d < cs.head_dim; ++d) {
        double want = 0;
        for (int32_t j = 0; j < len; ++j) {
          want += s[static_cast<size_t>(j)] / sum * p.load(p.v, p.cells[static_cast<size_t>(j)], 1, d);
        }
        // f32 arithmetic over <= 513 terms of O(1) values: a few 1e-6 relative; 2e-5 absolute covers it.
        EXPECT_NEAR(got[static_cast<size_t>(r * cs.head_dim + d)], want, 2e-5)
            << "D " << cs.head_dim << " row " << r << " len " << len << " d " << d;
      }
    }
  }
}

TEST(FloatKernels, TiledAttentionIsBitwiseTheScalarKernel) {
  const CpuKernels* ref = cpu_kernels_for(Isa::kGeneric);
  for (Isa isa : simd_levels()) {
    for (const Case& cs : kCases) {
      for (uint64_t seed : {1u, 2u}) {
        const Problem p(cs, seed);
        const auto want = p.run(ref->of(cs.type).attention, 2);
        const auto got = p.run(cpu_kernels_for(isa)->of(cs.type).attention, 2);
        ASSERT_EQ(0, std::memcmp(want.data(), got.data(), want.size() * sizeof(float)))
            << isa_name(isa) << " D " << cs.head_dim << " rows " << cs.n_rows << " cells " << cs.n_cells;
      }
    }
  }
}

TEST(FloatKernels, ExpAndSiluAreAccurate) {
  for (float x = -87.0f; x <= 0.0f; x += 0.0137f) {
    EXPECT_NEAR(math::exp_approx(x), std::exp(x), 2e-7 * std::exp(x) + 1e-38) << x;  // ~1 ulp
  }
  EXPECT_EQ(math::exp_approx(-90.0f), 0.0f);
  for (float x = -100.0f; x <= 100.0f; x += 0.0731f) {
    const double want = x / (1.0 + std::exp(-static_cast<double>(x)));
    EXPECT_NEAR(math::silu(x), want, 4e-7 * std::fabs(want) + 1e-30) << x;  // a few ulp
  }
}

TEST(FloatKernels, SwigluIsBitwiseTheScalarKernel) {
  Rng rng(3);
  std::vector<float> g(1003), u(1003);
  for (size_t i = 0; i < g.size(); ++i) {
    g[i] = static_cast<float>(rng.normal()) * (i % 5 == 0 ? 40.0f : 3.0f);
    u[i] = static_cast<float>(rng.normal());
  }
  std::vector<float> want(g.size()), got(g.size());
  cpu_kernels_for(Isa::kGeneric)->swiglu(g.data(), u.data(), static_cast<int64_t>(g.size()), want.data());
  for (Isa isa : simd_levels()) {
    cpu_kernels_for(isa)->swiglu(g.data(), u.data(), static_cast<int64_t>(g.size()), got.data());
    ASSERT_EQ(0, std::memcmp(want.data(), got.data(), want.size() * sizeof(float))) << isa_name(isa);
  }
}

}  // namespace
}  // namespace minfer::kernels

namespace minfer::kernels {
namespace {

const Case kWindowCases[] = {
    {64, 28, 300, DType::F16}, {64, 1, 37, DType::F16}, {32, 13, 70, DType::F32},
    {64, 7, 513, DType::F32},  {24, 4, 40, DType::F16}, {8, 2, 9, DType::F32},
};

TEST(FloatKernels, ScalarSlidingWindowAttentionMatchesADoublePrecisionSoftmax) {
  const CpuKernels* ref = cpu_kernels_for(Isa::kGeneric);
  for (const Case& cs : kWindowCases) {
    Problem p(cs, 9);
    p.add_starts(3);
    const std::vector<float> got = p.run(ref->of(cs.type).attention, 1);
    const double scale = 1.0 / std::sqrt(static_cast<double>(cs.head_dim));
    for (int32_t r = 0; r < cs.n_rows; ++r) {
      const int32_t len = p.lens[static_cast<size_t>(r)], start = p.starts[static_cast<size_t>(r)];
      std::vector<double> s;
      for (int32_t j = start; j < len; ++j) {
        double dot = 0;
        for (int32_t d = 0; d < cs.head_dim; ++d) {
          float qd = p.q[static_cast<size_t>(r)][static_cast<size_t>(d)];
          if (cs.type == DType::F16) qd = fp16_to_fp32(fp32_to_fp16(qd));
          dot += static_cast<double>(qd) * p.load(p.k, p.cells[static_cast<size_t>(j)], 1, d);
        }
        s.push_back(dot * scale);
      }
      const double mx = s.empty() ? 0.0 : *std::max_element(s.begin(), s.end());
      double sum = 0;
      for (double& x : s) sum += (x = std::exp(x - mx));
      for (int32_t d = 0; d < cs.head_dim; ++d) {
        double want = 0;
        for (int32_t j = start; j < len; ++j) {
          want += s[static_cast<size_t>(j - start)] / sum * p.load(p.v, p.cells[static_cast<size_t>(j)], 1, d);
        }
        // As the full-window test: f32 arithmetic over <= 513 terms of O(1) values.
        EXPECT_NEAR(got[static_cast<size_t>(r * cs.head_dim + d)], want, 2e-5)
            << "D " << cs.head_dim << " row " << r << " window [" << start << ", " << len << ") d " << d;
      }
    }
  }
}

// The SIMD kernels skip a window's first cells by zero weights, the scalar one by starting later: the same
// bits. And a caller passing the window from a multiple of 16 on (the CPU attention op, for a block of
// sliding-window rows) gets the same bits as from its start, which keeps results independent of the batch.
TEST(FloatKernels, SlidingWindowAttentionIsBitwiseTheScalarKernelFromAnyAlignedBase) {
  const CpuKernels* ref = cpu_kernels_for(Isa::kGeneric);
  std::vector<const CpuKernels*> levels = {ref};
  for (Isa isa : simd_levels()) levels.push_back(cpu_kernels_for(isa));
  for (const Case& cs : kWindowCases) {
    for (uint64_t seed : {1u, 2u}) {
      Problem p(cs, seed);
      p.add_starts(seed + 10);
      for (size_t r = 0; r < p.starts.size(); ++r) {  // every window starts at 16 or later (or is empty)
        p.starts[r] = std::max(p.starts[r], std::min(16, p.lens[r]));
      }
      const auto want = p.run(ref->of(cs.type).attention, 2);
      for (const CpuKernels* k : levels) {
        for (int32_t base : {0, 16}) {
          if (base >= cs.n_cells) continue;
          const std::vector<float> got = p.run(k->of(cs.type).attention, 2, base);
          ASSERT_EQ(0, std::memcmp(want.data(), got.data(), want.size() * sizeof(float)))
              << isa_name(k->isa) << " D " << cs.head_dim << " rows " << cs.n_rows << " base " << base;
        }
      }
    }
  }
}

}  // namespace
}  // namespace minfer::kernels
