// `minfer quantize`: re-encodes a GGUF model's 2-D float weights into another type with llama-quantize's
// per-tensor type rules and byte-identical reference encoders, carrying all metadata over.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "core/status.h"

namespace minfer::tools {

struct QuantizeOptions {
  std::string input;   // GGUF file (or the first/any part of a split model)
  std::string output;  // never the input; written via a temp file + rename
  std::string type;   // q4_0 q4_1 q5_0 q5_1 q8_0 q4_K q5_K q6_K q4_K_M q5_K_M f16 bf16 f32 (case-insensitive)
  bool pure = false;  // every 2-D weight gets the base type (no output / attn_v / ffn_down upgrades)
  int n_threads = 1;  // threads encoding the rows of one tensor (bytes are identical for any count)
  // One line per tensor decision ("blk.0.attn_q.weight  f32 [256, 256] -> q4_K  (base type)").
  std::function<void(const std::string&)> on_decision;
  // Called after each tensor is written: (index, count, bytes written so far).
  std::function<void(size_t, size_t, uint64_t)> on_progress;
};

struct QuantizeReport {
  size_t n_tensors = 0;
  size_t n_quantized = 0;  // tensors re-encoded (the rest are copied)
  uint64_t bytes_in = 0;   // tensor data bytes read
  uint64_t bytes_out = 0;  // tensor data bytes written
  uint32_t file_type = 0;  // general.file_type written
};

// Fails, writing nothing, on: an unknown type (the message lists the valid ones), an output path that is
// the input, a tensor that must be re-encoded but is not F32/F16/BF16 (named), a row length the target
// cannot hold, or any I/O error. An interrupted run leaves no partial output file.
Result<QuantizeReport> quantize_model(const QuantizeOptions& options);

}  // namespace minfer::tools
