#version 450
// dst[i] = row ids[i] of a table (any type the CPU computes), dequantized to f32. One workgroup per id. A table
// larger than one binding is read through windows: this dispatch sees rows [row_lo, row_hi) and skips
// ids outside them (another dispatch writes those).
#include "common.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 64;
layout(constant_id = 1) const uint TYPE = 0;

layout(binding = 0) readonly buffer S { uint src[]; };   // table rows [row_lo, row_hi), from byte src_skip
layout(binding = 1) readonly buffer I { int ids[]; };    // n ids, from ids_skip
layout(binding = 2) writeonly buffer D { float dst[]; }; // n rows of d floats, from dst_skip

layout(push_constant) uniform Push {
  uint d;
  uint n;
  uint row_bytes;
  uint row_lo;
  uint row_hi;
  uint src_skip;   // bytes
  uint ids_skip;   // ints
  uint dst_skip;   // floats
} p;

void main() {
  const uint i = group_index();
  if (i >= p.n) return;
  const int id = ids[p.ids_skip + i];
  if (id < int(p.row_lo) || id >= int(p.row_hi)) return;
  const uint row = p.src_skip + uint(id - int(p.row_lo)) * p.row_bytes;
  const uint out0 = p.dst_skip + i * p.d;
  const uint tid = gl_LocalInvocationID.x;
  if (IS_PLAIN(TYPE)) {
    for (uint e = tid; e < p.d; e += WG) {
      dst[out0 + e] = LOAD_PLAIN(src, TYPE, row, e);
    }
  } else {
    for (uint g = tid; g < (p.d >> 2); g += WG) {
      vec4 v;
      DEQUANT4(src, TYPE, row, g, v);
      const uint e0 = out0 + dequant4_first(TYPE, g);
      dst[e0] = v.x;
      dst[e0 + 1u] = v.y;
      dst[e0 + 2u] = v.z;
      dst[e0 + 3u] = v.w;
    }
  }
}
