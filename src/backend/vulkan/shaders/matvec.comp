#version 450
// y[t][r] = dot(W row r, x[t]) for up to NCOLS tokens: the matrix-vector matmul for decode and small
// batches. One workgroup of MM_LANES threads per weight row: thread i is lane i of matmul.glsl's fixed
// order (its units dequantized in registers, its chain of fma per token), then the tree over the lanes in
// shared memory. matmat.comp computes every output with the same operations, so a token's result is the
// same bits whatever the batch and whichever shader ran it.
#include "common.glsl"

layout(local_size_x = 64) in;  // MM_LANES
layout(constant_id = 0) const uint WG = 64;  // unused: the lane count is fixed (kept for the host's spec list)
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

#include "matmul.glsl"

shared float red[MAX_COLS * MM_LANES];

void main() {
  const uint rr = group_index();
  if (rr >= p.rows) return;  // whole workgroup: uniform
  const uint lane = gl_LocalInvocationID.x;
  const uint row = p.w_skip + rr * p.row_bytes;
  float acc[NCOLS];
  for (uint j = 0; j < NCOLS; ++j) acc[j] = 0.0;
  const uint nu = mm_units();
  for (uint u = lane; u < nu; u += MM_LANES) {
    vec4 wv;
    uint e0, nv;
    mm_weight(row, u, wv, e0, nv);
    for (uint j = 0; j < NCOLS; ++j) acc[j] = mm_fma(wv, mm_x(p.x_skip + j * p.k + e0, nv), acc[j], nv);
  }
  for (uint j = 0; j < NCOLS; ++j) red[j * MM_LANES + lane] = acc[j];
  barrier();
  for (uint s = MM_LANES / 2u; s > 0u; s >>= 1u) {
    if (lane < s) {
      for (uint j = 0; j < NCOLS; ++j) {
        precise const float v = red[j * MM_LANES + lane] + red[j * MM_LANES + lane + s];
        red[j * MM_LANES + lane] = v;
      }
    }
    barrier();
  }
  if (lane < NCOLS) y[p.y_skip + lane * p.n + p.row0 + rr] = red[lane * MM_LANES];
}
