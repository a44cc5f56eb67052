// A small GGUF exercising every value type, nested arrays and several tensor types, for reader tests.
#pragma once

#include <cstring>
#include <vector>

#include "gguf/writer.h"

namespace minfer::gguf::test {

inline std::vector<uint8_t> pattern_bytes(size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(seed + i * 31);
  return v;
}

inline Writer sample_writer(uint32_t alignment = 32) {
  Writer w;
  Metadata& m = w.metadata();
  m.set("general.architecture", Value::string("qwen2"));
  if (alignment != 32) m.set("general.alignment", Value::u32(alignment));
  m.set("t.u8", Value::u8(200));
  m.set("t.i8", Value::i8(-5));
  m.set("t.u16", Value::u16(65000));
  m.set("t.i16", Value::i16(-300));
  m.set("t.u32", Value::u32(4000000000u));
  m.set("t.i32", Value::i32(-7));
  m.set("t.f32", Value::f32(0.5f));
  m.set("t.bool", Value::boolean(true));
  m.set("t.str", Value::string("h\xc3\xa9llo"));
  m.set("t.u64", Value::u64(1ull << 40));
  m.set("t.i64", Value::i64(-(1ll << 40)));
  m.set("t.f64", Value::f64(-2.25));
  m.set("t.arr_i32", Value::array(Array::of<int32_t>(ValueType::I32, {1, -2, 3})));
  m.set("t.arr_str", Value::array(Array::of_strings({"a", "bc", ""})));
  Array outer;
  outer.elem_type = ValueType::ARRAY;
  outer.arrays = {Array::of<float>(ValueType::F32, {1.0f}), Array::of_strings({"x"})};
  outer.count = outer.arrays.size();
  m.set("t.arr_arr", Value::array(outer));
  (void)w.add_tensor("a.weight", DType::F32, {4, 3}, pattern_bytes(48, 1));
  (void)w.add_tensor("b.weight", DType::Q8_0, {64, 2}, pattern_bytes(136, 2));
  (void)w.add_tensor("c.bias", DType::F16, {5}, pattern_bytes(10, 3));
  return w;
}

inline std::vector<uint8_t> sample_bytes(uint32_t alignment = 32) { return *sample_writer(alignment).to_bytes(); }

}  // namespace minfer::gguf::test
