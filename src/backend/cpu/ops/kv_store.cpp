// kv_rows reads K rows of cells back as f32 (a K shift's input); kv_store writes a batch's K and V rows into
// their KV cells, converting f32 to the cache's element type
// (f32 copy, f16 round-to-nearest-even through the kernel table's converter, q8_0 with ggml's reference
// quantizer).
#include <cstring>

#include "backend/cpu/ops/ops.h"
#include "quant/kernels/kernels.h"
#include "quant/quant.h"

namespace minfer::backend::cpu {
namespace {

void store_row(const KvLayerView& kv, const float* src, void* base, int32_t cell) {
  auto* dst = static_cast<uint8_t*>(base) + static_cast<size_t>(cell) * kv.row_bytes;
  switch (kv.type) {
    case DType::F32:
      std::memcpy(dst, src, kv.row_elems * sizeof(float));
      break;
    // F16C's (or NEON's) round-to-nearest-even conversion: the scalar one's results, 8-16 at a time.
    case DType::F16:
      kernels::cpu_kernels().of(DType::F16).from_float(src, dst, kv.row_elems);
      break;
    default:
      quant::quantize_row(kv.type, src, dst, kv.row_elems);
      break;
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
      if (v != nullptr) store_row(kv, v + t * kv.row_elems, kv.v, cells[t]);
    }
  });
}

void kv_rows(const KvLayerView& kv, const int32_t* cells, int64_t n, float* out, ThreadPool& pool) {
  pool.run([&](int ith, int nth) {
    int64_t t0, t1;
    split_range(n, ith, nth, &t0, &t1);
    for (int64_t t = t0; t < t1; ++t) {
      const auto* row = static_cast<const uint8_t*>(kv.k) + static_cast<size_t>(cells[t]) * kv.row_bytes;
      quant::dequantize_row(kv.type, row, out + t * kv.row_elems, kv.row_elems);
    }
  });
}

}  // namespace minfer::backend::cpu
