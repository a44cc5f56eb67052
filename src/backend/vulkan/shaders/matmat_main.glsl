// y[t][r] = dot(W row r, x[t]) for many tokens (prefill): the tiled matrix-matrix matmul, over either
// arithmetic (matmul.glsl: f32 activations; matmul_q8.glsl: 8-bit activations, integer dot products). A
// workgroup computes a tile of TR weight rows x TT tokens with MM_LANES x TG threads: thread (lane, g) is
// lane `lane` of the arithmetic's fixed order for TQ = TT / TG of the tile's tokens and all TR rows. Per
// step of MM_LANES units, the TG threads of a lane unpack its unit of the TR rows once into shared memory
// and each reuses all TR of them for its TQ tokens (every unit unpacked serves TT tokens; every activation
// read serves TR rows). The partials are then added by the same tree as matvec_main.glsl, one row at a
// time, so every output has the matrix-vector shader's bits: a token's result does not depend on the batch
// or the shader.
//
// The including shader (matmat.comp, matmat_q8.comp) gives #version, includes common.glsl and defines
// MM_Q8 for the 8-bit arithmetic; this file declares everything else.
#define TR 8u                 // weight rows per tile
#define TG 4u                 // threads per lane (token groups)
#define TQ 8u                 // tokens per thread
#define TT (TG * TQ)          // tokens per tile
layout(local_size_x = 256) in;  // MM_LANES * TG
layout(constant_id = 0) const uint WG = 256;  // unused: the shape is fixed (kept for the host's spec list)
layout(constant_id = 1) const uint TYPE = 0;

#include "matmul_io.glsl"
layout(push_constant) uniform Push {
  MM_PUSH_FIELDS
  uint m;          // tokens in this dispatch
  uint row_tiles;  // tiles along the rows: group g is row tile g % row_tiles, token tile g / row_tiles
} p;

#define MM_SLOTS (TR * MM_LANES)  // one step's units, [row][lane]
#ifdef MM_Q8
#include "matmul_q8.glsl"
#else
#include "matmul.glsl"
#endif

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
    for (uint i = g; i < TR; i += TG)
      mm_share(i * MM_LANES + lane, u < nu && r0 + i < p.rows ? mm_unit(p.w_skip + (r0 + i) * p.row_bytes, u) : mm_zero());
    barrier();
    if (u < nu) {
      for (uint j = 0; j < TQ; ++j) {
        if (tq0 + j < p.m) {
          const uint tok = mm_token(tq0 + j);
          for (uint i = 0; i < TR; ++i) acc[i * TQ + j] = mm_add(mm_shared(i * MM_LANES + lane, u), u, tok, acc[i * TQ + j]);
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
