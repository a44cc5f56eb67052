#version 450
// y[t][r] = dot(W row r, x[t]) for up to NCOLS tokens: the matrix-vector matmul for decode and small
// batches. One workgroup per weight row: its threads stride over the row (elements for F32/F16/BF16, groups
// of four dequantized in registers for the quantized types) and the partial sums are reduced with subgroupAdd, then
// across subgroups in shared memory in subgroup order. Each token's sum is computed the same way whatever
// NCOLS is, so a token's result does not depend on the batch it shares.
#include "common.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 64;
layout(constant_id = 1) const uint TYPE = 0;
layout(constant_id = 2) const uint NCOLS = 1;

layout(binding = 0) readonly buffer W { uint w[]; };     // rows [row0, row0 + rows) of the weight, from byte w_skip
layout(binding = 1) readonly buffer X { float x[]; };    // NCOLS tokens of k floats, from x_skip
layout(binding = 2) writeonly buffer Y { float y[]; };   // NCOLS tokens of n floats, from y_skip

layout(push_constant) uniform Push {
  uint k;          // elements per row
  uint n;          // rows of the whole weight (the output row stride)
  uint row0;       // first row of this dispatch (in the whole weight)
  uint rows;       // rows in this dispatch
  uint row_bytes;  // bytes per weight row
  uint w_skip;     // bytes
  uint x_skip;     // floats
  uint y_skip;     // floats
} p;

shared float red[MAX_COLS * MAX_WG];

void main() {
  const uint rr = group_index();
  if (rr >= p.rows) return;  // whole workgroup: uniform
  const uint tid = gl_LocalInvocationID.x;
  const uint row = p.w_skip + rr * p.row_bytes;
  float acc[NCOLS];
  for (uint j = 0; j < NCOLS; ++j) acc[j] = 0.0;
  if (IS_PLAIN(TYPE)) {
    for (uint e = tid; e < p.k; e += WG) {
      const float wv = LOAD_PLAIN(w, TYPE, row, e);
      for (uint j = 0; j < NCOLS; ++j) acc[j] = fma(wv, x[p.x_skip + j * p.k + e], acc[j]);
    }
  } else {
    const uint ng = p.k >> 2;
    for (uint g = tid; g < ng; g += WG) {
      vec4 wv;
      DEQUANT4(w, TYPE, row, g, wv);
      const uint e0 = dequant4_first(TYPE, g);
      for (uint j = 0; j < NCOLS; ++j) {
        const uint xo = p.x_skip + j * p.k + e0;
        acc[j] += dot(wv, vec4(x[xo], x[xo + 1u], x[xo + 2u], x[xo + 3u]));
      }
    }
  }
  for (uint j = 0; j < NCOLS; ++j) {
    const float s = subgroupAdd(acc[j]);
    if (subgroupElect()) red[j * MAX_WG + gl_SubgroupID] = s;
  }
  barrier();
  if (tid < NCOLS) {
    float s = 0.0;
    for (uint i = 0; i < gl_NumSubgroups; ++i) s += red[tid * MAX_WG + i];
    y[p.y_skip + tid * p.n + p.row0 + rr] = s;
  }
}
