#version 450
// y[t][r] = dot(W row r, x[t]) for many tokens (prefill): the tiled matrix-matrix matmul. A workgroup
// computes a tile of TR weight rows x TT tokens with MM_LANES x TG threads: thread (lane, g) is lane `lane`
// of matmul.glsl's fixed order for TQ = TT / TG of the tile's tokens and all TR rows. Per step of
// MM_LANES units, the TG threads of a lane dequantize its unit of the TR rows once into shared memory and
// each reuses all TR of them for its TQ tokens (every unit dequantized serves TT tokens; every activation
// read serves TR rows). The partials are then added by the same tree as matvec.comp, one row at a time,
// so every output has matvec.comp's bits: a token's result does not depend on the batch or the shader.
#include "common.glsl"

#define TR 8u                 // weight rows per tile
#define TG 4u                 // threads per lane (token groups)
#define TQ 8u                 // tokens per thread
#define TT (TG * TQ)          // tokens per tile
layout(local_size_x = 256) in;  // MM_LANES * TG
layout(constant_id = 0) const uint WG = 256;  // unused: the shape is fixed (kept for the host's spec list)
layout(constant_id = 1) const uint TYPE = 0;

layout(binding = 0) readonly buffer W { uint w[]; };     // rows [row0, row0 + rows) of the weight, from byte w_skip
layout(binding = 1) readonly buffer X { float x[]; };    // m tokens of k floats, from x_skip
layout(binding = 2) writeonly buffer Y { float y[]; };   // m tokens of n floats, from y_skip

layout(push_constant) uniform Push {
  uint k;          // elements per row
  uint n;          // rows of the whole weight (the output row stride)
  uint row0;       // first row of this dispatch (in the whole weight)
  uint rows;       // rows in this dispatch
  uint row_bytes;  // bytes per weight row
  uint w_skip;     // bytes
  uint x_skip;     // floats
  uint y_skip;     // floats
  uint m;          // tokens in this dispatch
  uint row_tiles;  // tiles along the rows: group g is row tile g % row_tiles, token tile g / row_tiles
} p;

#include "matmul.glsl"

shared vec4 wsh[TR * MM_LANES];   // one step's dequantized units, [row][lane]
shared float red[TT * MM_LANES];  // one row's partials, [token][lane]

void main() {
  const uint tile = group_index();
  const uint r0 = (tile % p.row_tiles) * TR, t0 = (tile / p.row_tiles) * TT;
  const uint lane = gl_LocalInvocationID.x % MM_LANES, g = gl_LocalInvocationID.x / MM_LANES;
  const uint tq0 = t0 + g * TQ;  // this thread's first token
  float acc[TR * TQ];
  for (uint i = 0; i < TR * TQ; ++i) acc[i] = 0.0;
  const uint nu = mm_units();
  for (uint c = 0; c < nu; c += MM_LANES) {  // uniform: every thread runs every step
    const uint u = c + lane;
    uint e0 = 0u, nv = 0u;
    for (uint i = g; i < TR; i += TG) {
      vec4 wv = vec4(0.0);
      if (u < nu && r0 + i < p.rows) mm_weight(p.w_skip + (r0 + i) * p.row_bytes, u, wv, e0, nv);
      wsh[i * MM_LANES + lane] = wv;
    }
    barrier();
    if (u < nu) {
      if (IS_PLAIN(TYPE)) {  // the other threads of the lane know e0 and nv from the unit alone
        e0 = 4u * u;
        nv = min(4u, p.k - e0);
      } else {
        e0 = dequant4_first(TYPE, u);
        nv = 4u;
      }
      for (uint j = 0; j < TQ; ++j) {
        if (tq0 + j < p.m) {
          const vec4 xv = mm_x(p.x_skip + (tq0 + j) * p.k + e0, nv);
          for (uint i = 0; i < TR; ++i) acc[i * TQ + j] = mm_fma(wsh[i * MM_LANES + lane], xv, acc[i * TQ + j], nv);
        }
      }
    }
    barrier();
  }
  // The tree, one row of the tile at a time (a partial of a token or row outside the dispatch is 0 and
  // never written out).
  const uint tid = gl_LocalInvocationID.x;
  for (uint i = 0; i < TR; ++i) {
    for (uint j = 0; j < TQ; ++j) red[(g * TQ + j) * MM_LANES + lane] = acc[i * TQ + j];
    barrier();
    for (uint s = MM_LANES / 2u; s > 0u; s >>= 1u) {
      for (uint q = tid; q < TT * s; q += MM_LANES * TG) {
        const uint a = (q / s) * MM_LANES + q % s;
        precise const float v = red[a] + red[a + s];
        red[a] = v;
      }
      barrier();
    }
    if (tid < TT && t0 + tid < p.m && r0 + i < p.rows) y[p.y_skip + (t0 + tid) * p.n + p.row0 + r0 + i] = red[tid * MM_LANES];
    barrier();
  }
}
