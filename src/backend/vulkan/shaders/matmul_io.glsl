// What matvec_main.glsl and matmat_main.glsl share besides the arithmetic: the weights (binding 0), the
// outputs (binding 2; binding 1, the activations, is the arithmetic file's) and the push constants both
// start with (matmat_main.glsl adds two), and the lane count of both arithmetics' fixed order.
#define MM_LANES 64u

layout(binding = 0) readonly buffer W { uint w[]; };    // rows [row0, row0 + rows) of the weight, from byte w_skip
layout(binding = 2) writeonly buffer Y { float y[]; };  // tokens of n floats, from y_skip

#define MM_PUSH_FIELDS                                                      \
  uint k;         /* elements per row */                                    \
  uint n;         /* rows of the whole weight (the output row stride) */    \
  uint row0;      /* first row of this dispatch (in the whole weight) */    \
  uint rows;      /* rows in this dispatch */                               \
  uint row_bytes; /* bytes per weight row */                                \
  uint w_skip;    /* bytes */                                               \
  uint x_skip;    /* the activations' first word (binding 1) */             \
  uint y_skip;    /* floats */
