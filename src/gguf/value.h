// GGUF metadata values: the 13 on-disk value types, scalars, strings and (nested) arrays.
// Values own their data (strings and arrays are copied out of the file once, at open).
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace minfer::gguf {

// On-disk ids (gguf_type).
enum class ValueType : uint32_t {
  U8 = 0,
  I8 = 1,
  U16 = 2,
  I16 = 3,
  U32 = 4,
  I32 = 5,
  F32 = 6,
  BOOL = 7,
  STRING = 8,
  ARRAY = 9,
  U64 = 10,
  I64 = 11,
  F64 = 12,
};

// "u32", "string", ...; nullopt for an id outside the 13 types.
std::optional<std::string_view> value_type_name(uint32_t id);
std::string_view value_type_name(ValueType type);
// Bytes of a fixed-size element (0 for STRING and ARRAY).
size_t value_type_size(ValueType type);
bool is_integer(ValueType type);

struct Array;

class Value {
 public:
  Value() = default;  // a U8 zero; real values come from the factories below

  static Value u8(uint8_t v) { return scalar(ValueType::U8, v); }
  static Value i8(int8_t v) { return scalar(ValueType::I8, v); }
  static Value u16(uint16_t v) { return scalar(ValueType::U16, v); }
  static Value i16(int16_t v) { return scalar(ValueType::I16, v); }
  static Value u32(uint32_t v) { return scalar(ValueType::U32, v); }
  static Value i32(int32_t v) { return scalar(ValueType::I32, v); }
  static Value u64(uint64_t v) { return scalar(ValueType::U64, v); }
  static Value i64(int64_t v) { return scalar(ValueType::I64, v); }
  static Value f32(float v) { return scalar(ValueType::F32, v); }
  static Value f64(double v) { return scalar(ValueType::F64, v); }
  static Value boolean(bool v) { return scalar(ValueType::BOOL, static_cast<uint8_t>(v ? 1 : 0)); }
  static Value string(std::string v);
  static Value array(Array v);
  // A scalar from its raw little-endian bytes (as read from a file).
  static Value from_raw(ValueType type, const uint8_t* bytes);

  ValueType type() const { return type_; }

  // Scalar views; the caller checks type() first (typed accessors in Metadata do).
  uint64_t as_u64() const;  // unsigned integer types and BOOL, zero-extended
  int64_t as_i64() const;   // signed integer types, sign-extended
  double as_f64() const;    // F32 / F64
  bool as_bool() const { return raw_[0] != 0; }
  const std::string& as_string() const { return str_; }
  const Array& as_array() const { return *arr_; }

  // Raw little-endian bytes of a scalar (value_type_size(type()) of them).
  const uint8_t* raw() const { return raw_; }

  bool operator==(const Value& other) const;

 private:
  template <typename T>
  static Value scalar(ValueType type, T v) {
    Value out;
    out.type_ = type;
    std::memcpy(out.raw_, &v, sizeof(T));
    return out;
  }

  ValueType type_ = ValueType::U8;
  uint8_t raw_[8] = {};
  std::string str_;
  std::shared_ptr<const Array> arr_;  // shared: arrays are immutable once built, copies are cheap
};

// A homogeneous array. Fixed-size elements are kept packed little-endian in `raw`
// (the file's own bytes), strings in `strings`, nested arrays in `arrays`.
struct Array {
  ValueType elem_type = ValueType::U8;
  uint64_t count = 0;
  std::vector<uint8_t> raw;
  std::vector<std::string> strings;
  std::vector<Array> arrays;

  template <typename T>
  static Array of(ValueType type, const std::vector<T>& values) {
    Array a;
    a.elem_type = type;
    a.count = values.size();
    a.raw.resize(values.size() * sizeof(T));
    if (!values.empty()) std::memcpy(a.raw.data(), values.data(), a.raw.size());
    return a;
  }
  static Array of_strings(std::vector<std::string> values);

  bool operator==(const Array& other) const = default;
};

}  // namespace minfer::gguf
