// The matmul's one reduction order, shared by matvec.comp (decode, up to 8 tokens) and matmat.comp
// (prefill, tiles of rows x tokens), so that an output's bits never depend on which shader computed it or
// on how many tokens shared the dispatch ("a request's greedy output does not depend on its batch"):
//   - a weight row is cut into units of four elements (a quantized group of DEQUANT4; for F32/F16/BF16
//     elements 4u..4u+3, the row's last unit holding fewer when k is not a multiple of 4);
//   - unit u belongs to lane u % MM_LANES; each lane sums its units in increasing order, each unit's
//     elements in order, as one chain of fma (`precise`, so every fma is the same operation everywhere);
//   - the MM_LANES partials are added by a fixed binary tree: lane i += lane i + s, for s = 32, 16, ..., 1.
// No subgroup operation is used: their order is the driver's and differs with the subgroup size.
//
// The including shader declares, before this file: `uint w[]` (weight rows, read as words), `float x[]`
// (activations), the spec constant TYPE and a push block `p` with `k` (elements per row).
#define MM_LANES 64u

// Units in a row of k elements.
uint mm_units() { return IS_PLAIN(TYPE) ? (p.k + 3u) >> 2 : p.k >> 2; }

// Unit u of the weight row starting at byte `row`: its elements (zero past the row's end), the index of
// its first element, and how many it holds (4, or fewer for a plain type's last unit).
void mm_weight(uint row, uint u, out vec4 wv, out uint e0, out uint nv) {
  if (IS_PLAIN(TYPE)) {
    e0 = 4u * u;
    nv = min(4u, p.k - e0);
    wv = vec4(0.0);
    wv.x = LOAD_PLAIN(w, TYPE, row, e0);
    if (nv > 1u) wv.y = LOAD_PLAIN(w, TYPE, row, e0 + 1u);
    if (nv > 2u) wv.z = LOAD_PLAIN(w, TYPE, row, e0 + 2u);
    if (nv > 3u) wv.w = LOAD_PLAIN(w, TYPE, row, e0 + 3u);
  } else {
    DEQUANT4(w, TYPE, row, u, wv);
    e0 = dequant4_first(TYPE, u);
    nv = 4u;
  }
}

// The nv activations from float index o (zero past them).
vec4 mm_x(uint o, uint nv) {
  if (!IS_PLAIN(TYPE)) return vec4(x[o], x[o + 1u], x[o + 2u], x[o + 3u]);
  vec4 v = vec4(0.0);
  v.x = x[o];
  if (nv > 1u) v.y = x[o + 1u];
  if (nv > 2u) v.z = x[o + 2u];
  if (nv > 3u) v.w = x[o + 3u];
  return v;
}

// acc + the unit's products, one fma per element in element order.
float mm_fma(vec4 wv, vec4 xv, float acc, uint nv) {
  precise float a = fma(wv.x, xv.x, acc);
  if (IS_PLAIN(TYPE)) {
    if (nv > 1u) a = fma(wv.y, xv.y, a);
    if (nv > 2u) a = fma(wv.z, xv.z, a);
    if (nv > 3u) a = fma(wv.w, xv.w, a);
  } else {
    a = fma(wv.y, xv.y, a);
    a = fma(wv.z, xv.z, a);
    a = fma(wv.w, xv.w, a);
  }
  return a;
}
