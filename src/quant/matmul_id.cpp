// matmul_id: sorts the batch's (token, slot) rows by expert, converts each row into the weights'
// vec_dot_type at its sorted place, runs units of (expert, row block, token chunk) from one shared counter
// over the same tile / repacked-group kernels quant::matmul uses, then scatters the rows back.
#include "quant/matmul_id.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <vector>

#include "core/check.h"
#include "core/fp16.h"
#include "quant/blocks.h"
#include "quant/kernels/kernels.h"

namespace minfer::quant {
namespace {

// Same blocking as quant::matmul: rows per unit of the plain tile path and row groups per unit of the
// repacked path (the level's pair_min_tokens says from how many tokens the pair kernels pay).
constexpr int64_t kRowBlock = 16;
constexpr int64_t kUnitGroups = 4;

struct Unit {
  int32_t expert;
  int32_t n_rows;  // tokens (sorted rows) in this unit
  int64_t r0, r1;  // weight rows [r0, r1)
  int64_t p0;      // first sorted row
};

size_t align64(size_t n) { return (n + 63) / 64 * 64; }

}  // namespace

void matmul_id(std::span<const Weight> experts, const float* x, const int32_t* ids, int64_t n_tokens,
               int64_t n_used, bool x_per_slot, float* y, ThreadPool& pool, MatmulScratch& scratch) {
  MINFER_CHECK(!experts.empty() && n_tokens >= 0 && n_used > 0, "matmul_id: bad arguments");
  const int64_t total = n_tokens * n_used;
  if (total == 0) return;
  const Weight& w0 = experts[0];
  const int64_t k = w0.k, n = w0.n;
  const auto n_expert = static_cast<int64_t>(experts.size());
  const kernels::TypeKernels& tk = kernels::cpu_kernels().of(w0.type);
  const kernels::RepackKernels* rp = w0.repack;
  const DType vdt = tk.vec_dot_type;
  const bool with_info = rp != nullptr && vdt == DType::Q8_0;
  const int64_t nb = with_info ? k / 32 : 0;
  const size_t act_stride = vdt == DType::F32 ? static_cast<size_t>(k) * sizeof(float) : *row_bytes(vdt, k);

  // 1. Counting sort of the rows by expert (stable: token order within an expert).
  std::vector<int64_t> start(static_cast<size_t>(n_expert) + 1, 0);
  for (int64_t i = 0; i < total; ++i) ++start[static_cast<size_t>(ids[i]) + 1];
  for (int64_t e = 0; e < n_expert; ++e) start[static_cast<size_t>(e) + 1] += start[static_cast<size_t>(e)];
  std::vector<int64_t> order(static_cast<size_t>(total));  // sorted row -> (token, slot) row
  {
    std::vector<int64_t> next(start.begin(), start.end() - 1);
    for (int64_t i = 0; i < total; ++i) order[static_cast<size_t>(next[static_cast<size_t>(ids[i])]++)] = i;
  }

  // 2. Scratch: sorted activations (+ per-block info for Q8_0 repacked kernels), then sorted outputs.
  const size_t act_bytes = align64(act_stride * static_cast<size_t>(total));
  const size_t info_bytes = align64(static_cast<size_t>(total * nb) * sizeof(kernels::ActBlockInfo));
  const size_t out_bytes = static_cast<size_t>(total * n) * sizeof(float);
  auto* base = static_cast<uint8_t*>(scratch.reserve(act_bytes + info_bytes + out_bytes));
  uint8_t* act = base;
  auto* xinfo = reinterpret_cast<kernels::ActBlockInfo*>(base + act_bytes);
  auto* out = reinterpret_cast<float*>(base + act_bytes + info_bytes);
  const int32_t offset = rp != nullptr ? rp->act_offset : 0;
  auto convert = [&](int64_t p) {
    const int64_t src = x_per_slot ? order[static_cast<size_t>(p)] : order[static_cast<size_t>(p)] / n_used;
    uint8_t* row = act + static_cast<size_t>(p) * act_stride;
    if (vdt == DType::F32) {
      std::memcpy(row, x + src * k, act_stride);
    } else {
      tk.from_float(x + src * k, row, k);
    }
    const auto* blocks = reinterpret_cast<const BlockQ8_0*>(row);
    for (int64_t b = 0; b < nb; ++b) {
      int32_t s = 0;
      if (offset != 0) {
        for (int j = 0; j < 32; ++j) s += blocks[b].qs[j];
      }
      xinfo[p * nb + b] = {-offset * s, fp16_to_fp32(blocks[b].d)};
    }
  };
  const int nth = pool.n_threads();
  if (total == 1 || nth == 1) {
    for (int64_t p = 0; p < total; ++p) convert(p);
  } else {
    pool.run([&](int ith, int nt) {
      for (int64_t p = ith; p < total; p += nt) convert(p);
    });
  }

  // 3. Units: per used expert, row blocks x token chunks (the activation chunk stays within ~512 KiB).
  const int64_t chunk = std::max<int64_t>(4, static_cast<int64_t>((512u << 10) / act_stride) / 4 * 4);
  const int64_t rows_per_unit = rp != nullptr ? kUnitGroups * kernels::kRepackRows : kRowBlock;
  std::vector<Unit> units;
  for (int64_t e = 0; e < n_expert; ++e) {
    const int64_t p_begin = start[static_cast<size_t>(e)], p_end = start[static_cast<size_t>(e) + 1];
    for (int64_t p0 = p_begin; p0 < p_end; p0 += chunk) {
      const auto nr = static_cast<int32_t>(std::min(chunk, p_end - p0));
      for (int64_t r0 = 0; r0 < n; r0 += rows_per_unit) {
        units.push_back({static_cast<int32_t>(e), nr, r0, std::min(n, r0 + rows_per_unit), p0});
      }
    }
  }
  const size_t group_bytes = rp != nullptr ? rp->packed_bytes(kernels::kRepackRows, k) : 0;
  auto run_unit = [&](const Unit& u) {
    const Weight& w = experts[static_cast<size_t>(u.expert)];
    const uint8_t* a = act + static_cast<size_t>(u.p0) * act_stride;
    float* yo = out + static_cast<size_t>(u.p0 * n);
    if (rp != nullptr) {
      const bool use_pairs = rp->gemm_pair != nullptr && u.n_rows >= rp->pair_min_tokens;
      for (int64_t r = u.r0; r < u.r1;) {
        const bool pair = use_pairs && r + kernels::kRepackRows < u.r1;
        const auto fn = pair ? rp->gemm_pair : rp->gemm;
        const int nr = static_cast<int>(std::min<int64_t>((pair ? 2 : 1) * kernels::kRepackRows, n - r));
        fn(k, static_cast<const uint8_t*>(w.packed) + static_cast<size_t>(r / kernels::kRepackRows) * group_bytes,
           nr, a, act_stride, xinfo + u.p0 * nb, static_cast<size_t>(nb), u.n_rows, yo + r, static_cast<size_t>(n));
        r += static_cast<int64_t>(pair ? 2 : 1) * kernels::kRepackRows;
      }
      return;
    }
    const auto* wbytes = static_cast<const uint8_t*>(w.data);
    for (int64_t c = 0; c < u.n_rows; c += kernels::kTileCols) {
      const int nc = static_cast<int>(std::min<int64_t>(kernels::kTileCols, u.n_rows - c));
      for (int64_t r = u.r0; r < u.r1; r += kernels::kTileRows) {
        const int nr = static_cast<int>(std::min<int64_t>(kernels::kTileRows, u.r1 - r));
        tk.gemm_tile(k, wbytes + static_cast<size_t>(r) * w.row_bytes, w.row_bytes, nr,
                     a + static_cast<size_t>(c) * act_stride, act_stride, nc, yo + static_cast<size_t>(c * n) + r,
                     static_cast<size_t>(n));
      }
    }
  };
  const auto n_units = static_cast<int64_t>(units.size());
  if (nth == 1 || n_units == 1) {
    for (const Unit& u : units) run_unit(u);
  } else {
    std::atomic<int64_t> next{0};
    pool.run([&](int, int) {
      for (int64_t u = next.fetch_add(1, std::memory_order_relaxed); u < n_units;
           u = next.fetch_add(1, std::memory_order_relaxed)) {
        run_unit(units[static_cast<size_t>(u)]);
      }
    });
  }

  // 4. Sorted rows back to (token, slot) order.
  auto scatter = [&](int64_t p) {
    std::memcpy(y + order[static_cast<size_t>(p)] * n, out + p * n, static_cast<size_t>(n) * sizeof(float));
  };
  if (total == 1 || nth == 1) {
    for (int64_t p = 0; p < total; ++p) scatter(p);
  } else {
    pool.run([&](int ith, int nt) {
      for (int64_t p = ith; p < total; p += nt) scatter(p);
    });
  }
}

}  // namespace minfer::quant
