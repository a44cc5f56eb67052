// A tiny byte-level BPE vocabulary written with gguf::Writer and read back, for unit tests:
// ids 0..255 are the byte tokens in byte order, then kMerges' results, then specials.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "core/byte_unicode.h"
#include "gguf/reader.h"
#include "gguf/writer.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"

namespace minfer::tokenizer::tok_test {

inline std::string byte_str(uint8_t b) {
  std::string s;
  append_utf8(byte_to_codepoint(b), s);
  return s;
}

// Merge rank r produces id 256 + r.
inline const std::vector<std::pair<std::string, std::string>>& tiny_merges() {
  static const std::vector<std::pair<std::string, std::string>> merges = {
      {"h", "e"},                   // 256 he
      {"l", "l"},                   // 257 ll
      {"he", "ll"},                 // 258 hell
      {"hell", "o"},                // 259 hello
      {byte_str(' '), "w"},         // 260 " w"
      {"o", "r"},                   // 261 or
      {byte_str(' ') + "w", "or"},  // 262 " wor"
      {"a", "a"},                   // 263 aa
  };
  return merges;
}

constexpr int32_t kEndOfText = 264, kImStart = 265, kImEnd = 266, kThink = 267, kPad = 268;

struct TinyOptions {
  std::string model = "gpt2";
  std::string pre = "qwen2";
  bool with_pre = true;
  bool with_merges = true;
  int drop_byte = -1;      // replace this byte's token by another string
  bool duplicate = false;  // add a second "hello"
};

inline gguf::Metadata tiny_metadata(const TinyOptions& o = {}) {
  using gguf::Array;
  using gguf::Value;
  using gguf::ValueType;
  std::vector<std::string> tokens;
  for (int b = 0; b < 256; ++b)
    tokens.push_back(b == o.drop_byte ? "<dropped>" : byte_str(static_cast<uint8_t>(b)));
  std::vector<std::string> merges;
  for (const auto& [a, b] : tiny_merges()) {
    merges.push_back(a + " " + b);
    tokens.push_back(a + b);
  }
  std::vector<int32_t> types(tokens.size(), 1);
  for (const auto& [text, type] : std::vector<std::pair<std::string, int32_t>>{
           {"<|endoftext|>", 3}, {"<|im_start|>", 3}, {"<|im_end|>", 3}, {"<think>", 4}, {"[PAD268]", 5}}) {
    tokens.push_back(text);
    types.push_back(type);
  }
  if (o.duplicate) {
    tokens.push_back("hello");
    types.push_back(1);
  }
  gguf::Writer w;
  auto& m = w.metadata();
  m.set("general.architecture", Value::string("qwen2"));
  m.set("tokenizer.ggml.model", Value::string(o.model));
  if (o.with_pre) m.set("tokenizer.ggml.pre", Value::string(o.pre));
  m.set("tokenizer.ggml.tokens", Value::array(Array::of_strings(tokens)));
  m.set("tokenizer.ggml.token_type", Value::array(Array::of(ValueType::I32, types)));
  m.set("tokenizer.ggml.merges",
        Value::array(Array::of_strings(o.with_merges ? merges : std::vector<std::string>{})));
  m.set("tokenizer.ggml.eos_token_id", Value::u32(kImEnd));
  m.set("tokenizer.ggml.bos_token_id", Value::u32(kEndOfText));
  m.set("tokenizer.ggml.padding_token_id", Value::u32(kEndOfText));
  m.set("tokenizer.ggml.add_bos_token", Value::boolean(false));
  // Through the bytes, so the reader's view of the file is what the tokenizer sees.
  auto bytes = w.to_bytes();
  EXPECT_TRUE(bytes.ok()) << bytes.status().message();
  auto parsed = gguf::parse(*bytes, "tiny.gguf");
  EXPECT_TRUE(parsed.ok()) << parsed.status().message();
  return std::move(parsed->metadata);
}

inline Tokenizer tiny_tokenizer(const TinyOptions& o = {}) {
  auto tok = Tokenizer::from_gguf(tiny_metadata(o));
  EXPECT_TRUE(tok.ok()) << tok.status().message();
  return std::move(tok).value();
}

// Byte-token ids of a string that no merge applies to (ids equal byte values here).
inline std::vector<int32_t> byte_ids(std::string_view s) {
  std::vector<int32_t> ids;
  for (const char c : s) ids.push_back(static_cast<uint8_t>(c));
  return ids;
}

}  // namespace minfer::tokenizer::tok_test
