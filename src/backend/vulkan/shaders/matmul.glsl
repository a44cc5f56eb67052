// The float matmul's arithmetic (f32 activations), one of the two arithmetic files behind matvec_main.glsl
// and matmat_main.glsl (the other is matmul_q8.glsl). Its one reduction order, so that an output's bits
// never depend on which shader computed it or on how many tokens shared the dispatch ("a request's greedy
// output does not depend on its batch"):
//   - a weight row is cut into units of four elements (a quantized group of DEQUANT4; for F32/F16/BF16
//     elements 4u..4u+3, the row's last unit holding fewer when k is not a multiple of 4);
//   - unit u belongs to lane u % MM_LANES; each lane sums its units in increasing order, each unit's
//     elements in order, as one chain of fma (`precise`, so every fma is the same operation everywhere);
//   - the MM_LANES partials are added by a fixed binary tree: lane i += lane i + s, for s = 32, 16, ..., 1.
// No subgroup operation is used: their order is the driver's and differs with the subgroup size.
//
// The interface both arithmetic files give the main bodies: MmUnit (a unit of one weight row, ready to
// multiply), mm_units(), mm_unit(row, u), mm_zero(), mm_token(t) (where token t's activations start),
// mm_add(unit, u, token, acc), and a slot array in shared memory for matmat (mm_share / mm_shared).
// The including shader declares, before this file: `uint w[]` (weight rows, read as words) and MM_LANES
// (matmul_io.glsl), the spec constant TYPE and a push block `p` with `k` (elements per row) and `x_skip`;
// this file declares binding 1, the activations.

layout(binding = 1) readonly buffer X { float x[]; };  // tokens of k floats, from x_skip

struct MmUnit {
  vec4 wv;  // the unit's elements (zero past the row's end)
  uint e0;  // index of its first element
  uint nv;  // elements it holds (4, or fewer for a plain type's last unit)
};

// Units in a row of k elements.
uint mm_units() { return IS_PLAIN(TYPE) ? (p.k + 3u) >> 2 : p.k >> 2; }

// Where unit u's elements start and how many it holds, from u alone.
void mm_extent(uint u, out uint e0, out uint nv) {
  if (IS_PLAIN(TYPE)) {
    e0 = 4u * u;
    nv = min(4u, p.k - e0);
  } else {
    e0 = dequant4_first(TYPE, u);
    nv = 4u;
  }
}

// Unit u of the weight row starting at byte `row`.
MmUnit mm_unit(uint row, uint u) {
  MmUnit m;
  mm_extent(u, m.e0, m.nv);
  if (IS_PLAIN(TYPE)) {
    m.wv = vec4(0.0);
    m.wv.x = LOAD_PLAIN(w, TYPE, row, m.e0);
    if (m.nv > 1u) m.wv.y = LOAD_PLAIN(w, TYPE, row, m.e0 + 1u);
    if (m.nv > 2u) m.wv.z = LOAD_PLAIN(w, TYPE, row, m.e0 + 2u);
    if (m.nv > 3u) m.wv.w = LOAD_PLAIN(w, TYPE, row, m.e0 + 3u);
  } else {
    DEQUANT4(w, TYPE, row, u, m.wv);
  }
  return m;
}

MmUnit mm_zero() { return MmUnit(vec4(0.0), 0u, 0u); }

// Index of token t's first activation.
uint mm_token(uint t) { return p.x_skip + t * p.k; }

// acc + the unit's products with the token's activations at `tok`, one fma per element in element order.
float mm_add(MmUnit m, uint u, uint tok, float acc) {
  const uint o = tok + m.e0;
  precise float a;
  if (IS_PLAIN(TYPE)) {
    a = fma(m.wv.x, x[o], acc);
    if (m.nv > 1u) a = fma(m.wv.y, x[o + 1u], a);
    if (m.nv > 2u) a = fma(m.wv.z, x[o + 2u], a);
    if (m.nv > 3u) a = fma(m.wv.w, x[o + 3u], a);
  } else {
    a = fma(m.wv.x, x[o], acc);
    a = fma(m.wv.y, x[o + 1u], a);
    a = fma(m.wv.z, x[o + 2u], a);
    a = fma(m.wv.w, x[o + 3u], a);
  }
  return a;
}

// matmat's slots: the dequantized units of one step, MM_SLOTS of them (declared by the including shader).
#ifdef MM_SLOTS
shared vec4 mm_slots[MM_SLOTS];
void mm_share(uint slot, MmUnit m) { mm_slots[slot] = m.wv; }
MmUnit mm_shared(uint slot, uint u) {
  MmUnit m;
  m.wv = mm_slots[slot];
  mm_extent(u, m.e0, m.nv);  // known from the unit alone
  return m;
}
#endif
