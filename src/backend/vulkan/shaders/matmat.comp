#version 450
// The tiled matrix-matrix matmul on f32 activations (matmat_main.glsl over matmul.glsl).
#include "common.glsl"
#include "matmat_main.glsl"
