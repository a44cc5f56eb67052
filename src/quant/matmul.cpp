// matmul: converts activations once into the weight's vec_dot_type (rows split over threads), then
// computes output tiles. Each thread owns a contiguous range of weight rows; within it, a block of
// kRowBlock rows stays in L1/L2 while every token streams past it in kTileCols-wide tiles.
#include "quant/matmul.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "core/check.h"
#include "core/fp16.h"
#include "quant/blocks.h"
#include "quant/kernels/kernels.h"
#include "quant/quant.h"

namespace minfer::quant {
namespace {

// Rows of W kept hot while all tokens pass: 16 rows of a 4096-wide Q8_0 row are ~70 KB (L2-resident).
constexpr int64_t kRowBlock = 16;
// Row groups (of kernels::kRepackRows) per unit of work in the repacked GEMM.
constexpr int64_t kUnitGroups = 4;
// Up to this many tokens (decode) the repacked GEMM streams the weights, each thread its own share; more
// tokens share a counter of work units.
constexpr int64_t kStreamMaxTokens = 3;
// Below that, pieces per thread's share of row groups (what an idle thread can take from a slow one).
constexpr int64_t kPiecesPerShare = 16;

size_t act_row_bytes(DType vdt, int64_t k) {
  return *row_bytes(vdt, k);
}

}  // namespace

void MatmulScratch::Free::operator()(void* p) const {
  std::free(p);
}

void* MatmulScratch::reserve(size_t bytes) {
  if (bytes > capacity_) {
    const size_t cap = (std::max(bytes, capacity_ + capacity_ / 2) + 63) / 64 * 64;
    void* p = std::aligned_alloc(64, cap);
    MINFER_CHECK(p != nullptr, "matmul: out of memory reserving {} bytes", cap);
    buffer_.reset(p);
    capacity_ = cap;
  }
  return buffer_.get();
}

Status check_weight(DType t, int64_t n, int64_t k) {
  if (n <= 0) return invalid_argument("matmul: weight has {} rows", n);
  return check_row(t, k);
}

Weight prepare_weight(DType t, const void* data, int64_t n, int64_t k, bool allow_repack) {
  const Status st = check_weight(t, n, k);
  MINFER_CHECK(st.ok(), "prepare_weight: {}", st.message());
  MINFER_CHECK(data != nullptr, "prepare_weight: null data");
  Weight w;
  w.type = t;
  w.n = n;
  w.k = k;
  w.data = data;
  w.row_bytes = *row_bytes(t, k);
  const kernels::RepackKernels* rp = kernels::cpu_kernels().of(t).repack;
  if (allow_repack && rp != nullptr && k % rp->k_multiple == 0) {
    const size_t bytes = rp->packed_bytes(n, k);
    void* p = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
    MINFER_CHECK(p != nullptr, "prepare_weight: out of memory repacking {} bytes", bytes);
    rp->pack(data, w.row_bytes, n, k, p);
    w.owned = std::shared_ptr<const void>(p, [](const void* q) { std::free(const_cast<void*>(q)); });
    w.packed = p;
    w.repack = rp;
  }
  return w;
}

// Repacked weights: activations quantized with their per-block sums, then 8-row groups x token chunks.
static void matmul_repacked(const Weight& w, const float* x, int64_t m, float* y, ThreadPool& pool,
                            MatmulScratch& scratch) {
  const kernels::TypeKernels& tk = kernels::cpu_kernels().of(w.type);
  const int64_t k = w.k, n = w.n;
  // Q8_0 activations also get per-block info (offset correction, f32 scale); Q8_1 / Q8_K carry their own.
  const bool with_info = tk.vec_dot_type == DType::Q8_0;
  const int64_t nb = with_info ? k / 32 : 0;
  const size_t act_stride = act_row_bytes(tk.vec_dot_type, k);
  const size_t act_bytes = (act_stride * static_cast<size_t>(m) + 63) / 64 * 64;
  // AMX tiles take pairs of row groups and whole tiles of tokens, their quants laid out by pack_tiles; the
  // tokens left over go to the vector kernels (the same bits either way).
  const bool use_tiles = w.repack->gemm_tiles != nullptr && m >= kernels::kTileTokens;
  const int64_t m_tiles = use_tiles ? m / kernels::kTileTokens * kernels::kTileTokens : 0;
  const size_t info_bytes = (static_cast<size_t>(m * nb) * sizeof(kernels::ActBlockInfo) + 63) / 64 * 64;
  auto* buf = static_cast<uint8_t*>(scratch.reserve(act_bytes + info_bytes + static_cast<size_t>(m_tiles * k)));
  auto* xinfo = reinterpret_cast<kernels::ActBlockInfo*>(buf + act_bytes);
  auto* xtiles = reinterpret_cast<int8_t*>(buf + act_bytes + info_bytes);
  const int32_t offset = w.repack->act_offset;
  auto quantize = [&](int64_t i) {
    uint8_t* row = buf + static_cast<size_t>(i) * act_stride;
    tk.from_float(x + i * k, row, k);
    const auto* blocks = reinterpret_cast<const BlockQ8_0*>(row);
    for (int64_t b = 0; b < nb; ++b) {
      int32_t s = 0;
      if (offset != 0) {  // signed layouts (AVX2 Q8_0) need no offset correction
        for (int j = 0; j < 32; ++j) s += blocks[b].qs[j];
      }
      xinfo[i * nb + b] = {-offset * s, fp16_to_fp32(blocks[b].d)};
    }
  };
  const int nth = pool.n_threads();
  const int64_t n_tiles = m_tiles / kernels::kTileTokens;
  auto pack_tile = [&](int64_t t) {
    const int64_t c0 = t * kernels::kTileTokens;
    w.repack->pack_tiles(buf + static_cast<size_t>(c0) * act_stride, act_stride, kernels::kTileTokens, k,
                         xtiles + static_cast<size_t>(c0 * k));
  };
  if (m == 1 || nth == 1) {
    for (int64_t i = 0; i < m; ++i) quantize(i);
    for (int64_t t = 0; t < n_tiles; ++t) pack_tile(t);
  } else {
    pool.run([&](int ith, int nt) {
      for (int64_t i = ith; i < m; i += nt) quantize(i);
    });
    if (n_tiles > 0) {
      pool.run([&](int ith, int nt) {
        for (int64_t t = ith; t < n_tiles; t += nt) pack_tile(t);
      });
    }
  }
  const int64_t n_groups = (n + kernels::kRepackRows - 1) / kernels::kRepackRows;
  const size_t group_bytes = w.repack->packed_bytes(kernels::kRepackRows, k);
  // Tokens per pass: keep the activation chunk within ~512 KiB of L2 while a row group streams past it.
  // With tiles, whole tiles of tokens (chunks start on a tile), as many as 1 MiB of their tile bytes (k
  // per token): each call unpacks its pair's weights once for all its tiles, so longer chunks amortize
  // it (7B Q4_K_M pp512 on the Intel Xeon: 55 -> 65-68 tok/s against 512 KiB of activation rows, where
  // ffn_down's k = 18944 left one tile per call).
  const auto fit =
      static_cast<int64_t>(use_tiles ? (1u << 20) / static_cast<size_t>(k) : (512u << 10) / act_stride);
  const int64_t chunk = use_tiles ? std::max<int64_t>(1, fit / kernels::kTileTokens) * kernels::kTileTokens
                                  : std::max<int64_t>(4, fit / 4 * 4);
  // Pair kernels (two row groups per 512-bit stream) pay once a few tokens share the unpacked weights, and
  // on some CPUs from one token (the level's pair_min_tokens).
  const bool use_pairs = w.repack->gemm_pair != nullptr && m >= w.repack->pair_min_tokens;
  // One kernel call on `rows` rows from group g and tokens [c0, c0 + nc); the tile kernel also takes the
  // tokens' tiled quants (extra).
  auto run = [&](auto fn, int64_t g, int rows, int64_t c0, int nc, auto... extra) {
    const int64_t r = g * kernels::kRepackRows;
    const int nr = static_cast<int>(std::min<int64_t>(rows, n - r));
    fn(k, static_cast<const uint8_t*>(w.packed) + static_cast<size_t>(g) * group_bytes, nr,
       buf + static_cast<size_t>(c0) * act_stride, act_stride, xinfo + c0 * nb, static_cast<size_t>(nb), nc,
       y + static_cast<size_t>(c0 * n + r), static_cast<size_t>(n), extra...);
  };
  auto run_groups = [&](int64_t g0, int64_t g1, int64_t c0, int nc) {
    // Tiles: the whole tiles of tokens among [c0, c0 + nc) (c0 starts a tile), on pairs of groups.
    const int tiled = use_tiles ? static_cast<int>(std::clamp<int64_t>(m_tiles - c0, 0, nc)) : 0;
    for (int64_t g = g0; g < g1;) {
      // This step covers groups g and g + 1 where a pair or tile kernel takes them (a lone last group
      // has neither).
      const bool pair = g + 1 < g1 && (use_pairs || tiled > 0);
      const int done = pair ? tiled : 0;
      if (done > 0) run(w.repack->gemm_tiles, g, 2 * kernels::kRepackRows, c0, done, xtiles + c0 * k);
      if (done < nc) {
        if (pair && use_pairs) {
          run(w.repack->gemm_pair, g, 2 * kernels::kRepackRows, c0 + done, nc - done);
        } else {
          for (int64_t h = g; h < g + (pair ? 2 : 1); ++h)
            run(w.repack->gemm, h, kernels::kRepackRows, c0 + done, nc - done);
        }
      }
      g += pair ? 2 : 1;
    }
  };
  if (nth == 1) {
    for (int64_t c0 = 0; c0 < m; c0 += chunk)
      run_groups(0, n_groups, c0, static_cast<int>(std::min(chunk, m - c0)));
    return;
  }
  if (m <= kStreamMaxTokens) {
    // Streaming a few tokens: each thread reads its own contiguous share front to back (a shared counter
    // interleaving the threads' units cost a third of the bandwidth), in pieces taken from a counter per
    // share. A thread done early takes the remaining pieces of the other shares, so a thread that is
    // descheduled or slower (another VM on its core) does not hold up the step.
    // Shares and pieces of whole pairs where pairs run (a piece's lone last group would take the 8-row
    // kernel).
    const int64_t step = use_pairs ? 2 : 1;
    const int64_t share = (n_groups + nth * step - 1) / (nth * step) * step;
    const int64_t piece = std::max<int64_t>(1, share / kPiecesPerShare / step) * step;
    const auto next = std::make_unique<std::atomic<int64_t>[]>(static_cast<size_t>(nth));  // zeroed
    pool.run([&](int ith, int nt) {
      for (int v = 0; v < nt; ++v) {
        const int s = (ith + v) % nt;  // its own share first
        const int64_t g0 = s * share, g1 = std::min(n_groups, g0 + share);
        std::atomic<int64_t>& counter = next[static_cast<size_t>(s)];
        for (int64_t g = g0 + counter.fetch_add(piece, std::memory_order_relaxed); g < g1;
             g = g0 + counter.fetch_add(piece, std::memory_order_relaxed)) {
          run_groups(g, std::min(g1, g + piece), 0, static_cast<int>(m));
        }
      }
    });
    return;
  }
  // Prefill: units of kUnitGroups row groups x one token chunk, chunk by chunk, from a shared counter: a
  // thread that is descheduled or slower costs one unit, not a whole static share.
  const int64_t units_per_chunk = (n_groups + kUnitGroups - 1) / kUnitGroups;
  const int64_t n_units = units_per_chunk * ((m + chunk - 1) / chunk);
  std::atomic<int64_t> next{0};
  pool.run([&](int, int) {
    for (int64_t u = next.fetch_add(1, std::memory_order_relaxed); u < n_units;
         u = next.fetch_add(1, std::memory_order_relaxed)) {
      const int64_t c0 = u / units_per_chunk * chunk;
      const int64_t g0 = u % units_per_chunk * kUnitGroups;
      run_groups(g0, std::min(n_groups, g0 + kUnitGroups), c0, static_cast<int>(std::min(chunk, m - c0)));
    }
  });
}

void matmul(const Weight& w, const float* x, int64_t m, float* y, ThreadPool& pool, MatmulScratch& scratch) {
  MINFER_CHECK(w.data != nullptr && m >= 0, "matmul: unprepared weight");
  if (m == 0) return;
  if (w.repack != nullptr) {
    matmul_repacked(w, x, m, y, pool, scratch);
    return;
  }
  const kernels::TypeKernels& tk = kernels::cpu_kernels().of(w.type);
  MINFER_DCHECK(tk.gemm_tile != nullptr);
  const int64_t n = w.n;
  const int64_t k = w.k;
  const int nth = pool.n_threads();

  // 1. Activations -> vec_dot_type, once per call (F32 weights read x directly).
  const void* act = x;
  size_t act_stride = static_cast<size_t>(k) * sizeof(float);
  if (tk.vec_dot_type != DType::F32) {
    act_stride = act_row_bytes(tk.vec_dot_type, k);
    auto* buf = static_cast<uint8_t*>(scratch.reserve(act_stride * static_cast<size_t>(m)));
    if (m == 1 || nth == 1) {
      for (int64_t i = 0; i < m; ++i) tk.from_float(x + i * k, buf + static_cast<size_t>(i) * act_stride, k);
    } else {
      pool.run([&](int ith, int nt) {
        for (int64_t i = ith; i < m; i += nt)
          tk.from_float(x + i * k, buf + static_cast<size_t>(i) * act_stride, k);
      });
    }
    act = buf;
  }

  // 2. Output tiles. Rows are split into contiguous per-thread ranges aligned to kTileRows.
  const auto* wbytes = static_cast<const uint8_t*>(w.data);
  const auto* abytes = static_cast<const uint8_t*>(act);
  const size_t ldy = static_cast<size_t>(n);
  auto compute = [&](int ith, int nt) {
    const int64_t n_tiles = (n + kernels::kTileRows - 1) / kernels::kTileRows;
    const int64_t t0 = n_tiles * ith / nt;
    const int64_t t1 = n_tiles * (ith + 1) / nt;
    const int64_t r_begin = t0 * kernels::kTileRows;
    const int64_t r_end = std::min(n, t1 * kernels::kTileRows);
    for (int64_t rb = r_begin; rb < r_end; rb += kRowBlock) {
      const int64_t rb_end = std::min(r_end, rb + kRowBlock);
      for (int64_t c = 0; c < m; c += kernels::kTileCols) {
        const int nc = static_cast<int>(std::min<int64_t>(kernels::kTileCols, m - c));
        for (int64_t r = rb; r < rb_end; r += kernels::kTileRows) {
          const int nr = static_cast<int>(std::min<int64_t>(kernels::kTileRows, rb_end - r));
          tk.gemm_tile(k, wbytes + static_cast<size_t>(r) * w.row_bytes, w.row_bytes, nr,
                       abytes + static_cast<size_t>(c) * act_stride, act_stride, nc,
                       y + static_cast<size_t>(c) * ldy + r, ldy);
        }
      }
    }
  };
  if (nth == 1) {
    compute(0, 1);
  } else {
    pool.run(compute);
  }
}

}  // namespace minfer::quant
