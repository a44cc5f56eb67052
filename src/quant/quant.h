// Public entry points of the quant layer: which types minfer computes with, their activation types,
// dequantize (any compute type -> f32) and the reference quantizers (f32 -> type, byte-identical to
// ggml's quantize_row_*_ref, i.e. to llama-quantize without an imatrix).
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/dtype.h"
#include "core/status.h"

namespace minfer::quant {

// The 11 weight types with dequantize, quantize and matmul support:
// F32 F16 BF16 Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q4_K Q5_K Q6_K.
bool is_compute_type(DType t);
// Whether quantize_row() can encode `t`: the compute types plus the activation formats Q8_1 and Q8_K.
bool can_quantize(DType t);
// ggml's vec_dot_type: the format activations are converted to before a dot with a `t` weight
// (Q4_0/Q5_0/Q8_0 -> Q8_0, Q4_1/Q5_1 -> Q8_1, K-quants -> Q8_K, F16 -> F16, BF16 -> BF16, F32 -> F32).
DType vec_dot_type(DType t);

// Fails (naming the type and length) unless `t` is a compute type and `n` a multiple of its block size.
Status check_row(DType t, int64_t n);

// dst[0..n) = decoded src. `n` must be a multiple of the block size (checked). Also handles Q8_1 / Q8_K.
void dequantize_row(DType t, const void* src, float* dst, int64_t n);
// Encodes n floats with ggml's reference quantizer for `t`; returns the bytes written (row_bytes(t, n)).
// `n` must be a multiple of the block size (checked). Deterministic and single-threaded.
size_t quantize_row(DType t, const float* src, void* dst, int64_t n);
// Encodes `n_rows` rows of `n_per_row` floats, splitting rows over `n_threads` std::threads (bytes are
// identical for any thread count). Returns the bytes written.
size_t quantize_rows(DType t, const float* src, void* dst, int64_t n_rows, int64_t n_per_row,
                     int n_threads = 1);

}  // namespace minfer::quant
