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

float exp_approx(float v) {
  if (!(v >= -87.0)) return 0.0;
  precise float n = fma(v, 1.44269504088896341, 12582912.0) - 12582912.0;
  precise float r = fma(n, -0.693359375, v);
  r = fma(n, 2.12194440e-4, r);
  precise float q = 1.9875691500e-4;
  q = fma(q, r, 1.3981999507e-3);
  q = fma(q, r, 8.3334519073e-3);
  q = fma(q, r, 4.1665795894e-2);
  q = fma(q, r, 1.6666665459e-1);
  q = fma(q, r, 5.0000001201e-1);
  precise float e = fma(q, r * r, r) + 1.0;
  return e * uintBitsToFloat(uint(int(n) + 127) << 23);
}

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
