// GGUF v3 on-disk layout (little-endian), as written by ggml's gguf.cpp and gguf-py:
//
//   u32 magic "GGUF" | u32 version (3) | u64 n_tensors | u64 n_kv
//   n_kv  x { string key | u32 value_type | value }
//   n_tensors x { string name | u32 n_dims | u64 ne[n_dims] | u32 ggml_type | u64 offset }
//   zero padding to general.alignment (default 32)
//   data section: each tensor at data_start + offset, offsets aligned, tensors zero-padded to alignment
//
// string = u64 length + bytes (UTF-8, no terminator); array = u32 elem_type + u64 count + elements.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "core/dtype.h"

namespace minfer::gguf {

inline constexpr uint32_t kMagic = 0x46554747;  // "GGUF" read as little-endian u32
inline constexpr uint32_t kVersion = 3;
inline constexpr uint32_t kDefaultAlignment = 32;
inline constexpr int kMaxDims = 4;
inline constexpr char kAlignmentKey[] = "general.alignment";

// One tensor of a (possibly split) GGUF file. Shapes use ggml order: ne[0] is the fastest dimension.
struct TensorInfo {
  std::string name;
  DType type = DType::F32;
  int n_dims = 0;
  std::array<int64_t, kMaxDims> ne = {1, 1, 1, 1};  // unused dimensions are 1
  uint64_t offset = 0;       // relative to the data section of its part
  uint64_t file_offset = 0;  // absolute byte offset in its part
  uint64_t n_bytes = 0;
  uint32_t part = 0;                // index of the split part holding the data (0 for single files)
  const uint8_t* data = nullptr;    // view into the part's mapping (nullptr for a bare parse)

  int64_t n_elements() const { return ne[0] * ne[1] * ne[2] * ne[3]; }
};

}  // namespace minfer::gguf
