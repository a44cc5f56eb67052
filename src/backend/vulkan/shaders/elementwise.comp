#version 450
// Elementwise ops over n floats, one thread per element: OP 0 add, 1 mul (b broadcast over rows of d when
// it has one row), 2 silu, 3 swiglu = silu(a) * b. silu is x * sigmoid(x) with exp taken of -|x| by the
// same polynomial as the CPU kernels (quant/kernels/kernel_math.h), so both backends compute one function.
#include "common.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 64;
layout(constant_id = 1) const uint OP = 0;

layout(binding = 0) readonly buffer A { float a[]; };
layout(binding = 1) readonly buffer B { float b[]; };  // unused by silu (bound to a)
layout(binding = 2) buffer Y { float y[]; };           // may alias a (in place)

layout(push_constant) uniform Push {
  uint n;
  uint d;
  uint broadcast;
  uint a_skip;
  uint b_skip;
  uint y_skip;
} p;

float silu(float v) {
  const float e = exp_approx(-abs(v));
  return v * ((v >= 0.0 ? 1.0 : e) / (1.0 + e));
}

void main() {
  const uint i = GLOBAL_INDEX;
  if (i >= p.n) return;
  const float av = a[p.a_skip + i];
  if (OP == 2u) {
    y[p.y_skip + i] = silu(av);
    return;
  }
  const float bv = b[p.b_skip + (p.broadcast != 0u ? i % p.d : i)];
  y[p.y_skip + i] = OP == 0u ? av + bv : OP == 1u ? av * bv : silu(av) * bv;
}
