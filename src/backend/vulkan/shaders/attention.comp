#version 450
// Causal GQA attention over a layer's KV cells (F32, F16 or Q8_0), flash-style: one workgroup per (token,
// query head) walks the token's window (BatchView's CSR window_offsets / window_cells, in position order)
// in tiles of WG cells with an online softmax, so no more than one tile of scores is ever held (in shared
// memory). Per tile: thread j scores cell j0 + j; every thread takes the tile maximum m' (max is exact, so
// its order is free), thread j computes p_j = exp(s_j - m'); then each thread rescales its running sum and
// its output dimensions by exp(m - m') and adds the tile's cells in window order. Every sum has a fixed
// order that depends only on the token's window and the constant WG, never on the batch, the grid or the
// device's subgroup size (no subgroup operation is used).
//
// Scores are the CPU's: F32/F16 q (rounded to the cache type) dotted with K by an fma chain over d from 0,
// times scale (kernel_math.h); Q8_0 q quantized to q8_0 as the CPU's activation quantizer does
// (d = amax / 127 and id = 127 / amax correctly rounded, round to nearest even), then per block the exact
// integer sum times (d_k * d_q), accumulated over blocks in order. exp is kernel_math.h's polynomial. The
// output differs from the CPU's two-pass softmax in accumulation order only (see docs/BACKENDS.md).
#include "common.glsl"

#define WG 64u            // threads per workgroup and cells per tile (any subgroup size divides or covers it)
#define MAX_HEAD_DIM 256u  // the host refuses larger heads
#define MAX_DPT 4u         // output dimensions per thread: MAX_HEAD_DIM / WG

layout(local_size_x = 64) in;
layout(constant_id = 0) const uint TYPE = 0;

layout(binding = 0) readonly buffer Q { float q[]; };         // {head_dim, n_head, n_tokens}
layout(binding = 1) readonly buffer K { uint kc[]; };         // the layer's K cells
layout(binding = 2) readonly buffer V { uint vc[]; };         // the layer's V cells
layout(binding = 3) readonly buffer O { int offs[]; };        // n_tokens + 1 window offsets
layout(binding = 4) readonly buffer C { int cells[]; };       // window cells
layout(binding = 5) writeonly buffer Y { float y[]; };        // {head_dim * n_head, n_tokens}

layout(push_constant) uniform Push {
  uint head_dim;
  uint n_head;
  uint group;       // query heads per KV head
  uint n_tokens;
  uint row_bytes;   // bytes per cell row (all KV heads)
  uint head_bytes;  // bytes per head segment of a row
  uint q_skip;      // floats
  uint k_skip;      // bytes
  uint v_skip;      // bytes
  uint off_skip;    // ints
  uint cells_skip;  // ints
  uint y_skip;      // floats
  float scale;
} p;

shared float q_sh[MAX_HEAD_DIM];       // F32/F16: q rounded to the cache type
shared int qi_sh[MAX_HEAD_DIM];        // Q8_0: quantized q
shared float qd_sh[MAX_HEAD_DIM / 32u];  // Q8_0: the blocks' scales (f16 values)
shared float s_sh[WG];                 // the tile's scores
shared float p_sh[WG];                 // the tile's exp(s - m')
shared uint c_sh[WG];                  // the tile's cells

float score(uint row) {
  if (TYPE == TYPE_Q8_0) {
    precise float sumf = 0.0;
    for (uint b = 0u; b < p.head_dim / 32u; ++b) {
      const uint bo = row + b * 34u;
      int sumi = 0;
      for (uint j = 0u; j < 8u; ++j) {
        const int w = int(LOAD_U32(kc, bo + 2u + 4u * j));
        const uint e = b * 32u + 4u * j;
        sumi += bitfieldExtract(w, 0, 8) * qi_sh[e] + bitfieldExtract(w, 8, 8) * qi_sh[e + 1u] +
                bitfieldExtract(w, 16, 8) * qi_sh[e + 2u] + bitfieldExtract(w, 24, 8) * qi_sh[e + 3u];
      }
      precise const float dd = LOAD_F16(kc, bo) * qd_sh[b];
      sumf += float(sumi) * dd;
    }
    precise const float s = sumf * p.scale;
    return s;
  }
  precise float s = 0.0;
  for (uint d = 0u; d < p.head_dim; ++d) s = fma(q_sh[d], LOAD_PLAIN(kc, TYPE, row, d), s);
  precise const float r = s * p.scale;
  return r;
}

float v_at(uint row, uint d) {
  if (TYPE == TYPE_Q8_0) {
    const uint bo = row + (d >> 5u) * 34u;
    return float(bitfieldExtract(int(LOAD_U8(vc, bo + 2u + (d & 31u))), 0, 8)) * LOAD_F16(vc, bo);
  }
  return LOAD_PLAIN(vc, TYPE, row, d);
}

void main() {
  const uint g = group_index();  // token * n_head + head
  if (g >= p.n_tokens * p.n_head) return;  // whole workgroup: uniform
  const uint tid = gl_LocalInvocationID.x;
  const uint t = g / p.n_head, hk = (g % p.n_head) / p.group;
  const uint q0 = p.q_skip + g * p.head_dim;
  if (TYPE == TYPE_Q8_0) {
    for (uint b = tid; b < p.head_dim / 32u; b += WG) {
      uint amax = 0u;
      for (uint j = 0u; j < 32u; ++j) {
        const uint a = floatBitsToUint(q[q0 + b * 32u + j]) & 0x7fffffffu;
        if (a <= 0x7f800000u && a > amax) amax = a;
      }
      const bool finite = amax != 0u && amax < 0x7f800000u;
      const uint d = finite ? div_rne_bits(amax, floatBitsToUint(127.0)) : amax;
      qd_sh[b] = unpackHalf2x16(f32_to_f16_bits(d)).x;
      const float id = finite ? uintBitsToFloat(div_rne_bits(floatBitsToUint(127.0), amax)) : 0.0;
      for (uint j = 0u; j < 32u; ++j) qi_sh[b * 32u + j] = int(roundEven(q[q0 + b * 32u + j] * id));
    }
  } else {
    for (uint d = tid; d < p.head_dim; d += WG) {
      const float v = q[q0 + d];
      q_sh[d] = TYPE == TYPE_F16 ? unpackHalf2x16(f32_to_f16_bits(floatBitsToUint(v))).x : v;
    }
  }
  barrier();

  const int w0 = offs[p.off_skip + t];
  const uint len = uint(offs[p.off_skip + t + 1u] - w0);
  const float neg_inf = uintBitsToFloat(0xff800000u);
  float m = neg_inf, l = 0.0;
  float acc[MAX_DPT];
  for (uint i = 0u; i < MAX_DPT; ++i) acc[i] = 0.0;
  for (uint j0 = 0u; j0 < len; j0 += WG) {
    const uint n = min(WG, len - j0);
    float s = neg_inf;
    if (tid < n) {
      const uint cell = uint(cells[p.cells_skip + uint(w0) + j0 + tid]);
      c_sh[tid] = cell;
      s = score(p.k_skip + cell * p.row_bytes + hk * p.head_bytes);
    }
    s_sh[tid] = s;
    barrier();
    float mt = m;
    for (uint j = 0u; j < n; ++j) mt = max(mt, s_sh[j]);
    p_sh[tid] = tid < n ? exp_approx(s - mt) : 0.0;
    barrier();
    const float alpha = exp_approx(m - mt);  // 0 on the first tile (m = -inf), 1 when the maximum stays
    m = mt;
    precise float lsum = l * alpha;
    for (uint i = 0u; i < MAX_DPT; ++i) acc[i] *= alpha;
    for (uint j = 0u; j < n; ++j) {
      const float pj = p_sh[j];
      lsum += pj;
      const uint row = p.v_skip + c_sh[j] * p.row_bytes + hk * p.head_bytes;
      for (uint i = 0u; i < MAX_DPT; ++i) {
        const uint d = tid + i * WG;
        if (d < p.head_dim) acc[i] = fma(pj, v_at(row, d), acc[i]);
      }
    }
    l = lsum;
    barrier();  // the next tile overwrites s_sh, p_sh and c_sh
  }
  const float inv = l > 0.0 ? 1.0 / l : 0.0;  // an empty window gives zeros, as on the CPU
  for (uint i = 0u; i < MAX_DPT; ++i) {
    const uint d = tid + i * WG;
    if (d < p.head_dim) y[p.y_skip + g * p.head_dim + d] = acc[i] * inv;
  }
}
