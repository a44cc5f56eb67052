#version 450
// Causal GQA attention over a layer's KV cells (F32, F16 or Q8_0), flash-style: one workgroup per (token,
// KV head, up to MAXG of the query heads sharing it) walks the token's window (BatchView's CSR
// window_offsets / window_cells, in position order) in tiles of WG cells with an online softmax, so no
// more than one tile of scores per head is ever held (in shared memory); each K and V element read serves
// every query head of the workgroup. Per tile and head: thread j scores cell j0 + j; every thread takes the
// tile maximum m' (max is exact, so its order is free), thread j computes p_j = exp(s_j - m'); then each
// thread rescales its running sum and its output dimensions by exp(m - m') and adds the tile's cells in
// window order. Every sum has a fixed
// order that depends only on the token's window and the constant WG, never on the batch, the grid or the
// device's subgroup size (no subgroup operation is used).
//
// Scores are the CPU's: F32/F16 q (rounded to the cache type) dotted with K by an fma chain over d from 0,
// times scale (kernel_math.h); Q8_0 q quantized to q8_0 as the CPU's activation quantizer does
// (d = amax / 127 and id = 127 / amax correctly rounded, round to nearest even), then per block the exact
// integer sum times (d_k * d_q), accumulated over blocks in order. exp is kernel_math.h's polynomial. The
// output differs from the CPU's two-pass softmax in accumulation order only (see docs/BACKENDS.md).
#include "common.glsl"

#define WG 64u             // threads per workgroup and cells per tile (any subgroup size divides or covers it)
#define MAX_HEAD_DIM 256u  // the host refuses larger heads
#define MAX_DPT 4u         // output dimensions per thread: MAX_HEAD_DIM / WG
#define MAXG 8u            // query heads per workgroup (a larger GQA group takes several workgroups)

layout(local_size_x = 64) in;
layout(constant_id = 0) const uint TYPE = 0;

layout(binding = 0) readonly buffer Q { float q[]; };   // {head_dim, n_head, n_tokens}
layout(binding = 1) readonly buffer K { uint kc[]; };   // the layer's K cells
layout(binding = 2) readonly buffer V { uint vc[]; };   // the layer's V cells
layout(binding = 3) readonly buffer O { int offs[]; };  // n_tokens + 1 window offsets
layout(binding = 4) readonly buffer C { int cells[]; }; // window cells
layout(binding = 5) writeonly buffer Y { float y[]; };  // {head_dim * n_head, n_tokens}

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

// Per query head of the workgroup: q rounded to the cache type (F32/F16), or quantized (Q8_0: the int8
// values, exact as floats, and each block's f16 scale).
shared float q_sh[MAXG * MAX_HEAD_DIM];
shared float qd_sh[MAXG * (MAX_HEAD_DIM / 32u)];
shared float s_sh[MAXG * WG];  // the tile's scores
shared float p_sh[MAXG * WG];  // the tile's exp(s - m')
shared uint c_sh[WG];          // the tile's cells

// Scores of the G heads for the K head segment at byte `row`.
void scores(uint row, uint G, inout float s[MAXG]) {
  if (TYPE == TYPE_Q8_0) {
    const uint nb = p.head_dim / 32u;
    float sumf[MAXG];
    for (uint h = 0u; h < MAXG; ++h) sumf[h] = 0.0;
    for (uint b = 0u; b < nb; ++b) {
      const uint bo = row + b * 34u;
      int sumi[MAXG];
      for (uint h = 0u; h < MAXG; ++h) sumi[h] = 0;
      for (uint j = 0u; j < 8u; ++j) {
        const int w = int(LOAD_U32(kc, bo + 2u + 4u * j));
        const ivec4 k4 = ivec4(bitfieldExtract(w, 0, 8), bitfieldExtract(w, 8, 8), bitfieldExtract(w, 16, 8),
                               bitfieldExtract(w, 24, 8));
        for (uint h = 0u; h < MAXG; ++h) {
          if (h >= G) break;
          const uint e = h * MAX_HEAD_DIM + b * 32u + 4u * j;
          sumi[h] += k4.x * int(q_sh[e]) + k4.y * int(q_sh[e + 1u]) + k4.z * int(q_sh[e + 2u]) +
                     k4.w * int(q_sh[e + 3u]);
        }
      }
      const float dk = LOAD_F16(kc, bo);
      for (uint h = 0u; h < MAXG; ++h) {
        if (h >= G) break;
        precise const float dd = dk * qd_sh[h * (MAX_HEAD_DIM / 32u) + b];
        precise const float t = sumf[h] + float(sumi[h]) * dd;
        sumf[h] = t;
      }
    }
    for (uint h = 0u; h < MAXG; ++h) {
      precise const float r = sumf[h] * p.scale;
      s[h] = r;
    }
    return;
  }
  float acc[MAXG];
  for (uint h = 0u; h < MAXG; ++h) acc[h] = 0.0;
  for (uint d = 0u; d < p.head_dim; ++d) {
    const float kd = LOAD_PLAIN(kc, TYPE, row, d);
    for (uint h = 0u; h < MAXG; ++h) {
      if (h >= G) break;
      precise const float t = fma(q_sh[h * MAX_HEAD_DIM + d], kd, acc[h]);
      acc[h] = t;
    }
  }
  for (uint h = 0u; h < MAXG; ++h) {
    precise const float r = acc[h] * p.scale;
    s[h] = r;
  }
}

float v_at(uint row, uint d) {
  if (TYPE == TYPE_Q8_0) {
    const uint bo = row + (d >> 5u) * 34u;
    return float(bitfieldExtract(int(LOAD_U8(vc, bo + 2u + (d & 31u))), 0, 8)) * LOAD_F16(vc, bo);
  }
  return LOAD_PLAIN(vc, TYPE, row, d);
}

void main() {
  const uint group = p.group;
  const uint chunks = (group + MAXG - 1u) / MAXG;
  const uint n_head_kv = p.n_head / group;
  const uint g = group_index();  // (token * n_head_kv + KV head) * chunks + chunk
  if (g >= p.n_tokens * n_head_kv * chunks) return;  // whole workgroup: uniform
  const uint tid = gl_LocalInvocationID.x;
  const uint t = g / (n_head_kv * chunks);
  const uint hk = (g / chunks) % n_head_kv;
  const uint c = g % chunks;
  const uint h0 = hk * group + c * MAXG;  // first query head of the workgroup
  const uint G = min(MAXG, group - c * MAXG);
  const uint q0 = p.q_skip + (t * p.n_head + h0) * p.head_dim;
  if (TYPE == TYPE_Q8_0) {
    const uint nb = p.head_dim / 32u;
    for (uint i = tid; i < G * nb; i += WG) {
      const uint h = i / nb, b = i % nb;
      const uint x0 = q0 + h * p.head_dim + b * 32u;
      uint amax = 0u;
      for (uint j = 0u; j < 32u; ++j) {
        const uint a = floatBitsToUint(q[x0 + j]) & 0x7fffffffu;
        if (a <= 0x7f800000u && a > amax) amax = a;
      }
      const bool finite = amax != 0u && amax < 0x7f800000u;
      const uint d = finite ? div_rne_bits(amax, floatBitsToUint(127.0)) : amax;
      qd_sh[h * (MAX_HEAD_DIM / 32u) + b] = f16_bits_to_float(f32_to_f16_bits(d));
      const float id = finite ? uintBitsToFloat(div_rne_bits(floatBitsToUint(127.0), amax)) : 0.0;
      for (uint j = 0u; j < 32u; ++j) q_sh[h * MAX_HEAD_DIM + b * 32u + j] = roundEven(q[x0 + j] * id);
    }
  } else {
    for (uint i = tid; i < G * p.head_dim; i += WG) {
      const uint h = i / p.head_dim, d = i % p.head_dim;
      const float v = q[q0 + i];
      q_sh[h * MAX_HEAD_DIM + d] = TYPE == TYPE_F16 ? f16_bits_to_float(f32_to_f16_bits(floatBitsToUint(v))) : v;
    }
  }
  barrier();

  const int w0 = offs[p.off_skip + t];
  const uint len = uint(offs[p.off_skip + t + 1u] - w0);
  const float neg_inf = uintBitsToFloat(0xff800000u);
  float m[MAXG], l[MAXG], acc[MAXG * MAX_DPT];
  for (uint h = 0u; h < MAXG; ++h) {
    m[h] = neg_inf;
    l[h] = 0.0;
  }
  for (uint i = 0u; i < MAXG * MAX_DPT; ++i) acc[i] = 0.0;
  for (uint j0 = 0u; j0 < len; j0 += WG) {
    const uint n = min(WG, len - j0);
    float s[MAXG];
    for (uint h = 0u; h < MAXG; ++h) s[h] = neg_inf;
    if (tid < n) {
      const uint cell = uint(cells[p.cells_skip + uint(w0) + j0 + tid]);
      c_sh[tid] = cell;
      scores(p.k_skip + cell * p.row_bytes + hk * p.head_bytes, G, s);
    }
    for (uint h = 0u; h < MAXG; ++h) s_sh[h * WG + tid] = s[h];
    barrier();
    float mt[MAXG];
    for (uint h = 0u; h < MAXG; ++h) {
      mt[h] = m[h];
      if (h >= G) continue;
      for (uint j = 0u; j < n; ++j) mt[h] = max(mt[h], s_sh[h * WG + j]);
      p_sh[h * WG + tid] = tid < n ? exp_approx(s[h] - mt[h]) : 0.0;
    }
    barrier();
    for (uint h = 0u; h < MAXG; ++h) {
      if (h >= G) continue;
      const float alpha = exp_approx(m[h] - mt[h]);  // 0 on the first tile (m = -inf), 1 when the max stays
      m[h] = mt[h];
      l[h] *= alpha;
      for (uint i = 0u; i < MAX_DPT; ++i) acc[h * MAX_DPT + i] *= alpha;
    }
    for (uint j = 0u; j < n; ++j) {
      const uint row = p.v_skip + c_sh[j] * p.row_bytes + hk * p.head_bytes;
      float vd[MAX_DPT];
      for (uint i = 0u; i < MAX_DPT; ++i) {
        const uint d = tid + i * WG;
        vd[i] = d < p.head_dim ? v_at(row, d) : 0.0;
      }
      for (uint h = 0u; h < MAXG; ++h) {
        if (h >= G) continue;
        const float pj = p_sh[h * WG + j];
        precise const float lt = l[h] + pj;
        l[h] = lt;
        for (uint i = 0u; i < MAX_DPT; ++i) {
          precise const float a = fma(pj, vd[i], acc[h * MAX_DPT + i]);
          acc[h * MAX_DPT + i] = a;
        }
      }
    }
    barrier();  // the next tile overwrites s_sh, p_sh and c_sh
  }
  for (uint h = 0u; h < MAXG; ++h) {
    if (h >= G) continue;
    const float inv = l[h] > 0.0 ? 1.0 / l[h] : 0.0;  // an empty window gives zeros, as on the CPU
    for (uint i = 0u; i < MAX_DPT; ++i) {
      const uint d = tid + i * WG;
      if (d < p.head_dim) y[p.y_skip + (t * p.n_head + h0 + h) * p.head_dim + d] = acc[h * MAX_DPT + i] * inv;
    }
  }
}
