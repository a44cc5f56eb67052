// Shared helpers of minfer's compute shaders. Buffers are plain uint/float arrays so no optional
// storage feature (8- or 16-bit access) is needed; quantized blocks are read as bytes out of 32-bit words.
// Type ids are ggml's (core/dtype.h): 0 F32, 1 F16, 2 Q4_0, 8 Q8_0.
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require

#define TYPE_F32 0u
#define TYPE_F16 1u
#define TYPE_Q4_0 2u
#define TYPE_Q8_0 8u

// Largest workgroup and token count the shared reduction arrays are sized for.
#define MAX_WG 256u
#define MAX_COLS 8u

// A 32-bit word starting at any byte offset of uint array `buf` (two loads when unaligned).
#define LOAD_U32(buf, off) \
  ((((off) & 3u) == 0u) ? buf[(off) >> 2] \
                        : ((buf[(off) >> 2] >> (((off) & 3u) * 8u)) | (buf[((off) >> 2) + 1u] << (32u - ((off) & 3u) * 8u))))
// An IEEE half at an even byte offset of `buf`, as float.
#define LOAD_F16(buf, off) unpackHalf2x16(buf[(off) >> 2] >> (((off) & 2u) * 8u)).x

// The grid is 2-D when a dispatch needs more groups than one dimension allows.
uint group_index() { return gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x; }
// One thread per element: the shader's workgroup size constant WG must be declared before use (the
// built-in gl_WorkGroupSize is not yet specialized where this file is included).
#define GLOBAL_INDEX (group_index() * WG + gl_LocalInvocationID.x)

// Four dequantized elements 4*g .. 4*g+3 of a quantized row starting at byte `row` of `buf`
// (Q4_0: 18-byte blocks, d + 16 bytes of nibbles, low nibbles first; Q8_0: 34-byte blocks, d + 32 int8).
#define DEQUANT4(buf, TYPE, row, g, out_v)                                                   \
  {                                                                                         \
    const uint blk_ = (g) >> 3u, sub_ = (g) & 7u;                                           \
    if (TYPE == TYPE_Q4_0) {                                                                \
      const uint bo_ = (row) + blk_ * 18u;                                                  \
      const float d_ = LOAD_F16(buf, bo_);                                                  \
      const uint q_ = LOAD_U32(buf, bo_ + 2u + 4u * (sub_ & 3u)) >> (sub_ >= 4u ? 4u : 0u); \
      out_v = d_ * (vec4(q_ & 15u, (q_ >> 8u) & 15u, (q_ >> 16u) & 15u, (q_ >> 24u) & 15u) - 8.0); \
    } else {                                                                                \
      const uint bo_ = (row) + blk_ * 34u;                                                  \
      const float d_ = LOAD_F16(buf, bo_);                                                  \
      const int q_ = int(LOAD_U32(buf, bo_ + 2u + 4u * sub_));                              \
      out_v = d_ * vec4(bitfieldExtract(q_, 0, 8), bitfieldExtract(q_, 8, 8), bitfieldExtract(q_, 16, 8), \
                        bitfieldExtract(q_, 24, 8));                                        \
    }                                                                                       \
  }
// Element index of the first of the four elements DEQUANT4 returns for group g.
uint dequant4_first(uint type, uint g) {
  const uint blk = g >> 3u, sub = g & 7u;
  return type == TYPE_Q4_0 ? blk * 32u + (sub & 3u) * 4u + (sub >= 4u ? 16u : 0u) : blk * 32u + sub * 4u;
}
