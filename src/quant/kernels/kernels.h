// The CPU kernel table: per GGUF type, the activation format its dots take and the functions that
// compute them, filled once per ISA level by dispatch.cpp. Callers look a function up once per call.
// Kernels assume valid input (sizes, alignment-free pointers) and never fail.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/dtype.h"
#include "core/status.h"

namespace minfer::kernels {

// Kernel levels. The values index the tables; the x86 order (generic < avx2 < avxvnni < avx512 < amx) is
// dispatch's. amx is the avx512 level plus AMX int8 tiles for the repacked GEMM's prefill.
enum class Isa { kGeneric = 0, kAvx2 = 1, kAvx512 = 2, kNeon = 3, kAvxVnni = 4, kAmx = 5 };
inline constexpr int kIsaCount = 6;
std::string_view isa_name(Isa isa);

// Converts n floats to the activation format (n a multiple of its block size).
using FromFloatFn = void (*)(const float* x, void* y, int64_t n);
// *s = dot(w, x) over n elements; w in the weight type, x in its vec_dot_type.
using VecDotFn = void (*)(int64_t n, float* s, const void* w, const void* x);
// Tile of dots: y[c * ldy + r] = dot(w row r, x row c) for r < nr, c < nc, with nr <= kTileRows and
// nc <= kTileCols. Rows of w are w_stride bytes apart, rows of x x_stride bytes apart. Each output is
// computed with exactly the arithmetic of vec_dot, so tile shape never changes a result.
using GemmTileFn = void (*)(int64_t n, const void* w, size_t w_stride, int nr, const void* x, size_t x_stride,
                            int nc, float* y, size_t ldy);

inline constexpr int kTileRows = 4;
inline constexpr int kTileCols = 4;

// Load-time repacking into a row-interleaved layout: groups of kRepackRows weight rows, each block
// stored as kRepackRows rows' unsigned quants interleaved in 4-byte groups plus their scales as f32, so
// one vpdpbusd (or vpmaddubsw + vpmaddwd at the avx2 level) with a broadcast activation word advances
// all 8 rows (see docs/KERNELS.md).
inline constexpr int kRepackRows = 8;

// Per Q8_0 activation block, prepared once per matmul for the repacked kernels: the correction for the
// weights' unsigned offset (-act_offset * sum of the block's quants) and the block scale as f32.
struct ActBlockInfo {
  int32_t offset_sum = 0;
  float d = 0.0f;
};

struct RepackKernels {
  // Bytes of the packed form of n rows of k elements (n rounded up to kRepackRows).
  size_t (*packed_bytes)(int64_t n, int64_t k) = nullptr;
  // Packs n rows (src rows src_row_bytes apart) into dst; padding rows are zero.
  void (*pack)(const void* src, size_t src_row_bytes, int64_t n, int64_t k, void* dst) = nullptr;
  // For one packed row group: y[c * ldy + r] = dot(row r, x row c) for r < nr (<= kRepackRows), c < nc.
  // x rows are vec_dot_type blocks x_stride bytes apart; with Q8_0 activations xinfo[c * xinfo_stride + b]
  // describes block b of row c (unused otherwise: Q8_1 and Q8_K blocks carry their own sums).
  // Float accumulation is per row, sequential over blocks, mul then add: bitwise the scalar reference.
  void (*gemm)(int64_t k, const void* group, int nr, const void* x, size_t x_stride,
               const ActBlockInfo* xinfo, size_t xinfo_stride, int nc, float* y, size_t ldy) = nullptr;
  // The packed quants' unsigned offset (q + act_offset) that ActBlockInfo::offset_sum removes; 0 when the
  // kernel does not read xinfo.
  int32_t act_offset = 0;
  // Optional: gemm over two consecutive row groups at once (group and the one after it; nr <= 2 *
  // kRepackRows rows), with the same per-row arithmetic.
  void (*gemm_pair)(int64_t k, const void* group, int nr, const void* x, size_t x_stride,
                    const ActBlockInfo* xinfo, size_t xinfo_stride, int nc, float* y, size_t ldy) = nullptr;
  // Rows whose length k is not a multiple of this keep the plain layout.
  int32_t k_multiple = 1;
  // Optional (amx level): gemm over two consecutive row groups (as gemm_pair) for nc a multiple of
  // kTileTokens, on AMX tiles, with the same per-row arithmetic (bitwise gemm_pair's results). xtiles holds
  // the same nc tokens' activation quants as pack_tiles lays them out (the scales still come from x).
  void (*gemm_tiles)(int64_t k, const void* group, int nr, const void* x, size_t x_stride,
                     const ActBlockInfo* xinfo, size_t xinfo_stride, int nc, float* y, size_t ldy,
                     const int8_t* xtiles) = nullptr;
  // With gemm_tiles: lays out the quants of nc (a multiple of kTileTokens) activation rows, x_stride bytes
  // apart, for gemm_tiles: k bytes per row, each tile of tokens' rows starting nc_before * k bytes in.
  void (*pack_tiles)(const void* x, size_t x_stride, int nc, int64_t k, int8_t* out) = nullptr;
  // Tokens from which matmul takes two row groups per gemm_pair call (below it, gemm's 8 rows). A level's
  // choice, measured: 4 at avx512 (on Zen 4 a one-token GEMV streamed slower on the pairs), 1 at amx (on
  // the Intel Xeon the pairs' 512-bit stream is faster for one token too).
  int32_t pair_min_tokens = 4;
};

// Tokens per AMX tile (its rows): gemm_tiles takes tokens in multiples of this.
inline constexpr int kTileTokens = 16;

// Causal attention for one KV head: n_rows query rows (tokens x the GQA group's heads) that attend
// prefixes of one window of cells. Row r attends cells[0 .. lens[r]) in that order; its output is a
// function of its own q and window only (kernel_math.h), so tiling never changes a result.
struct AttnRows {
  int32_t head_dim = 0;
  int32_t n_rows = 0;
  const float* const* q = nullptr;  // [n_rows] query vectors (rounded to the cache type inside)
  float* const* out = nullptr;      // [n_rows] outputs; a row with an empty window gets zeros
  const int32_t* lens = nullptr;    // [n_rows]
  // [n_rows] or null (all 0): row r reduces over cells [starts[r], lens[r]) only, a sliding window. The
  // cells before it are skipped with exactly the arithmetic of a zero weight, and the softmax lanes stay
  // j % 16 of the index j in `cells`, so a caller that offsets `cells` by a multiple of 16 gets the same bits.
  const int32_t* starts = nullptr;
  const int32_t* cells = nullptr;   // [max lens] KV cells in position order
  const uint8_t* k = nullptr;       // cell c's head segment at k + c * row_bytes (v likewise)
  const uint8_t* v = nullptr;
  size_t row_bytes = 0;
  float scale = 1.0f;
};
using AttentionFn = void (*)(const AttnRows& a);

struct TypeKernels {
  DType vec_dot_type = DType::F32;
  FromFloatFn from_float = nullptr;  // f32 -> vec_dot_type (runtime activation quantizer)
  VecDotFn vec_dot = nullptr;
  GemmTileFn gemm_tile = nullptr;
  const RepackKernels* repack = nullptr;  // set where a repacked layout pays (avx2 and avx512 levels)
  AttentionFn attention = nullptr;        // KV cache element types (f32, f16)
};

// y[i] = silu(g[i]) * u[i] (kernel_math.h's silu).
using SwigluFn = void (*)(const float* g, const float* u, int64_t n, float* y);

struct CpuKernels {
  Isa isa = Isa::kGeneric;
  TypeKernels types[40];  // indexed by ggml type id; vec_dot == nullptr where unsupported
  SwigluFn swiglu = nullptr;
  const TypeKernels& of(DType t) const { return types[static_cast<uint32_t>(t)]; }
};

// Widest ISA this CPU and OS support, lowered by MINFER_CPU_ISA=generic|avx2|avxvnni|avx512|amx|neon,
// MINFER_NO_AVX512=1 or MINFER_NO_AVX2=1. Detected once.
Isa detected_isa();
// Whether this CPU can run `isa`'s kernels (and they were compiled in).
bool isa_available(Isa isa);
// The level a MINFER_CPU_ISA value names, when this CPU runs it; otherwise kInvalidArgument naming the value:
// "MINFER_CPU_ISA='X' is not a kernel level (known: ...)" or "... is not available on this CPU (it has:
// ...)". detected_isa() logs the error and keeps the widest level; the `minfer` binary refuses it at startup.
Result<Isa> forced_isa(std::string_view name);
// The table for the detected ISA (cached).
const CpuKernels& cpu_kernels();
// The table for a given ISA; nullptr when unavailable. Tests use this to force each level.
const CpuKernels* cpu_kernels_for(Isa isa);

// Filled by each ISA's translation unit (declared here, defined in generic/, x86_*/, arm_neon/).
namespace generic {
void fill(CpuKernels& k);
void fill_attention(CpuKernels& k);  // attention_generic.cpp (also SwiGLU)
}  // namespace generic
namespace avx2 {
void fill(CpuKernels& k);
void fill_repack(CpuKernels& k);  // repack_avx2.cpp: the x8 layouts' GEMM without VNNI (avx2 level only)
}  // namespace avx2
namespace avx512 {
void fill(CpuKernels& k);
// repack_avx512.cpp: the same kernels tuned for the Intel Xeon's decode (weights prefetched ahead in
// one-token passes, pairs from one token), for the amx level, which only Intel CPUs reach.
void fill_repack_xeon(CpuKernels& k);
}
namespace amx {
void fill(CpuKernels& k);  // repack_amx.cpp: adds gemm_tiles to the avx512 level's repacked types
}
namespace avxvnni {
void fill_repack(CpuKernels& k);  // repack_avxvnni.cpp: the x8 layouts' GEMM with VEX vpdpbusd
}
namespace neon {
void fill(CpuKernels& k);
}

}  // namespace minfer::kernels
