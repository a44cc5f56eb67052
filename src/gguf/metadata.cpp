#include "gguf/metadata.h"

#include <limits>

namespace minfer::gguf {
namespace {

Status type_mismatch(std::string_view key, const Value& v, std::string_view expected) {
  return invalid_argument("gguf: key '{}' has type {}, expected {}", key, value_type_name(v.type()), expected);
}

// Reads any integer Value as an int128-ish pair: (negative?, magnitude) collapsed into checks below.
template <typename T>
Result<T> integer_as(std::string_view key, const Value& v, std::string_view expected) {
  if (!is_integer(v.type()) && v.type() != ValueType::BOOL) return type_mismatch(key, v, expected);
  const bool is_signed = v.type() == ValueType::I8 || v.type() == ValueType::I16 || v.type() == ValueType::I32 ||
                         v.type() == ValueType::I64;
  if (is_signed) {
    const int64_t x = v.as_i64();
    if (x < 0 && !std::numeric_limits<T>::is_signed) {
      return invalid_argument("gguf: key '{}' = {} does not fit {}", key, x, expected);
    }
    if (x >= 0 && static_cast<uint64_t>(x) > static_cast<uint64_t>(std::numeric_limits<T>::max())) {
      return invalid_argument("gguf: key '{}' = {} does not fit {}", key, x, expected);
    }
    if (x < 0 && x < static_cast<int64_t>(std::numeric_limits<T>::min())) {
      return invalid_argument("gguf: key '{}' = {} does not fit {}", key, x, expected);
    }
    return static_cast<T>(x);
  }
  const uint64_t x = v.as_u64();
  if (x > static_cast<uint64_t>(std::numeric_limits<T>::max())) {
    return invalid_argument("gguf: key '{}' = {} does not fit {}", key, x, expected);
  }
  return static_cast<T>(x);
}

}  // namespace

bool Metadata::set(std::string key, Value value) {
  auto it = index_.find(key);
  if (it != index_.end()) {
    entries_[it->second].second = std::move(value);
    return false;
  }
  index_.emplace(key, entries_.size());
  entries_.emplace_back(std::move(key), std::move(value));
  return true;
}

bool Metadata::erase(std::string_view key) {
  auto it = index_.find(std::string(key));
  if (it == index_.end()) return false;
  entries_.erase(entries_.begin() + static_cast<std::ptrdiff_t>(it->second));
  index_.clear();
  for (size_t i = 0; i < entries_.size(); ++i) index_.emplace(entries_[i].first, i);
  return true;
}

const Value* Metadata::find(std::string_view key) const {
  auto it = index_.find(std::string(key));
  return it == index_.end() ? nullptr : &entries_[it->second].second;
}

#define MINFER_FIND_OR_RETURN(v, key)                                      \
  const Value* v = find(key);                                              \
  if (v == nullptr) return not_found("gguf: missing required key '{}'", key)

Result<uint32_t> Metadata::get_u32(std::string_view key) const {
  MINFER_FIND_OR_RETURN(v, key);
  return integer_as<uint32_t>(key, *v, "u32");
}
Result<int32_t> Metadata::get_i32(std::string_view key) const {
  MINFER_FIND_OR_RETURN(v, key);
  return integer_as<int32_t>(key, *v, "i32");
}
Result<uint64_t> Metadata::get_u64(std::string_view key) const {
  MINFER_FIND_OR_RETURN(v, key);
  return integer_as<uint64_t>(key, *v, "u64");
}
Result<int64_t> Metadata::get_i64(std::string_view key) const {
  MINFER_FIND_OR_RETURN(v, key);
  return integer_as<int64_t>(key, *v, "i64");
}

Result<float> Metadata::get_f32(std::string_view key) const {
  MINFER_FIND_OR_RETURN(v, key);
  if (v->type() != ValueType::F32 && v->type() != ValueType::F64) return type_mismatch(key, *v, "f32");
  return static_cast<float>(v->as_f64());
}

Result<bool> Metadata::get_bool(std::string_view key) const {
  MINFER_FIND_OR_RETURN(v, key);
  if (v->type() != ValueType::BOOL) return type_mismatch(key, *v, "bool");
  return v->as_bool();
}

Result<std::string> Metadata::get_string(std::string_view key) const {
  MINFER_FIND_OR_RETURN(v, key);
  if (v->type() != ValueType::STRING) return type_mismatch(key, *v, "string");
  return v->as_string();
}

Result<const Array*> Metadata::get_array(std::string_view key, ValueType elem_type) const {
  MINFER_FIND_OR_RETURN(v, key);
  if (v->type() != ValueType::ARRAY) return type_mismatch(key, *v, fmt::format("array of {}", value_type_name(elem_type)));
  const Array& a = v->as_array();
  if (a.elem_type != elem_type) {
    return invalid_argument("gguf: key '{}' is an array of {}, expected array of {}", key,
                            value_type_name(a.elem_type), value_type_name(elem_type));
  }
  return &a;
}

Result<std::vector<std::string>> Metadata::get_string_array(std::string_view key) const {
  MINFER_ASSIGN_OR_RETURN(const Array* a, get_array(key, ValueType::STRING));
  return a->strings;
}

Result<std::vector<int64_t>> Metadata::get_int_array(std::string_view key) const {
  MINFER_FIND_OR_RETURN(v, key);
  if (v->type() != ValueType::ARRAY || !is_integer(v->as_array().elem_type)) {
    return invalid_argument("gguf: key '{}' is not an array of integers", key);
  }
  const Array& a = v->as_array();
  const size_t size = value_type_size(a.elem_type);
  std::vector<int64_t> out(a.count);
  for (uint64_t i = 0; i < a.count; ++i) {
    Value e = Value::from_raw(a.elem_type, a.raw.data() + i * size);
    if (a.elem_type == ValueType::U64) {
      if (e.as_u64() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        return invalid_argument("gguf: key '{}'[{}] does not fit i64", key, i);
      }
      out[i] = static_cast<int64_t>(e.as_u64());
    } else if (a.elem_type == ValueType::U8 || a.elem_type == ValueType::U16 || a.elem_type == ValueType::U32) {
      out[i] = static_cast<int64_t>(e.as_u64());
    } else {
      out[i] = e.as_i64();
    }
  }
  return out;
}

Result<std::vector<float>> Metadata::get_f32_array(std::string_view key) const {
  MINFER_ASSIGN_OR_RETURN(const Array* a, get_array(key, ValueType::F32));
  std::vector<float> out(a->count);
  if (a->count > 0) std::memcpy(out.data(), a->raw.data(), a->count * sizeof(float));
  return out;
}

Result<uint32_t> Metadata::get_u32_or(std::string_view key, uint32_t fallback) const {
  return contains(key) ? get_u32(key) : Result<uint32_t>(fallback);
}
Result<float> Metadata::get_f32_or(std::string_view key, float fallback) const {
  return contains(key) ? get_f32(key) : Result<float>(fallback);
}
Result<bool> Metadata::get_bool_or(std::string_view key, bool fallback) const {
  return contains(key) ? get_bool(key) : Result<bool>(fallback);
}
Result<std::string> Metadata::get_string_or(std::string_view key, std::string fallback) const {
  return contains(key) ? get_string(key) : Result<std::string>(std::move(fallback));
}

#undef MINFER_FIND_OR_RETURN

}  // namespace minfer::gguf
