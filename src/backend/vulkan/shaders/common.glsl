// Shared helpers of minfer's compute shaders. Buffers are plain uint/float arrays so no optional
// storage feature (8- or 16-bit access) is needed; quantized blocks are read as bytes out of 32-bit words.
// Type ids are ggml's (core/dtype.h): 0 F32, 1 F16, 2 Q4_0, 8 Q8_0, 12 Q4_K, 14 Q6_K.
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require

#define TYPE_F32 0u
#define TYPE_F16 1u
#define TYPE_Q4_0 2u
#define TYPE_Q8_0 8u
#define TYPE_Q4_K 12u
#define TYPE_Q6_K 14u

// Largest workgroup and token count the shared reduction arrays are sized for.
#define MAX_WG 256u
#define MAX_COLS 8u

// A 32-bit word starting at any byte offset of uint array `buf` (two loads when unaligned).
#define LOAD_U32(buf, off) \
  ((((off) & 3u) == 0u) ? buf[(off) >> 2] \
                        : ((buf[(off) >> 2] >> (((off) & 3u) * 8u)) | (buf[((off) >> 2) + 1u] << (32u - ((off) & 3u) * 8u))))
// One byte at any byte offset of `buf`.
#define LOAD_U8(buf, off) ((buf[(off) >> 2] >> (((off) & 3u) * 8u)) & 255u)
// An IEEE half at an even byte offset of `buf`, as float.
#define LOAD_F16(buf, off) unpackHalf2x16(buf[(off) >> 2] >> (((off) & 2u) * 8u)).x

// The grid is 2-D when a dispatch needs more groups than one dimension allows.
uint group_index() { return gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x; }
// One thread per element: the shader's workgroup size constant WG must be declared before use (the
// built-in gl_WorkGroupSize is not yet specialized where this file is included).
#define GLOBAL_INDEX (group_index() * WG + gl_LocalInvocationID.x)

// Four dequantized elements of group g (elements dequant4_first(TYPE, g) + 0, 1, 2, 3) of a quantized row
// starting at byte `row` of `buf`, computed with the CPU reference's operations in its order (`precise`
// forbids fusing them), so get_rows is bit-exact:
//   Q4_0: 18-byte blocks of 32, d + 16 bytes of nibbles (low nibbles: elements 0-15);
//   Q8_0: 34-byte blocks of 32, d + 32 int8;
//   Q4_K: 144-byte blocks of 256, d, dmin, 12 bytes of 6-bit scales and mins, 128 bytes of nibbles (each
//         64 elements: low nibbles then high nibbles of 32 bytes); x = d*sc * q - dmin*m;
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
    } else if (TYPE == TYPE_Q8_0) {                                                                         \
      const uint blk_ = (g) >> 3u, sub_ = (g) & 7u;                                                         \
      const uint bo_ = (row) + blk_ * 34u;                                                                  \
      const float d_ = LOAD_F16(buf, bo_);                                                                  \
      const int q_ = int(LOAD_U32(buf, bo_ + 2u + 4u * sub_));                                              \
      out_v = d_ * vec4(bitfieldExtract(q_, 0, 8), bitfieldExtract(q_, 8, 8), bitfieldExtract(q_, 16, 8),   \
                        bitfieldExtract(q_, 24, 8));                                                        \
    } else if (TYPE == TYPE_Q4_K) {                                                                         \
      const uint blk_ = (g) >> 6u, G_ = (g) & 63u;                                                          \
      const uint g64_ = G_ >> 4u, h_ = (G_ >> 3u) & 1u, l4_ = G_ & 7u;                                      \
      const uint bo_ = (row) + blk_ * 144u;                                                                 \
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
      const uint q_ = LOAD_U32(buf, bo_ + 16u + 32u * g64_ + 4u * l4_) >> (4u * h_);                        \
      precise vec4 v_ = d1_ * vec4(q_ & 15u, (q_ >> 8u) & 15u, (q_ >> 16u) & 15u, (q_ >> 24u) & 15u);       \
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
  if (type == TYPE_Q4_K || type == TYPE_Q6_K) {
    const uint blk = g >> 6u, G = g & 63u;
    return type == TYPE_Q4_K ? blk * 256u + (G >> 4u) * 64u + ((G >> 3u) & 1u) * 32u + 4u * (G & 7u)
                             : blk * 256u + (G >> 5u) * 128u + ((G >> 3u) & 3u) * 32u + 4u * (G & 7u);
  }
  const uint blk = g >> 3u, sub = g & 7u;
  return type == TYPE_Q4_0 ? blk * 32u + (sub & 3u) * 4u + (sub >= 4u ? 16u : 0u) : blk * 32u + sub * 4u;
}
