#version 450
// Rotary embedding, NEOX pairing (i, i + n_rot/2), over x: {head_dim, n_head, n_tokens}. One thread per
// pair (and per copied dimension past n_rot). theta = pos * theta_scale^i is built by repeated f32
// multiplication exactly as the CPU builds it; sin and cos are computed here (Cody-Waite reduction by pi/2
// and the cephes single-precision polynomials), not by the driver's sin/cos, whose error Vulkan leaves
// loose (2^-11 absolute) and which differs between devices.
#include "common.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 64;

layout(binding = 0) readonly buffer X { float x[]; };
layout(binding = 1) readonly buffer P { int pos[]; };  // n_tokens positions
layout(binding = 2) buffer Y { float y[]; };           // may alias x (in place)

layout(push_constant) uniform Push {
  uint head_dim;
  uint n_head;
  uint n_tokens;
  uint n_rot;
  float theta_scale;  // freq_base^(-2/n_rot), computed on the host as the CPU does
  uint x_skip;
  uint pos_skip;
  uint y_skip;
} p;

void sin_cos(float v, out float s, out float c) {
  precise float k = round(v * 0.63661977236758134);  // v / (pi/2)
  precise float r = v - k * 1.5703125;
  r = r - k * 4.837512969970703125e-4;
  r = r - k * 7.54978995489188216e-8;
  const float z = r * r;
  const float sp = ((-1.9515295891e-4 * z + 8.3321608736e-3) * z - 1.6666654611e-1) * z * r + r;
  const float cp = ((2.443315711809948e-5 * z - 1.388731625493765e-3) * z + 4.166664568298827e-2) * z * z - 0.5 * z + 1.0;
  const int q = int(k) & 3;
  s = q == 0 ? sp : q == 1 ? cp : q == 2 ? -sp : -cp;
  c = q == 0 ? cp : q == 1 ? -sp : q == 2 ? -cp : sp;
}

void main() {
  const uint gi = GLOBAL_INDEX;
  const uint per_token = p.n_head * p.head_dim;
  if (gi >= per_token * p.n_tokens) return;
  const uint t = gi / per_token;
  const uint i = gi % p.head_dim;
  const uint half_rot = p.n_rot / 2u;
  const uint base = gi - i;  // first element of this head
  if (i >= p.n_rot) {
    y[p.y_skip + gi] = x[p.x_skip + gi];
    return;
  }
  if (i >= half_rot) return;  // the pair's thread writes it
  precise float theta = float(pos[p.pos_skip + t]);
  for (uint j = 0; j < i; ++j) theta *= p.theta_scale;
  float s, c;
  sin_cos(theta, s, c);
  const float x0 = x[p.x_skip + base + i], x1 = x[p.x_skip + base + i + half_rot];
  y[p.y_skip + base + i] = x0 * c - x1 * s;
  y[p.y_skip + base + i + half_rot] = x0 * s + x1 * c;
}
