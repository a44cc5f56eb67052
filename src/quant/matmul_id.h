// Matmul by expert (ggml's mul_mat_id) for mixture-of-experts FFNs: every (token, slot) row is multiplied
// by the matrix of the expert the router chose for that slot. Rows are grouped by expert, so an expert's
// matrix streams once per call past all the tokens that chose it (GEMM-shaped in prefill, with the same
// kernels and repacked layouts as quant::matmul), and experts nobody chose are not read at all.
//
//   std::vector<quant::Weight> experts;  // one prepare_weight per expert slice, all of one type and shape
//   quant::matmul_id(experts, x, ids, n_tokens, n_used, /*x_per_slot=*/false, y, pool, scratch);
#pragma once

#include <cstdint>
#include <span>

#include "quant/matmul.h"

namespace minfer::quant {

// y[t][s][r] = dot(experts[ids[t * n_used + s]] row r, x row), x row = t * n_used + s when x_per_slot,
// else t (one activation row per token shared by its slots). x rows have k floats, y rows n floats.
// Every output is computed with exactly the kernel arithmetic of quant::matmul (its value does not depend
// on which or how many other rows share its expert), so a token's result does not depend on its batch.
// Ids must be in [0, experts.size()) (the caller checks); every expert has the same type, n and k.
void matmul_id(std::span<const Weight> experts, const float* x, const int32_t* ids, int64_t n_tokens,
               int64_t n_used, bool x_per_slot, float* y, ThreadPool& pool, MatmulScratch& scratch);

}  // namespace minfer::quant
