#version 450
// y = x * w / sqrt(mean(x^2) + eps) over rows of d floats. One workgroup per row; the sum of squares is
// reduced with subgroupAdd, then across subgroups in shared memory in subgroup order.
#include "common.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 64;

layout(binding = 0) readonly buffer X { float x[]; };
layout(binding = 1) readonly buffer Wt { float w[]; };
layout(binding = 2) buffer Y { float y[]; };  // may alias x (in place)

layout(push_constant) uniform Push {
  uint d;
  uint rows;
  uint x_skip;
  uint w_skip;
  uint y_skip;
  float eps;
} p;

shared float red[MAX_WG];
shared float total;

void main() {
  const uint r = group_index();
  if (r >= p.rows) return;
  const uint tid = gl_LocalInvocationID.x;
  const uint xo = p.x_skip + r * p.d;
  float s = 0.0;
  for (uint e = tid; e < p.d; e += WG) s = fma(x[xo + e], x[xo + e], s);
  s = subgroupAdd(s);
  if (subgroupElect()) red[gl_SubgroupID] = s;
  barrier();
  if (tid == 0u) {
    float t = 0.0;
    for (uint i = 0; i < gl_NumSubgroups; ++i) t += red[i];
    total = t;
  }
  barrier();
  const float scale = 1.0 / sqrt(total / float(p.d) + p.eps);
  const uint yo = p.y_skip + r * p.d;
  for (uint e = tid; e < p.d; e += WG) y[yo + e] = (x[xo + e] * scale) * w[p.w_skip + e];
}
