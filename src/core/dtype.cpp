#include "core/dtype.h"

#include <array>
#include <cctype>

#include "core/check.h"

namespace minfer {
namespace {

// Block sizes and byte sizes as ggml defines them (ggml-common.h block structs).
constexpr std::array<DTypeTraits, 32> kTraits = {{
    {DType::F32, "f32", 1, 4},
    {DType::F16, "f16", 1, 2},
    {DType::Q4_0, "q4_0", 32, 18},
    {DType::Q4_1, "q4_1", 32, 20},
    {DType::Q5_0, "q5_0", 32, 22},
    {DType::Q5_1, "q5_1", 32, 24},
    {DType::Q8_0, "q8_0", 32, 34},
    {DType::Q8_1, "q8_1", 32, 36},
    {DType::Q2_K, "q2_K", 256, 84},
    {DType::Q3_K, "q3_K", 256, 110},
    {DType::Q4_K, "q4_K", 256, 144},
    {DType::Q5_K, "q5_K", 256, 176},
    {DType::Q6_K, "q6_K", 256, 210},
    {DType::Q8_K, "q8_K", 256, 292},
    {DType::IQ2_XXS, "iq2_xxs", 256, 66},
    {DType::IQ2_XS, "iq2_xs", 256, 74},
    {DType::IQ3_XXS, "iq3_xxs", 256, 98},
    {DType::IQ1_S, "iq1_s", 256, 50},
    {DType::IQ4_NL, "iq4_nl", 32, 18},
    {DType::IQ3_S, "iq3_s", 256, 110},
    {DType::IQ2_S, "iq2_s", 256, 82},
    {DType::IQ4_XS, "iq4_xs", 256, 136},
    {DType::I8, "i8", 1, 1},
    {DType::I16, "i16", 1, 2},
    {DType::I32, "i32", 1, 4},
    {DType::I64, "i64", 1, 8},
    {DType::F64, "f64", 1, 8},
    {DType::IQ1_M, "iq1_m", 256, 56},
    {DType::BF16, "bf16", 1, 2},
    {DType::TQ1_0, "tq1_0", 256, 54},
    {DType::TQ2_0, "tq2_0", 256, 66},
    {DType::MXFP4, "mxfp4", 32, 17},
}};

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i]))) {
      return false;
    }
  }
  return true;
}

}  // namespace

std::optional<DTypeTraits> dtype_traits(uint32_t id) {
  for (const DTypeTraits& t : kTraits) {
    if (static_cast<uint32_t>(t.type) == id) return t;
  }
  return std::nullopt;
}

const DTypeTraits& traits(DType type) {
  for (const DTypeTraits& t : kTraits) {
    if (t.type == type) return t;
  }
  MINFER_CHECK(false, "unknown DType {}", static_cast<uint32_t>(type));
  __builtin_unreachable();
}

std::optional<DType> dtype_from_name(std::string_view name) {
  for (const DTypeTraits& t : kTraits) {
    if (iequals(t.name, name)) return t.type;
  }
  return std::nullopt;
}

std::optional<uint64_t> row_bytes(DType type, int64_t ne0) {
  const DTypeTraits& t = traits(type);
  if (ne0 < 0 || ne0 % t.block_size != 0) return std::nullopt;
  return static_cast<uint64_t>(ne0 / t.block_size) * t.block_bytes;
}

}  // namespace minfer
