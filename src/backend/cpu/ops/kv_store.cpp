// Writes a batch's K and V rows into their KV cells, converting f32 to the cache's element type
// (f32 copy, f16 round-to-nearest-even, q8_0 with ggml's reference quantizer).
#include <cstring>

#include "backend/cpu/ops/ops.h"
#include "core/fp16.h"
#include "quant/quant.h"

namespace minfer::backend::cpu {
namespace {

void store_row(const KvLayerView& kv, const float* src, void* base, int32_t cell) {
  auto* dst = static_cast<uint8_t*>(base) + static_cast<size_t>(cell) * kv.row_bytes;
  switch (kv.type) {
    case DType::F32: std::memcpy(dst, src, kv.row_elems * sizeof(float)); break;
    case DType::F16: {
      auto* h = reinterpret_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < kv.row_elems; ++i) h[i] = fp32_to_fp16(src[i]);
      break;
    }
    default: quant::quantize_row(kv.type, src, dst, kv.row_elems); break;
  }
}

}  // namespace

void kv_store(const KvLayerView& kv, const float* k, const float* v, const int32_t* cells, int64_t n_tokens,
              ThreadPool& pool) {
  pool.run([&](int ith, int nth) {
    int64_t t0, t1;
    split_range(n_tokens, ith, nth, &t0, &t1);
    for (int64_t t = t0; t < t1; ++t) {
      store_row(kv, k + t * kv.row_elems, kv.k, cells[t]);
      store_row(kv, v + t * kv.row_elems, kv.v, cells[t]);
    }
  });
}

}  // namespace minfer::backend::cpu
