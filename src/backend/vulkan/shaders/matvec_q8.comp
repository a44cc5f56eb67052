#version 450
// The matrix-vector matmul on 8-bit activations with integer dot products (matvec_main.glsl over
// matmul_q8.glsl).
#include "common.glsl"
#define MM_Q8
#include "matvec_main.glsl"
