#version 450
// The tiled matrix-matrix matmul on 8-bit activations with integer dot products (matmat_main.glsl over
// matmul_q8.glsl).
#include "common.glsl"
#define MM_Q8
#include "matmat_main.glsl"
