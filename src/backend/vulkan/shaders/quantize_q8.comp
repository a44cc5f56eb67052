#version 450
// Quantizes f32 activations to 8 bits for the integer-dot matmul (matmul_q8.glsl), bit for bit as the
// CPU's activation quantizers (quant/reference.h act_q8_0, act_q8_1, act_q8_K, which the SIMD
// from_float kernels equal):
//   Q8_0 (FMT 0): per 32: d = amax / 127 stored as f16, q = round_half_even(x * (127 / amax));
//   Q8_1 (FMT 1): Q8_0 plus s = f16(d * sum(q)), d the f32 quotient;
//   Q8_K (FMT 2): per 256: max = the first element of largest |x|, iscale = -127 / max,
//                 q = min(127, round_half_even(iscale * x)), d = 1 / iscale (f32).
// Divisions are correctly rounded (div_rne_bits: Vulkan allows 2.5 ulp for OpFDiv) and every product is
// `precise`, so the bytes and scales are the CPU's. One thread per unit of 32 elements; a Q8_K
// super-block's eight units are eight neighbouring threads.
#include "common.glsl"

layout(local_size_x = 64) in;
layout(constant_id = 0) const uint WG = 64;
layout(constant_id = 1) const uint FMT = 0;

layout(binding = 0) readonly buffer X { float x[]; };  // m tokens of k floats, from x_skip
layout(binding = 1) writeonly buffer A { uint a[]; };  // m tokens of k / 4 + k / 16 words (matmul_q8.glsl)

layout(push_constant) uniform Push {
  uint k;       // elements per token (a multiple of 32; of 256 for Q8_K)
  uint m;       // tokens
  uint x_skip;  // floats
  uint a_skip;  // words
} p;

shared float s_amax[64];
shared float s_max[64];

void main() {
  const uint lid = gl_LocalInvocationID.x;
  const uint units = p.k >> 5u, per_token = (units + 63u) / 64u;
  const uint t = group_index() / per_token, u = (group_index() % per_token) * 64u + lid;
  const bool live = t < p.m && u < units;
  const uint xo = p.x_skip + t * p.k + 32u * u;
  // The unit's largest |x| and, for Q8_K, the first element that has it (strictly greater replaces).
  float amax = 0.0, vmax = 0.0;
  if (live) {
    for (uint e = 0; e < 32u; ++e) {
      const float v = x[xo + e];
      if (abs(v) > amax) {
        amax = abs(v);
        vmax = v;
      }
    }
  }
  if (FMT == 2u) {  // the super-block's: its units in order, the first largest kept (uniform barriers)
    s_amax[lid] = amax;
    s_max[lid] = vmax;
    barrier();
    if ((lid & 7u) == 0u) {
      for (uint i = 1; i < 8u; ++i) {
        if (s_amax[lid + i] > s_amax[lid]) {
          s_amax[lid] = s_amax[lid + i];
          s_max[lid] = s_max[lid + i];
        }
      }
    }
    barrier();
    amax = s_amax[lid & ~7u];
    vmax = s_max[lid & ~7u];
  }
  if (!live) return;

  const uint ao = p.a_skip + t * ((p.k >> 2u) + (p.k >> 4u));
  float scale = 0.0;  // the multiplier of x
  uint d_bits = 0u;   // the scale word
  if (FMT == 2u) {
    if (amax != 0.0) {
      const uint is_bits = div_rne_bits(floatBitsToUint(127.0), floatBitsToUint(amax));  // 127 / |max|
      scale = vmax > 0.0 ? -uintBitsToFloat(is_bits) : uintBitsToFloat(is_bits);
      d_bits = div_rne_bits(floatBitsToUint(1.0), is_bits) | (vmax > 0.0 ? 0x80000000u : 0u);
    }
  } else if (amax != 0.0) {
    scale = uintBitsToFloat(div_rne_bits(floatBitsToUint(127.0), floatBitsToUint(amax)));
    d_bits = div_rne_bits(floatBitsToUint(amax), floatBitsToUint(127.0));
  }
  int sum_lo = 0, sum_hi = 0;  // the sums of the unit's two 16-element halves
  for (uint i = 0; i < 8u; ++i) {
    uint word = 0u;
    for (uint b = 0; b < 4u; ++b) {
      precise const float v = x[xo + 4u * i + b] * scale;
      int q = int(roundEven(v));
      if (FMT == 2u) q = min(127, q);
      if (i < 4u) sum_lo += q; else sum_hi += q;
      word |= uint(q & 255) << (8u * b);
    }
    a[ao + 8u * u + i] = word;
  }
  const uint mo = ao + (p.k >> 2u) + 2u * u;
  if (FMT == 2u) {
    a[mo] = d_bits;
    a[mo + 1u] = uint(sum_lo & 0xFFFF) | (uint(sum_hi) << 16u);
  } else {
    a[mo] = floatBitsToUint(f16_bits_to_float(f32_to_f16_bits(d_bits)));
    if (FMT == 0u) {
      a[mo + 1u] = uint(sum_lo + sum_hi);
    } else {
      precise const float s = uintBitsToFloat(d_bits) * float(sum_lo + sum_hi);
      a[mo + 1u] = floatBitsToUint(f16_bits_to_float(f32_to_f16_bits(floatBitsToUint(s))));
    }
  }
}
