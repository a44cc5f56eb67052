// The 8-bit matmul's arithmetic (the integer-dot path), one of the two arithmetic files behind
// matvec_main.glsl and matmat_main.glsl (the other is matmul.glsl): activations quantized by
// quantize_q8.comp exactly as the CPU quantizes them for the weight type (Q8_0 for Q4_0/Q5_0/Q8_0, Q8_1
// for Q4_1/Q5_1, Q8_K for the K-quants: quant::vec_dot_type), and integer dot products of packed bytes
// (OpSDot, VK_KHR_shader_integer_dot_product).
//
// Its one reduction order (integer sums are exact, so only the floats need one):
//   - a weight row is cut into units of 32 elements (a block of the 32-element types, a sub-block of a
//     K-quant super-block); unit u's term is computed from exact integer dots with the CPU reference's
//     per-block float operations (quant/reference.cpp's vec_dot_*), `precise`, so every term has the
//     same bits everywhere;
//   - unit u belongs to lane u % MM_LANES; each lane adds its terms in increasing order;
//   - the MM_LANES partials are added by matmul.glsl's fixed binary tree.
// So an output differs from the CPU's (same quantized activations, same integers) only by the order of
// the float additions, and its bits never depend on the shader or the batch.
//
// Same interface and declarations as matmul.glsl (read there).
#extension GL_EXT_spirv_intrinsics : require

// quantize_q8.comp's output, per token ((k / 4 + k / 16) words from x_skip): k / 4 words of packed signed
// bytes (element order), then two words per unit: the scale as f32 bits (Q8_0, Q8_1: the f16 d as
// float; Q8_K: the super-block's d) and a second word (Q8_0: the sum of the unit's 32 bytes; Q8_1: the f16
// s = d * sum as f32 bits; Q8_K: the sums of its two 16-byte halves, low half in bits 0-15).
layout(binding = 1) readonly buffer A { uint a[]; };

// OpSDot on four packed signed bytes (PackedVectorFormat4x8Bit = 0): glslc 2023.2 has no
// GL_EXT_integer_dot_product, so the instruction is declared here (DotProduct = 6019,
// DotProductInput4x8BitPacked = 6018, OpSDot = 4450).
spirv_instruction(extensions = ["SPV_KHR_integer_dot_product"], capabilities = [6019, 6018], id = 4450)
int sdot4x8(uint x, uint y, spirv_literal int packed_format);
#define SDOT(x, y) sdot4x8(x, y, 0)

struct MmUnit {
  uint q[8];  // the unit's 32 weight values (before any offset) as signed bytes, in element order
  vec2 f;     // Q4_0/Q5_0/Q8_0, Q6_K: (d, 0); Q4_1/Q5_1: (d, m); Q4_K/Q5_K: the super-block's (d, dmin)
  ivec2 s;    // Q4_K/Q5_K: the sub-block's (scale, min); Q6_K: its two 16-element groups' scales
};

uint mm_units() { return p.k >> 5; }

// Four nibbles (bits 0-3 of each byte of `v`) with the fifth bits `h` (bit i for byte i) set above them.
uint with_fifth(uint v, uint h) {
  return v | (((h & 1u) | ((h & 2u) << 7u) | ((h & 4u) << 14u) | ((h & 8u) << 21u)) << 4u);
}

// Unit u of the weight row starting at byte `row`.
MmUnit mm_unit(uint row, uint u) {
  MmUnit m;
  m.f = vec2(0.0);
  m.s = ivec2(0);
  if (TYPE == TYPE_Q8_0) {
    const uint bo = row + u * 34u;
    m.f.x = LOAD_F16(w, bo);
    for (uint i = 0; i < 8u; ++i) m.q[i] = LOAD_U32(w, bo + 2u + 4u * i);
  } else if (TYPE == TYPE_Q4_0 || TYPE == TYPE_Q4_1 || TYPE == TYPE_Q5_0 || TYPE == TYPE_Q5_1) {
    // Element j < 16 is the low nibble of qs[j], element j + 16 its high nibble; Q5's fifth bit of
    // element e is bit e of qh.
    const uint bsz = TYPE == TYPE_Q4_0 ? 18u : TYPE == TYPE_Q4_1 ? 20u : TYPE == TYPE_Q5_0 ? 22u : 24u;
    const uint qs = TYPE == TYPE_Q4_0 ? 2u : TYPE == TYPE_Q4_1 ? 4u : TYPE == TYPE_Q5_0 ? 6u : 8u;
    const uint bo = row + u * bsz;
    m.f.x = LOAD_F16(w, bo);
    if (TYPE == TYPE_Q4_1 || TYPE == TYPE_Q5_1) m.f.y = LOAD_F16(w, bo + 2u);
    const uint qh = TYPE == TYPE_Q5_0 || TYPE == TYPE_Q5_1 ? LOAD_U32(w, bo + (TYPE == TYPE_Q5_0 ? 2u : 4u)) : 0u;
    for (uint i = 0; i < 4u; ++i) {
      const uint v = LOAD_U32(w, bo + qs + 4u * i);
      m.q[i] = with_fifth(v & 0x0F0F0F0Fu, (qh >> (4u * i)) & 15u);
      m.q[i + 4u] = with_fifth((v >> 4u) & 0x0F0F0F0Fu, (qh >> (4u * i + 16u)) & 15u);
    }
  } else if (TYPE == TYPE_Q4_K || TYPE == TYPE_Q5_K) {
    // Sub-block j: the low (j even) or high nibbles of qs[32 * (j / 2) ...], Q5_K's fifth bit j of qh[l];
    // its 6-bit scale and min as quant::ref::get_scale_min_k4.
    const uint j = u & 7u;
    const uint bo = row + (u >> 3u) * (TYPE == TYPE_Q4_K ? 144u : 176u);
    m.f = vec2(LOAD_F16(w, bo), LOAD_F16(w, bo + 2u));
    if (j < 4u) {
      m.s = ivec2(LOAD_U8(w, bo + 4u + j) & 63u, LOAD_U8(w, bo + 8u + j) & 63u);
    } else {
      m.s = ivec2((LOAD_U8(w, bo + 8u + j) & 15u) | ((LOAD_U8(w, bo + j) >> 6u) << 4u),
                  (LOAD_U8(w, bo + 8u + j) >> 4u) | ((LOAD_U8(w, bo + 4u + j) >> 6u) << 4u));
    }
    const uint qs = bo + (TYPE == TYPE_Q4_K ? 16u : 48u) + 32u * (j >> 1u);
    for (uint i = 0; i < 8u; ++i) {
      m.q[i] = (LOAD_U32(w, qs + 4u * i) >> (4u * (j & 1u))) & 0x0F0F0F0Fu;
      if (TYPE == TYPE_Q5_K) m.q[i] |= ((LOAD_U32(w, bo + 16u + 4u * i) >> j) & 0x01010101u) << 4u;
    }
  } else {  // Q6_K: unit j is quarter j % 4 of half j / 4; values 0..63 (the -32 is applied to the sums)
    const uint j = u & 7u, hf = j >> 2u, quarter = j & 3u;
    const uint bo = row + (u >> 3u) * 210u;
    m.f.x = LOAD_F16(w, bo + 208u);
    const uint sc = bo + 192u + 8u * hf + 2u * quarter;
    m.s = ivec2(bitfieldExtract(int(LOAD_U8(w, sc)), 0, 8), bitfieldExtract(int(LOAD_U8(w, sc + 1u)), 0, 8));
    const uint ql = bo + 64u * hf + 32u * (quarter & 1u), qh = bo + 128u + 32u * hf;
    for (uint i = 0; i < 8u; ++i) {
      m.q[i] = ((LOAD_U32(w, ql + 4u * i) >> (quarter >= 2u ? 4u : 0u)) & 0x0F0F0F0Fu) |
               (((LOAD_U32(w, qh + 4u * i) >> (2u * quarter)) & 0x03030303u) << 4u);
    }
  }
  return m;
}

MmUnit mm_zero() {
  MmUnit m;
  for (uint i = 0; i < 8u; ++i) m.q[i] = 0u;
  m.f = vec2(0.0);
  m.s = ivec2(0);
  return m;
}

// Word index of token t's activations.
uint mm_token(uint t) { return p.x_skip + t * ((p.k >> 2) + (p.k >> 4)); }

// acc + unit u's term against the token whose activations start at word `tok`.
float mm_add(MmUnit m, uint u, uint tok, float acc) {
  const uint qo = tok + 8u * u, mo = tok + (p.k >> 2) + 2u * u;
  const float xd = uintBitsToFloat(a[mo]);
  const uint xs = a[mo + 1u];
  const int lo = SDOT(m.q[0], a[qo]) + SDOT(m.q[1], a[qo + 1u]) + SDOT(m.q[2], a[qo + 2u]) + SDOT(m.q[3], a[qo + 3u]);
  const int hi = SDOT(m.q[4], a[qo + 4u]) + SDOT(m.q[5], a[qo + 5u]) + SDOT(m.q[6], a[qo + 6u]) + SDOT(m.q[7], a[qo + 7u]);
  precise float t;
  if (TYPE == TYPE_Q4_0 || TYPE == TYPE_Q5_0 || TYPE == TYPE_Q8_0) {  // sumi * (d_w * d_x)
    const int offset = TYPE == TYPE_Q4_0 ? 8 : TYPE == TYPE_Q5_0 ? 16 : 0;
    t = float(lo + hi - offset * int(xs)) * (m.f.x * xd);
  } else if (TYPE == TYPE_Q4_1 || TYPE == TYPE_Q5_1) {  // sumi * (d_w * d_x) + m_w * s_x
    t = float(lo + hi) * (m.f.x * xd) + m.f.y * uintBitsToFloat(xs);
  } else if (TYPE == TYPE_Q4_K || TYPE == TYPE_Q5_K) {  // d * sumi - dmin * summ, d = d_w * d_x
    const int bsum = bitfieldExtract(int(xs), 0, 16) + bitfieldExtract(int(xs), 16, 16);
    t = (m.f.x * xd) * float(m.s.x * (lo + hi)) - (m.f.y * xd) * float(m.s.y * bsum);
  } else {  // Q6_K: d_w * d_x * sumi, each 16-element group's values less 32
    const int sumi = m.s.x * (lo - 32 * bitfieldExtract(int(xs), 0, 16)) + m.s.y * (hi - 32 * bitfieldExtract(int(xs), 16, 16));
    t = (m.f.x * xd) * float(sumi);
  }
  precise const float r = acc + t;
  return r;
}

// matmat's slots: one step's units, MM_SLOTS of them (declared by the including shader): 8 words of
// values, the two float scales and the two integer scales as 16-bit halves (11 words a slot).
#ifdef MM_SLOTS
shared uint mm_slot_q[MM_SLOTS * 8u];
shared vec2 mm_slot_f[MM_SLOTS];
shared int mm_slot_s[MM_SLOTS];
void mm_share(uint slot, MmUnit m) {
  for (uint i = 0; i < 8u; ++i) mm_slot_q[slot * 8u + i] = m.q[i];
  mm_slot_f[slot] = m.f;
  mm_slot_s[slot] = (m.s.x & 0xFFFF) | (m.s.y << 16);
}
MmUnit mm_shared(uint slot, uint u) {
  MmUnit m;
  for (uint i = 0; i < 8u; ++i) m.q[i] = mm_slot_q[slot * 8u + i];
  m.f = mm_slot_f[slot];
  m.s = ivec2(bitfieldExtract(mm_slot_s[slot], 0, 16), bitfieldExtract(mm_slot_s[slot], 16, 16));
  return m;
}
#endif
