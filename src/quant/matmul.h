// Threaded matrix multiplication y = x * W^T for every compute type, through the CPU kernel table.
// Activations are converted once per call into the weight's vec_dot_type; prefill (m > 1) is tiled
// so each weight block is loaded once per tile of tokens; decode (m == 1) streams the weight.
//
//   quant::Weight w = quant::prepare_weight(DType::Q4_K, tensor->data, n_out, n_in, /*allow_repack=*/true);
//   quant::MatmulScratch scratch;   // reuse across calls
//   quant::matmul(w, x, n_tokens, y, pool, scratch);   // x: [n_tokens][n_in], y: [n_tokens][n_out]
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "core/dtype.h"
#include "core/status.h"
#include "core/thread_pool.h"

namespace minfer::kernels {
struct RepackKernels;
}  // namespace minfer::kernels

namespace minfer::quant {

// A 2-D weight: n rows (outputs) x k columns (inputs), GGUF row-major ([out][in], ne[0] = k).
struct Weight {
  DType type = DType::F32;
  int64_t n = 0;               // rows (outputs)
  int64_t k = 0;               // columns (inputs), a multiple of the type's block size
  const void* data = nullptr;  // [n][row_bytes] in `type`'s block layout (not owned unless `owned` is set)
  size_t row_bytes = 0;        // bytes of one row
  std::shared_ptr<const void> owned;  // storage when prepare_weight copied/repacked the data
  // Set when prepare_weight repacked `data` into `packed` (row groups interleaved for the GEMM kernel);
  // `data` still points at the original rows.
  const void* packed = nullptr;
  const kernels::RepackKernels* repack = nullptr;
};

// Reusable per-caller buffers (quantized activations). Not shared between concurrent matmul calls.
struct MatmulScratch {
  MatmulScratch() = default;
  MatmulScratch(const MatmulScratch&) = delete;
  MatmulScratch& operator=(const MatmulScratch&) = delete;
  MatmulScratch(MatmulScratch&&) = default;
  MatmulScratch& operator=(MatmulScratch&&) = default;

  // Returns at least `bytes` bytes, 64-byte aligned, keeping the allocation between calls.
  void* reserve(size_t bytes);

 private:
  struct Free {
    void operator()(void* p) const;
  };
  std::unique_ptr<void, Free> buffer_;
  size_t capacity_ = 0;
};

// Fails (naming the type / shape) unless `t` is a compute type and k a multiple of its block size.
Status check_weight(DType t, int64_t n, int64_t k);

// Prepares a weight once at load time. Without repacking it keeps the pointer (no copy); the data must
// outlive the Weight. Aborts on an invalid shape (call check_weight first for input-facing checks).
Weight prepare_weight(DType t, const void* data, int64_t n, int64_t k, bool allow_repack);

// y[i][r] = sum_j x[i][j] * w[r][j]; x: m rows of k floats (contiguous), y: m rows of n floats (contiguous).
// Splits output rows over the pool's threads; the result is identical for any thread count.
void matmul(const Weight& w, const float* x, int64_t m, float* y, ThreadPool& pool, MatmulScratch& scratch);

}  // namespace minfer::quant
