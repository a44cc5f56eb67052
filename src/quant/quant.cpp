// Type tables behind quant.h: which types are computed, their activation types, and the scalar
// reference (de)quantizers looked up by type.
#include "quant/quant.h"

#include <algorithm>
#include <thread>
#include <vector>

#include "core/check.h"
#include "quant/reference.h"

namespace minfer::quant {
namespace {

using QuantizeFn = void (*)(const float*, void*, int64_t);
using DequantizeFn = void (*)(const void*, float*, int64_t);

struct Codec {
  QuantizeFn quantize;
  DequantizeFn dequantize;
};

const Codec* codec(DType t) {
  static const Codec kF32{ref::quantize_f32, ref::dequantize_f32};
  static const Codec kF16{ref::quantize_f16, ref::dequantize_f16};
  static const Codec kBF16{ref::quantize_bf16, ref::dequantize_bf16};
  static const Codec kQ4_0{ref::quantize_q4_0, ref::dequantize_q4_0};
  static const Codec kQ4_1{ref::quantize_q4_1, ref::dequantize_q4_1};
  static const Codec kQ5_0{ref::quantize_q5_0, ref::dequantize_q5_0};
  static const Codec kQ5_1{ref::quantize_q5_1, ref::dequantize_q5_1};
  static const Codec kQ8_0{ref::quantize_q8_0, ref::dequantize_q8_0};
  static const Codec kQ8_1{ref::quantize_q8_1, ref::dequantize_q8_1};
  static const Codec kQ4_K{ref::quantize_q4_K, ref::dequantize_q4_K};
  static const Codec kQ5_K{ref::quantize_q5_K, ref::dequantize_q5_K};
  static const Codec kQ6_K{ref::quantize_q6_K, ref::dequantize_q6_K};
  static const Codec kQ8_K{ref::quantize_q8_K, ref::dequantize_q8_K};
  switch (t) {
    case DType::F32:
      return &kF32;
    case DType::F16:
      return &kF16;
    case DType::BF16:
      return &kBF16;
    case DType::Q4_0:
      return &kQ4_0;
    case DType::Q4_1:
      return &kQ4_1;
    case DType::Q5_0:
      return &kQ5_0;
    case DType::Q5_1:
      return &kQ5_1;
    case DType::Q8_0:
      return &kQ8_0;
    case DType::Q8_1:
      return &kQ8_1;
    case DType::Q4_K:
      return &kQ4_K;
    case DType::Q5_K:
      return &kQ5_K;
    case DType::Q6_K:
      return &kQ6_K;
    case DType::Q8_K:
      return &kQ8_K;
    default:
      return nullptr;
  }
}

}  // namespace

bool is_compute_type(DType t) {
  switch (t) {
    case DType::F32:
    case DType::F16:
    case DType::BF16:
    case DType::Q4_0:
    case DType::Q4_1:
    case DType::Q5_0:
    case DType::Q5_1:
    case DType::Q8_0:
    case DType::Q4_K:
    case DType::Q5_K:
    case DType::Q6_K:
      return true;
    default:
      return false;
  }
}

bool can_quantize(DType t) {
  return codec(t) != nullptr;
}

DType vec_dot_type(DType t) {
  switch (t) {
    case DType::Q4_0:
    case DType::Q5_0:
    case DType::Q8_0:
      return DType::Q8_0;
    case DType::Q4_1:
    case DType::Q5_1:
      return DType::Q8_1;
    case DType::Q4_K:
    case DType::Q5_K:
    case DType::Q6_K:
      return DType::Q8_K;
    case DType::F16:
      return DType::F16;
    case DType::BF16:
      return DType::BF16;
    default:
      return DType::F32;
  }
}

Status check_row(DType t, int64_t n) {
  if (!is_compute_type(t))
    return unsupported("quant: tensor type {} is not supported for compute", dtype_name(t));
  const int64_t bs = traits(t).block_size;
  if (n <= 0 || n % bs != 0) {
    return invalid_argument("quant: row length {} is not a positive multiple of the {} block size {}", n,
                            dtype_name(t), bs);
  }
  return Status::ok_status();
}

void dequantize_row(DType t, const void* src, float* dst, int64_t n) {
  const Codec* c = codec(t);
  MINFER_CHECK(c != nullptr, "dequantize_row: unsupported type {}", dtype_name(t));
  MINFER_CHECK(n % traits(t).block_size == 0, "dequantize_row: {} is not a multiple of the {} block", n,
               dtype_name(t));
  c->dequantize(src, dst, n);
}

size_t quantize_row(DType t, const float* src, void* dst, int64_t n) {
  const Codec* c = codec(t);
  MINFER_CHECK(c != nullptr, "quantize_row: unsupported type {}", dtype_name(t));
  MINFER_CHECK(n % traits(t).block_size == 0, "quantize_row: {} is not a multiple of the {} block", n,
               dtype_name(t));
  c->quantize(src, dst, n);
  return *row_bytes(t, n);
}

size_t quantize_rows(DType t, const float* src, void* dst, int64_t n_rows, int64_t n_per_row, int n_threads) {
  const Codec* c = codec(t);
  MINFER_CHECK(c != nullptr, "quantize_rows: unsupported type {}", dtype_name(t));
  MINFER_CHECK(n_per_row % traits(t).block_size == 0, "quantize_rows: {} is not a multiple of the {} block",
               n_per_row, dtype_name(t));
  const size_t rb = *row_bytes(t, n_per_row);
  auto work = [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      c->quantize(src + r * n_per_row, static_cast<uint8_t*>(dst) + static_cast<size_t>(r) * rb, n_per_row);
    }
  };
  const int64_t nt = std::clamp<int64_t>(n_threads, 1, std::max<int64_t>(1, n_rows));
  if (nt == 1) {
    work(0, n_rows);
  } else {
    std::vector<std::thread> threads;
    const int64_t per = (n_rows + nt - 1) / nt;
    for (int64_t i = 1; i < nt; ++i) {
      threads.emplace_back(work, std::min(n_rows, i * per), std::min(n_rows, (i + 1) * per));
    }
    work(0, std::min(n_rows, per));
    for (std::thread& th : threads) th.join();
  }
  return rb * static_cast<size_t>(n_rows);
}

}  // namespace minfer::quant
