// Tensor element types with ggml's numeric ids, block sizes and byte sizes (the GGUF on-disk contract).
// Knowing a type here means a file holding it can be read and sized; which types minfer can compute
// with is decided by the kernels (quant/) and refused by name at model load.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace minfer {

// Values are ggml_type ids as stored in GGUF tensor infos.
enum class DType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q8_1 = 9,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  Q8_K = 15,
  IQ2_XXS = 16,
  IQ2_XS = 17,
  IQ3_XXS = 18,
  IQ1_S = 19,
  IQ4_NL = 20,
  IQ3_S = 21,
  IQ2_S = 22,
  IQ4_XS = 23,
  I8 = 24,
  I16 = 25,
  I32 = 26,
  I64 = 27,
  F64 = 28,
  IQ1_M = 29,
  BF16 = 30,
  TQ1_0 = 34,
  TQ2_0 = 35,
  MXFP4 = 39,
};

struct DTypeTraits {
  DType type;
  std::string_view name;  // ggml's name: "f32", "q4_0", "q4_K", ...
  int64_t block_size;     // elements per block (1 for plain types)
  size_t block_bytes;     // bytes per block
};

// Traits of a known type id, or nullopt for an id ggml does not define (or has retired).
std::optional<DTypeTraits> dtype_traits(uint32_t id);
// Traits of a valid DType (every enumerator is known).
const DTypeTraits& traits(DType type);
inline std::string_view dtype_name(DType type) { return traits(type).name; }
// Looks a type up by its ggml name, case-insensitively ("Q4_K" == "q4_k").
std::optional<DType> dtype_from_name(std::string_view name);

// Bytes of a row of `ne0` elements; nullopt when ne0 is not a multiple of the block size.
std::optional<uint64_t> row_bytes(DType type, int64_t ne0);

}  // namespace minfer
