// Generic (portable C++) kernel table: the scalar references from quant/reference.cpp, and a tile
// kernel that is a loop of vec_dot (so every ISA's tile equals its own vec_dot by construction).
#include "quant/kernels/kernels.h"
#include "quant/reference.h"

namespace minfer::kernels::generic {
namespace {

template <void (*Dot)(int64_t, float*, const void*, const void*)>
void gemm_tile(int64_t n, const void* w, size_t w_stride, int nr, const void* x, size_t x_stride, int nc,
               float* y, size_t ldy) {
  for (int c = 0; c < nc; ++c) {
    const void* xc = static_cast<const uint8_t*>(x) + static_cast<size_t>(c) * x_stride;
    for (int r = 0; r < nr; ++r) {
      Dot(n, y + static_cast<size_t>(c) * ldy + r,
          static_cast<const uint8_t*>(w) + static_cast<size_t>(r) * w_stride, xc);
    }
  }
}

template <void (*Dot)(int64_t, float*, const void*, const void*)>
void set(CpuKernels& k, DType t, DType vdt, FromFloatFn from_float) {
  TypeKernels& tk = k.types[static_cast<uint32_t>(t)];
  tk.vec_dot_type = vdt;
  tk.from_float = from_float;
  tk.vec_dot = Dot;
  tk.gemm_tile = gemm_tile<Dot>;
}

}  // namespace

void fill(CpuKernels& k) {
  namespace ref = quant::ref;
  set<ref::vec_dot_f32_f32>(k, DType::F32, DType::F32, ref::act_f32);
  set<ref::vec_dot_f16_f16>(k, DType::F16, DType::F16, ref::act_f16);
  set<ref::vec_dot_bf16_bf16>(k, DType::BF16, DType::BF16, ref::act_bf16);
  set<ref::vec_dot_q4_0_q8_0>(k, DType::Q4_0, DType::Q8_0, ref::act_q8_0);
  set<ref::vec_dot_q4_1_q8_1>(k, DType::Q4_1, DType::Q8_1, ref::act_q8_1);
  set<ref::vec_dot_q5_0_q8_0>(k, DType::Q5_0, DType::Q8_0, ref::act_q8_0);
  set<ref::vec_dot_q5_1_q8_1>(k, DType::Q5_1, DType::Q8_1, ref::act_q8_1);
  set<ref::vec_dot_q8_0_q8_0>(k, DType::Q8_0, DType::Q8_0, ref::act_q8_0);
  set<ref::vec_dot_q4_K_q8_K>(k, DType::Q4_K, DType::Q8_K, ref::act_q8_K);
  set<ref::vec_dot_q5_K_q8_K>(k, DType::Q5_K, DType::Q8_K, ref::act_q8_K);
  set<ref::vec_dot_q6_K_q8_K>(k, DType::Q6_K, DType::Q8_K, ref::act_q8_K);
  fill_attention(k);
}

}  // namespace minfer::kernels::generic
