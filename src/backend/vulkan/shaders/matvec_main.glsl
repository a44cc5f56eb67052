// y[t][r] = dot(W row r, x[t]) for up to NCOLS tokens: the matrix-vector matmul for decode and small
// batches, over either arithmetic (matmul.glsl: f32 activations; matmul_q8.glsl: activations quantized
// to 8 bits, integer dot products). One workgroup of MM_LANES threads per weight row: thread i is lane i of
// the arithmetic's fixed order (its units unpacked in registers, its chain per token), then the tree over
// the lanes in shared memory. matmat_main.glsl computes every output with the same operations, so a
// token's result is the same bits whatever the batch and whichever shader ran it.
//
// The including shader (matvec.comp, matvec_q8.comp) gives #version, includes common.glsl and defines
// MM_Q8 for the 8-bit arithmetic; this file declares everything else.
layout(local_size_x = 64) in;  // MM_LANES
layout(constant_id = 0) const uint WG = 64;  // unused: the lane count is fixed (kept for the host's spec list)
layout(constant_id = 1) const uint TYPE = 0;
layout(constant_id = 2) const uint NCOLS = 1;

#include "matmul_io.glsl"
layout(push_constant) uniform Push { MM_PUSH_FIELDS } p;

#ifdef MM_Q8
#include "matmul_q8.glsl"
#else
#include "matmul.glsl"
#endif

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
    const MmUnit m = mm_unit(row, u);
    for (uint j = 0; j < NCOLS; ++j) acc[j] = mm_add(m, u, mm_token(j), acc[j]);
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
