// Ordered GGUF metadata with typed accessors: later layers ask for `get_u32("qwen2.block_count")`
// and get a value or an error naming the key and the type found, never a raw Value to poke at.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/status.h"
#include "gguf/value.h"

namespace minfer::gguf {

class Metadata {
 public:
  // Inserts or replaces (keeping the key's original position). Returns false if the key existed.
  bool set(std::string key, Value value);
  bool erase(std::string_view key);

  const Value* find(std::string_view key) const;
  bool contains(std::string_view key) const { return find(key) != nullptr; }
  size_t size() const { return entries_.size(); }
  // Entries in file order.
  const std::vector<std::pair<std::string, Value>>& entries() const { return entries_; }

  // Integer accessors accept any integer type whose value fits; anything else is kInvalidArgument
  // ("gguf: key 'x' has type string, expected u32"); a missing key is kNotFound.
  Result<uint32_t> get_u32(std::string_view key) const;
  Result<int32_t> get_i32(std::string_view key) const;
  Result<uint64_t> get_u64(std::string_view key) const;
  Result<int64_t> get_i64(std::string_view key) const;
  // Accepts f32 and f64.
  Result<float> get_f32(std::string_view key) const;
  Result<bool> get_bool(std::string_view key) const;
  Result<std::string> get_string(std::string_view key) const;
  // The array's value, with its element type checked.
  Result<const Array*> get_array(std::string_view key, ValueType elem_type) const;
  Result<std::vector<std::string>> get_string_array(std::string_view key) const;
  // Integer arrays of any integer element type, converted (values must fit int64).
  Result<std::vector<int64_t>> get_int_array(std::string_view key) const;
  Result<std::vector<float>> get_f32_array(std::string_view key) const;

  // Optional variants: the default when the key is absent, an error when present with a wrong type.
  Result<uint32_t> get_u32_or(std::string_view key, uint32_t fallback) const;
  Result<float> get_f32_or(std::string_view key, float fallback) const;
  Result<bool> get_bool_or(std::string_view key, bool fallback) const;
  Result<std::string> get_string_or(std::string_view key, std::string fallback) const;

 private:
  std::vector<std::pair<std::string, Value>> entries_;
  std::unordered_map<std::string, size_t> index_;
};

}  // namespace minfer::gguf
