// Writing small Hugging Face checkpoints in tests: safetensors as the Python library writes them, random
// tensors in a chosen dtype, and a tiny byte-level BPE tokenizer (tokenizer.json + tokenizer_config.json)
// whose pre-tokenizer regex picks llama.cpp's pre name (llama-bpe, qwen2).
#pragma once

#include <cstdint>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/fp16.h"
#include "core/rng.h"

namespace minfer::tools::test_ckpt {

struct SrcTensor {
  std::string name;
  std::string dtype;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;

  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
  float at(int64_t i) const {
    if (dtype == "F32") {
      float f;
      std::memcpy(&f, bytes.data() + i * 4, 4);
      return f;
    }
    uint16_t h;
    std::memcpy(&h, bytes.data() + i * 2, 2);
    return dtype == "F16" ? fp16_to_fp32(h) : bf16_to_fp32(h);
  }
};

inline void write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

// Keys sorted (nlohmann's object order), header padded with spaces to 8 bytes.
inline void write_safetensors(const std::string& path, const std::vector<SrcTensor>& ts) {
  nlohmann::json h = nlohmann::json::object();
  uint64_t off = 0;
  for (const auto& t : ts) {
    h[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {off, off + t.bytes.size()}}};
    off += t.bytes.size();
  }
  h["__metadata__"] = {{"format", "pt"}};
  std::string text = h.dump();
  while (text.size() % 8) text.push_back(' ');
  std::ofstream out(path, std::ios::binary);
  const uint64_t n = text.size();
  for (int i = 0; i < 8; ++i) out.put(static_cast<char>((n >> (8 * i)) & 0xff));
  out << text;
  for (const auto& t : ts) out.write(reinterpret_cast<const char*>(t.bytes.data()), static_cast<std::streamsize>(t.bytes.size()));
}

// Uniform values offset + scale * [-1, 1) in `dtype` (F32, F16, BF16).
inline SrcTensor random_tensor(Rng& rng, std::string name, std::vector<int64_t> shape, const std::string& dtype,
                               float scale, float offset = 0.0f) {
  SrcTensor t{std::move(name), dtype, std::move(shape), {}};
  const int64_t n = t.numel();
  t.bytes.resize(static_cast<size_t>(n) * (dtype == "F32" ? 4 : 2));
  for (int64_t i = 0; i < n; ++i) {
    const float v = offset + scale * (static_cast<float>(rng.uniform()) * 2.0f - 1.0f);
    if (dtype == "F32") {
      std::memcpy(t.bytes.data() + i * 4, &v, 4);
    } else {
      const uint16_t h = dtype == "BF16" ? fp32_to_bf16(v) : fp32_to_fp16(v);
      std::memcpy(t.bytes.data() + i * 2, &h, 2);
    }
  }
  return t;
}

constexpr char kLlama3Regex[] =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr char kQwen2Regex[] =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// GPT-2's byte -> printable code point table, UTF-8 encoded.
inline std::string byte_token(int b) {
  int cp = b;
  if (!((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255))) {
    int n = 0;
    for (int x = 0; x < b; ++x) {
      if (!((x >= 33 && x <= 126) || (x >= 161 && x <= 172) || (x >= 174 && x <= 255))) ++n;
    }
    cp = 256 + n;
  }
  std::string s;
  if (cp < 0x80) s.push_back(static_cast<char>(cp));
  else {
    s.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    s.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
  return s;
}

// 256 byte tokens, 4 merges (ids 256..259), 3 specials (260..262); with config vocab_size 264 the last
// id is padding. `regex` chooses the pre-tokenizer.
inline void write_tiny_bpe_tokenizer(const std::string& dir, const std::string& regex) {
  nlohmann::json vocab = nlohmann::json::object();
  for (int b = 0; b < 256; ++b) vocab[byte_token(b)] = b;
  const std::string sp = byte_token(' ');
  vocab["he"] = 256;
  vocab[sp + "t"] = 257;
  vocab[sp + "the"] = 258;
  vocab["in"] = 259;
  nlohmann::json merges = nlohmann::json::array({nlohmann::json::array({"h", "e"}), nlohmann::json::array({sp, "t"}),
                                                 nlohmann::json::array({sp + "t", "he"}), nlohmann::json::array({"i", "n"})});
  nlohmann::json added = nlohmann::json::array();
  const char* specials[] = {"<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>"};
  for (int i = 0; i < 3; ++i) added.push_back({{"id", 260 + i}, {"content", specials[i]}, {"special", true}});
  nlohmann::json tok = {
      {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", merges}}},
      {"added_tokens", added},
      {"pre_tokenizer",
       {{"type", "Sequence"},
        {"pretokenizers", nlohmann::json::array({{{"type", "Split"}, {"pattern", {{"Regex", regex}}}}, {{"type", "ByteLevel"}}})}}}};
  write_text(dir + "/tokenizer.json", tok.dump());
  write_text(dir + "/tokenizer_config.json",
             nlohmann::json({{"bos_token", "<|begin_of_text|>"}, {"eos_token", "<|end_of_text|>"}, {"add_bos_token", true}}).dump());
}

}  // namespace minfer::tools::test_ckpt
