#version 450
// Writes n_tokens rows of f32 (K or V of a batch) into their KV cells, converting to the cache type with
// the CPU's bits (backend/cpu/ops/kv_store.cpp): F32 copied, F16 rounded to nearest even
// (f32_to_f16_bits), Q8_0 by ggml's reference quantizer (d = amax / 127 and id = 1 / d correctly rounded,
// d stored as f16, q = roundf(x * id)). One workgroup per token. Each thread assembles whole 32-bit words
// of the cell's row; a row need not start or end on a word (f16 rows of an odd width, q8_0 rows of an odd
// block count), and the word it shares with a neighbouring cell is merged with atomics, because another
// token of the dispatch may write that neighbour.
#include "common.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 64;
layout(constant_id = 1) const uint TYPE = 0;

#define MAX_BLOCKS 256u  // q8_0 blocks per row (8192 elements); the host refuses wider rows

layout(binding = 0) readonly buffer S { uint src[]; };  // n_tokens rows of row_elems f32 (as bits)
layout(binding = 1) readonly buffer C { int cells[]; };  // n_tokens cells
layout(binding = 2) buffer D { uint dst[]; };            // the layer's cells, n_cells rows of row_bytes

layout(push_constant) uniform Push {
  uint row_elems;
  uint row_bytes;
  uint n_tokens;
  uint src_skip;    // words
  uint cells_skip;  // ints
  uint dst_skip;    // bytes
} p;

shared uint blk_d[MAX_BLOCKS];   // q8_0: the block's f16 scale bits
shared float blk_id[MAX_BLOCKS]; // q8_0: 1 / d

// Byte o of the converted row whose f32 elements start at word `s0` of src.
uint byte_at(uint s0, uint o) {
  if (TYPE == TYPE_F32) return (src[s0 + (o >> 2u)] >> ((o & 3u) * 8u)) & 255u;
  if (TYPE == TYPE_F16) return (f32_to_f16_bits(src[s0 + (o >> 1u)]) >> ((o & 1u) * 8u)) & 255u;
  const uint b = o / 34u, w = o % 34u;
  if (w < 2u) return (blk_d[b] >> (w * 8u)) & 255u;
  const float x = uintBitsToFloat(src[s0 + b * 32u + (w - 2u)]);
  return uint(int(round_half_away(x * blk_id[b]))) & 255u;
}

void main() {
  const uint t = group_index();
  if (t >= p.n_tokens) return;  // whole workgroup: uniform
  const uint tid = gl_LocalInvocationID.x;
  const uint s0 = p.src_skip + t * p.row_elems;
  if (TYPE == TYPE_Q8_0) {
    for (uint b = tid; b < p.row_elems / 32u; b += WG) {
      uint amax = 0u;  // |x| bits: for non-NaN floats integer order is float order; a NaN never wins
      for (uint j = 0u; j < 32u; ++j) {
        const uint a = src[s0 + b * 32u + j] & 0x7fffffffu;
        if (a <= 0x7f800000u && a > amax) amax = a;
      }
      // inf / 127 is inf, and 1 / inf is 0, as on the CPU
      const uint d = amax == 0u             ? 0u
                     : amax == 0x7f800000u ? amax
                                           : div_rne_bits(amax, floatBitsToUint(127.0));
      blk_d[b] = f32_to_f16_bits(d);
      blk_id[b] = d == 0u || d == 0x7f800000u ? 0.0 : uintBitsToFloat(div_rne_bits(floatBitsToUint(1.0), d));
    }
    barrier();
  }
  const uint r0 = p.dst_skip + uint(cells[p.cells_skip + t]) * p.row_bytes;  // first byte of the row
  const uint w0 = r0 >> 2u, w1 = (r0 + p.row_bytes + 3u) >> 2u;               // words [w0, w1) hold it
  for (uint w = w0 + tid; w < w1; w += WG) {
    uint bits = 0u, mask = 0u;
    for (uint i = 0u; i < 4u; ++i) {
      const uint at = w * 4u + i;
      if (at < r0 || at >= r0 + p.row_bytes) continue;
      bits |= byte_at(s0, at - r0) << (i * 8u);
      mask |= 255u << (i * 8u);
    }
    if (mask == 0xffffffffu) {
      dst[w] = bits;
    } else {  // shared with a neighbouring cell: change only this row's bytes
      atomicAnd(dst[w], ~mask);
      atomicOr(dst[w], bits);
    }
  }
}
