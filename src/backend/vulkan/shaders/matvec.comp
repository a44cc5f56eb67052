#version 450
// The matrix-vector matmul on f32 activations (matvec_main.glsl over matmul.glsl).
#include "common.glsl"
#include "matvec_main.glsl"
