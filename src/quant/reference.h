// Scalar reference quantizers, dequantizers and dots: the test oracle and the generic kernels.
// File quantizers (quantize_*) reproduce ggml's quantize_row_*_ref bit for bit; activation quantizers
// (act_*) reproduce what ggml's x86 CPU backend does at run time (e.g. Q8_0 rounds half to even there).
#pragma once

#include <cstdint>

namespace minfer::quant::ref {

// f32 -> type, byte-identical to ggml's reference encoders (what llama-quantize writes without imatrix).
void quantize_q4_0(const float* x, void* y, int64_t n);
void quantize_q4_1(const float* x, void* y, int64_t n);
void quantize_q5_0(const float* x, void* y, int64_t n);
void quantize_q5_1(const float* x, void* y, int64_t n);
void quantize_q8_0(const float* x, void* y, int64_t n);
void quantize_q8_1(const float* x, void* y, int64_t n);
void quantize_q4_K(const float* x, void* y, int64_t n);
void quantize_q5_K(const float* x, void* y, int64_t n);
void quantize_q6_K(const float* x, void* y, int64_t n);
void quantize_q8_K(const float* x, void* y, int64_t n);
void quantize_f16(const float* x, void* y, int64_t n);
void quantize_bf16(const float* x, void* y, int64_t n);
void quantize_f32(const float* x, void* y, int64_t n);

void dequantize_q4_0(const void* x, float* y, int64_t n);
void dequantize_q4_1(const void* x, float* y, int64_t n);
void dequantize_q5_0(const void* x, float* y, int64_t n);
void dequantize_q5_1(const void* x, float* y, int64_t n);
void dequantize_q8_0(const void* x, float* y, int64_t n);
void dequantize_q8_1(const void* x, float* y, int64_t n);
void dequantize_q4_K(const void* x, float* y, int64_t n);
void dequantize_q5_K(const void* x, float* y, int64_t n);
void dequantize_q6_K(const void* x, float* y, int64_t n);
void dequantize_q8_K(const void* x, float* y, int64_t n);
void dequantize_f16(const void* x, float* y, int64_t n);
void dequantize_bf16(const void* x, float* y, int64_t n);
void dequantize_f32(const void* x, float* y, int64_t n);

// Run-time activation quantizers as ggml's x86 CPU backend computes them.
void act_q8_0(const float* x, void* y, int64_t n);  // d = amax/127, q = round_half_even(x * 127/amax)
void act_q8_1(const float* x, void* y, int64_t n);  // as act_q8_0 plus s = d * sum(q)
void act_q8_K(const float* x, void* y, int64_t n);  // = quantize_q8_K
void act_f16(const float* x, void* y, int64_t n);
void act_bf16(const float* x, void* y, int64_t n);
void act_f32(const float* x, void* y, int64_t n);

// *s = dot(w, x): w in the weight type, x in its activation type. Integer parts are exact; floats are
// accumulated per block in order (f32/f16/bf16 in double, as ggml's generic code).
void vec_dot_q4_0_q8_0(int64_t n, float* s, const void* w, const void* x);
void vec_dot_q4_1_q8_1(int64_t n, float* s, const void* w, const void* x);
void vec_dot_q5_0_q8_0(int64_t n, float* s, const void* w, const void* x);
void vec_dot_q5_1_q8_1(int64_t n, float* s, const void* w, const void* x);
void vec_dot_q8_0_q8_0(int64_t n, float* s, const void* w, const void* x);
void vec_dot_q4_K_q8_K(int64_t n, float* s, const void* w, const void* x);
void vec_dot_q5_K_q8_K(int64_t n, float* s, const void* w, const void* x);
void vec_dot_q6_K_q8_K(int64_t n, float* s, const void* w, const void* x);
void vec_dot_f16_f16(int64_t n, float* s, const void* w, const void* x);
void vec_dot_bf16_bf16(int64_t n, float* s, const void* w, const void* x);
void vec_dot_f32_f32(int64_t n, float* s, const void* w, const void* x);

// Unpacks the 6-bit scale and min of sub-block j (0..7) of a Q4_K / Q5_K block.
inline void get_scale_min_k4(int j, const uint8_t* q, uint8_t* d, uint8_t* m) {
  if (j < 4) {
    *d = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *d = static_cast<uint8_t>((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
    *m = static_cast<uint8_t>((q[j + 4] >> 4) | ((q[j - 0] >> 6) << 4));
  }
}

}  // namespace minfer::quant::ref
