// Shared helpers of minfer's compute shaders. Buffers are plain uint/float arrays so no optional
// storage feature (8- or 16-bit access) is needed; quantized blocks are read as bytes out of 32-bit words.
// Type ids are ggml's (core/dtype.h): 0 F32, 1 F16, 2 Q4_0, 3 Q4_1, 6 Q5_0, 7 Q5_1, 8 Q8_0, 12 Q4_K,
// 13 Q5_K, 14 Q6_K, 30 BF16.
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require

#define TYPE_F32 0u
#define TYPE_F16 1u
#define TYPE_Q4_0 2u
#define TYPE_Q4_1 3u
#define TYPE_Q5_0 6u
#define TYPE_Q5_1 7u
#define TYPE_Q8_0 8u
#define TYPE_Q4_K 12u
#define TYPE_Q5_K 13u
#define TYPE_Q6_K 14u
#define TYPE_BF16 30u
// Plain types: one element at a time (F32, F16, BF16); the others are read four at a time.
#define IS_PLAIN(T) ((T) == TYPE_F32 || (T) == TYPE_F16 || (T) == TYPE_BF16)
// Element e of a plain-type row starting at byte `row` of `buf`.
#define LOAD_PLAIN(buf, T, row, e)                                                         \
  ((T) == TYPE_F32   ? uintBitsToFloat(buf[((row) >> 2) + (e)])                              \
   : (T) == TYPE_F16 ? LOAD_F16(buf, (row) + 2u * (e))                                     \
                     : uintBitsToFloat(((buf[((row) + 2u * (e)) >> 2] >> ((((row) + 2u * (e)) & 2u) * 8u)) & 0xFFFFu) << 16u))

// Largest workgroup and token count the shared reduction arrays are sized for.
#define MAX_WG 256u
#define MAX_COLS 8u

// A 32-bit word starting at any byte offset of uint array `buf` (two loads when unaligned).
#define LOAD_U32(buf, off) \
  ((((off) & 3u) == 0u) ? buf[(off) >> 2] \
                        : ((buf[(off) >> 2] >> (((off) & 3u) * 8u)) | (buf[((off) >> 2) + 1u] << (32u - ((off) & 3u) * 8u))))
// One byte at any byte offset of `buf`.
#define LOAD_U8(buf, off) ((buf[(off) >> 2] >> (((off) & 3u) * 8u)) & 255u)
// An IEEE half's value from its bits, in integer arithmetic. Not unpackHalf2x16: Vulkan lets a driver flush
// denormals "obtained by unpacking", and quantized blocks' f16 scales are often subnormal (a Q6_K d is
// max|w| / 4096, below 2^-14 whenever the block's largest weight is under 0.25). A subnormal half is a
// normal float, so the value is exact on every device.
float f16_bits_to_float(uint h) {
  const uint e = (h >> 10u) & 31u, f = h & 1023u;
  const float v = e == 0u    ? float(f) * (1.0 / 16777216.0)
                  : e == 31u ? uintBitsToFloat(0x7f800000u | (f << 13u))
                             : uintBitsToFloat(((e + 112u) << 23u) | (f << 13u));
  return (h & 0x8000u) != 0u ? -v : v;
}
// An IEEE half at an even byte offset of `buf`, as float.
#define LOAD_F16(buf, off) f16_bits_to_float((buf[(off) >> 2] >> (((off) & 2u) * 8u)) & 0xFFFFu)

// The grid is 2-D when a dispatch needs more groups than one dimension allows.
uint group_index() { return gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x; }
// One thread per element: the shader's workgroup size constant WG must be declared before use (the
// built-in gl_WorkGroupSize is not yet specialized where this file is included).
#define GLOBAL_INDEX (group_index() * WG + gl_LocalInvocationID.x)

// Four dequantized elements of group g (elements dequant4_first(TYPE, g) + 0, 1, 2, 3) of a quantized row
// starting at byte `row` of `buf`, computed with the CPU reference's operations in its order (`precise`
// forbids fusing them), so get_rows is bit-exact:
//   Q4_0: 18-byte blocks of 32, d + 16 bytes of nibbles (low nibbles: elements 0-15);
//   Q4_1 / Q5_0 / Q5_1: as Q4_0 with a min m (x = q*d + m) and / or a fifth bit per element in qh;
//   Q8_0: 34-byte blocks of 32, d + 32 int8;
//   Q4_K: 144-byte blocks of 256, d, dmin, 12 bytes of 6-bit scales and mins, 128 bytes of nibbles (each
//         64 elements: low nibbles then high nibbles of 32 bytes); x = d*sc * q - dmin*m; Q5_K (176
//         bytes) adds qh[32] after the scales: bit 2*i + h of qh[l] is the fifth bit;
//   Q6_K: 210-byte blocks of 256, ql[128] (low 4 bits), qh[64] (high 2 bits), int8 scales[16], d;
//         x = d*sc * (q - 32).
#define DEQUANT4(buf, TYPE, row, g, out_v)                                                                   \
  {                                                                                                         \
    if (TYPE == TYPE_Q4_0) {                                                                                \
      const uint blk_ = (g) >> 3u, sub_ = (g) & 7u;                                                         \
      const uint bo_ = (row) + blk_ * 18u;                                                                  \
      const float d_ = LOAD_F16(buf, bo_);                                                                  \
      const uint q_ = LOAD_U32(buf, bo_ + 2u + 4u * (sub_ & 3u)) >> (sub_ >= 4u ? 4u : 0u);                 \
      out_v = d_ * (vec4(q_ & 15u, (q_ >> 8u) & 15u, (q_ >> 16u) & 15u, (q_ >> 24u) & 15u) - 8.0);          \
    } else if (TYPE == TYPE_Q4_1 || TYPE == TYPE_Q5_0 || TYPE == TYPE_Q5_1) {                               \
      const uint blk_ = (g) >> 3u, sub_ = (g) & 7u;                                                         \
      const uint bsz_ = TYPE == TYPE_Q4_1 ? 20u : TYPE == TYPE_Q5_0 ? 22u : 24u;                            \
      const uint qs_off_ = TYPE == TYPE_Q4_1 ? 4u : TYPE == TYPE_Q5_0 ? 6u : 8u;                            \
      const uint bo_ = (row) + blk_ * bsz_;                                                                 \
      const float d_ = LOAD_F16(buf, bo_);                                                                  \
      const uint q_ = LOAD_U32(buf, bo_ + qs_off_ + 4u * (sub_ & 3u)) >> (sub_ >= 4u ? 4u : 0u);            \
      uvec4 n_ = uvec4(q_ & 15u, (q_ >> 8u) & 15u, (q_ >> 16u) & 15u, (q_ >> 24u) & 15u);                   \
      if (TYPE != TYPE_Q4_1) {                                                                              \
        const uint e_ = 4u * (sub_ & 3u) + (sub_ >= 4u ? 16u : 0u);                                         \
        const uint qh_ = LOAD_U32(buf, bo_ + (TYPE == TYPE_Q5_0 ? 2u : 4u)) >> e_;                          \
        n_ |= uvec4(qh_ & 1u, (qh_ >> 1u) & 1u, (qh_ >> 2u) & 1u, (qh_ >> 3u) & 1u) << 4u;                  \
      }                                                                                                     \
      if (TYPE == TYPE_Q5_0) {                                                                              \
        out_v = vec4(ivec4(n_) - 16) * d_;                                                                  \
      } else {                                                                                              \
        const float m_ = LOAD_F16(buf, bo_ + 2u);                                                           \
        precise vec4 v_ = vec4(n_) * d_;                                                                    \
        v_ = v_ + m_;                                                                                       \
        out_v = v_;                                                                                         \
      }                                                                                                     \
    } else if (TYPE == TYPE_Q8_0) {                                                                         \
      const uint blk_ = (g) >> 3u, sub_ = (g) & 7u;                                                         \
      const uint bo_ = (row) + blk_ * 34u;                                                                  \
      const float d_ = LOAD_F16(buf, bo_);                                                                  \
      const int q_ = int(LOAD_U32(buf, bo_ + 2u + 4u * sub_));                                              \
      out_v = d_ * vec4(bitfieldExtract(q_, 0, 8), bitfieldExtract(q_, 8, 8), bitfieldExtract(q_, 16, 8),   \
                        bitfieldExtract(q_, 24, 8));                                                        \
    } else if (TYPE == TYPE_Q4_K || TYPE == TYPE_Q5_K) {                                                    \
      const uint blk_ = (g) >> 6u, G_ = (g) & 63u;                                                          \
      const uint g64_ = G_ >> 4u, h_ = (G_ >> 3u) & 1u, l4_ = G_ & 7u;                                      \
      const uint bo_ = (row) + blk_ * (TYPE == TYPE_Q4_K ? 144u : 176u);                                    \
      const float d_ = LOAD_F16(buf, bo_), dmin_ = LOAD_F16(buf, bo_ + 2u);                                 \
      const uint j_ = 2u * g64_ + h_;                                                                       \
      uint sc_, m_;                                                                                         \
      if (j_ < 4u) {                                                                                        \
        sc_ = LOAD_U8(buf, bo_ + 4u + j_) & 63u;                                                            \
        m_ = LOAD_U8(buf, bo_ + 8u + j_) & 63u;                                                             \
      } else {                                                                                              \
        sc_ = (LOAD_U8(buf, bo_ + 8u + j_) & 15u) | ((LOAD_U8(buf, bo_ + j_) >> 6u) << 4u);                 \
        m_ = (LOAD_U8(buf, bo_ + 8u + j_) >> 4u) | ((LOAD_U8(buf, bo_ + 4u + j_) >> 6u) << 4u);             \
      }                                                                                                     \
      precise const float d1_ = d_ * float(sc_);                                                            \
      precise const float m1_ = dmin_ * float(m_);                                                          \
      const uint q_ = LOAD_U32(buf, bo_ + (TYPE == TYPE_Q4_K ? 16u : 48u) + 32u * g64_ + 4u * l4_) >> (4u * h_); \
      uvec4 n_ = uvec4(q_ & 15u, (q_ >> 8u) & 15u, (q_ >> 16u) & 15u, (q_ >> 24u) & 15u);                   \
      if (TYPE == TYPE_Q5_K) {                                                                              \
        const uint qh_ = LOAD_U32(buf, bo_ + 16u + 4u * l4_) >> (2u * g64_ + h_);                           \
        n_ += uvec4(qh_ & 1u, (qh_ >> 8u) & 1u, (qh_ >> 16u) & 1u, (qh_ >> 24u) & 1u) * 16u;                \
      }                                                                                                     \
      precise vec4 v_ = d1_ * vec4(n_);                                                                     \
      v_ = v_ - m1_;                                                                                        \
      out_v = v_;                                                                                           \
    } else {                                                                                                \
      const uint blk_ = (g) >> 6u, G_ = (g) & 63u;                                                          \
      const uint n_ = G_ >> 5u, qq_ = (G_ >> 3u) & 3u, l_ = 4u * (G_ & 7u);                                 \
      const uint bo_ = (row) + blk_ * 210u;                                                                 \
      const float d_ = LOAD_F16(buf, bo_ + 208u);                                                           \
      const uint ql_ = LOAD_U32(buf, bo_ + 64u * n_ + 32u * (qq_ & 1u) + l_) >> (qq_ >= 2u ? 4u : 0u);      \
      const uint qh_ = LOAD_U32(buf, bo_ + 128u + 32u * n_ + l_) >> (2u * qq_);                             \
      const int sc_ = bitfieldExtract(int(LOAD_U8(buf, bo_ + 192u + 8u * n_ + l_ / 16u + 2u * qq_)), 0, 8); \
      precise const float ds_ = d_ * float(sc_);                                                            \
      const ivec4 q_ = ivec4((ql_ & 15u) | ((qh_ & 3u) << 4u), ((ql_ >> 8u) & 15u) | (((qh_ >> 8u) & 3u) << 4u), \
                             ((ql_ >> 16u) & 15u) | (((qh_ >> 16u) & 3u) << 4u),                            \
                             ((ql_ >> 24u) & 15u) | (((qh_ >> 24u) & 3u) << 4u)) - 32;                      \
      precise vec4 v_ = ds_ * vec4(q_);                                                                     \
      out_v = v_;                                                                                           \
    }                                                                                                       \
  }
// Element index of the first of the four elements DEQUANT4 returns for group g.
uint dequant4_first(uint type, uint g) {
  if (type == TYPE_Q4_K || type == TYPE_Q5_K || type == TYPE_Q6_K) {
    const uint blk = g >> 6u, G = g & 63u;
    return type != TYPE_Q6_K ? blk * 256u + (G >> 4u) * 64u + ((G >> 3u) & 1u) * 32u + 4u * (G & 7u)
                             : blk * 256u + (G >> 5u) * 128u + ((G >> 3u) & 3u) * 32u + 4u * (G & 7u);
  }
  const uint blk = g >> 3u, sub = g & 7u;
  return type != TYPE_Q8_0 ? blk * 32u + (sub & 3u) * 4u + (sub >= 4u ? 16u : 0u) : blk * 32u + sub * 4u;
}

// exp(v) for v <= 0 by the CPU kernels' polynomial (quant/kernels/kernel_math.h: Cody-Waite reduction by
// ln 2, Cephes' degree-6 polynomial), operation for operation; 0 below -87 (and for -inf).
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

// IEEE half bits of f, rounded to nearest even, in integer arithmetic: core/fp16.h's fp32_to_fp16 line for
// line (a NaN stays NaN, >= 65520 is inf, subnormals rounded), so no driver conversion (packHalf2x16's
// rounding is unspecified) and no denormal flushing can change a bit.
uint f32_to_f16_bits(uint x) {
  const uint sign = (x >> 16u) & 0x8000u;
  const uint a = x & 0x7fffffffu;
  if (a > 0x7f800000u) return sign | 0x7e00u | ((a >> 13u) & 0x3ffu);
  if (a >= 0x477ff000u) return sign | 0x7c00u;
  if (a < 0x38800000u) {
    if (a < 0x33000000u) return sign;
    const uint shift = 126u - (a >> 23u);
    const uint m = (a & 0x7fffffu) | 0x800000u;
    uint r = m >> shift;
    const uint rem = m & ((1u << shift) - 1u);
    const uint halfway = 1u << (shift - 1u);
    if (rem > halfway || (rem == halfway && (r & 1u) != 0u)) ++r;
    return sign | r;
  }
  uint r = a - 0x38000000u;
  const uint rem = r & 0x1fffu;
  r >>= 13u;
  if (rem > 0x1000u || (rem == 0x1000u && (r & 1u) != 0u)) ++r;
  return sign | r;
}

// Mantissa (with the hidden bit, normalised to [2^23, 2^24)) and unbiased exponent of a positive finite
// nonzero float's bits, subnormals included.
void f32_split(uint bits, out uint m, out int e) {
  uint ex = bits >> 23u;
  m = bits & 0x7fffffu;
  if (ex == 0u) {  // subnormal: normalise
    e = -126;
    while ((m & 0x800000u) == 0u) {
      m <<= 1u;
      --e;
    }
  } else {
    m |= 0x800000u;
    e = int(ex) - 127;
  }
}

// a / b correctly rounded (to nearest even), for positive finite nonzero a and b given as bits, by long
// division of the mantissas: Vulkan allows 2.5 ulp for OpFDiv, and the q8_0 scales must be the CPU's
// bits. Overflow is not handled (the callers' quotients are below 2^127).
uint div_rne_bits(uint a, uint b) {
  uint ma, mb;
  int ea, eb;
  f32_split(a, ma, ea);
  f32_split(b, mb, eb);
  int e = ea - eb;
  if (ma < mb) {  // quotient of the mantissas in [1, 2)
    ma <<= 1u;
    --e;
  }
  uint q = 0u, r = ma;  // 25 quotient bits: 24 of mantissa, one rounding bit
  for (int i = 0; i < 25; ++i) {
    q <<= 1u;
    if (r >= mb) {
      r -= mb;
      q |= 1u;
    }
    r <<= 1u;
  }
  bool sticky = r != 0u;
  int extra = 0;  // further right shift for a subnormal quotient
  if (e < -126) {
    extra = -126 - e;
    if (extra >= 25) return 0u;  // below half the smallest subnormal
    sticky = sticky || (q & ((1u << uint(extra)) - 1u)) != 0u;
  }
  uint mant = q >> uint(1 + extra);
  const bool round_bit = ((q >> uint(extra)) & 1u) != 0u;
  if (round_bit && (sticky || (mant & 1u) != 0u)) ++mant;
  if (e < -126) return mant;  // a carry into 2^23 is the smallest normal's bits
  if (mant == 0x1000000u) {
    mant >>= 1u;
    ++e;
  }
  return (uint(e + 127) << 23u) | (mant & 0x7fffffu);
}

// C's roundf: to nearest, halves away from zero (the reference q8_0 quantizer's std::round).
float round_half_away(float v) {
  const float t = trunc(v);
  precise const float frac = v - t;  // exact
  return abs(frac) >= 0.5 ? t + sign(v) : t;
}
