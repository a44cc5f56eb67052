#include "gguf/value.h"

#include <array>

namespace minfer::gguf {
namespace {

constexpr std::array<std::string_view, 13> kNames = {"u8",   "i8",     "u16",   "i16", "u32", "i32", "f32",
                                                      "bool", "string", "array", "u64", "i64", "f64"};
constexpr std::array<size_t, 13> kSizes = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};

}  // namespace

std::optional<std::string_view> value_type_name(uint32_t id) {
  if (id >= kNames.size()) return std::nullopt;
  return kNames[id];
}

std::string_view value_type_name(ValueType type) { return kNames[static_cast<uint32_t>(type)]; }
size_t value_type_size(ValueType type) { return kSizes[static_cast<uint32_t>(type)]; }

bool is_integer(ValueType type) {
  switch (type) {
    case ValueType::U8:
    case ValueType::I8:
    case ValueType::U16:
    case ValueType::I16:
    case ValueType::U32:
    case ValueType::I32:
    case ValueType::U64:
    case ValueType::I64: return true;
    default: return false;
  }
}

Value Value::string(std::string v) {
  Value out;
  out.type_ = ValueType::STRING;
  out.str_ = std::move(v);
  return out;
}

Value Value::array(Array v) {
  Value out;
  out.type_ = ValueType::ARRAY;
  out.arr_ = std::make_shared<const Array>(std::move(v));
  return out;
}

Value Value::from_raw(ValueType type, const uint8_t* bytes) {
  Value out;
  out.type_ = type;
  std::memcpy(out.raw_, bytes, value_type_size(type));
  return out;
}

uint64_t Value::as_u64() const {
  switch (type_) {
    case ValueType::U8:
    case ValueType::BOOL: return raw_[0];
    case ValueType::U16: { uint16_t v; std::memcpy(&v, raw_, 2); return v; }
    case ValueType::U32: { uint32_t v; std::memcpy(&v, raw_, 4); return v; }
    default: { uint64_t v; std::memcpy(&v, raw_, 8); return v; }
  }
}

int64_t Value::as_i64() const {
  switch (type_) {
    case ValueType::I8: return static_cast<int8_t>(raw_[0]);
    case ValueType::I16: { int16_t v; std::memcpy(&v, raw_, 2); return v; }
    case ValueType::I32: { int32_t v; std::memcpy(&v, raw_, 4); return v; }
    default: { int64_t v; std::memcpy(&v, raw_, 8); return v; }
  }
}

double Value::as_f64() const {
  if (type_ == ValueType::F32) {
    float v;
    std::memcpy(&v, raw_, 4);
    return v;
  }
  double v;
  std::memcpy(&v, raw_, 8);
  return v;
}

bool Value::operator==(const Value& other) const {
  if (type_ != other.type_) return false;
  if (type_ == ValueType::STRING) return str_ == other.str_;
  if (type_ == ValueType::ARRAY) return *arr_ == *other.arr_;
  return std::memcmp(raw_, other.raw_, value_type_size(type_)) == 0;
}

Array Array::of_strings(std::vector<std::string> values) {
  Array a;
  a.elem_type = ValueType::STRING;
  a.count = values.size();
  a.strings = std::move(values);
  return a;
}

}  // namespace minfer::gguf
