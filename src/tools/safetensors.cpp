// safetensors parsing with every count and offset checked before use (see safetensors.h for the format).
#include "tools/safetensors.h"

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace minfer::tools {
namespace fs = std::filesystem;

size_t safetensors_dtype_size(const std::string& d) {
  if (d == "F64" || d == "I64" || d == "U64") return 8;
  if (d == "F32" || d == "I32" || d == "U32") return 4;
  if (d == "F16" || d == "BF16" || d == "I16" || d == "U16") return 2;
  if (d == "I8" || d == "U8" || d == "BOOL" || d == "F8_E4M3" || d == "F8_E5M2") return 1;
  return 0;
}

Result<std::vector<StTensor>> parse_safetensors(std::span<const uint8_t> bytes, const std::string& name) {
  if (bytes.size() < 8) return invalid_argument("safetensors: {}: {} bytes is too short for the header length", name, bytes.size());
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | bytes[static_cast<size_t>(i)];
  if (header_len > bytes.size() - 8) {
    return invalid_argument("safetensors: {}: header length {} is past the end of the file ({} bytes)", name, header_len,
                            bytes.size());
  }
  const std::string_view text(reinterpret_cast<const char*>(bytes.data() + 8), header_len);
  const nlohmann::json header = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!header.is_object()) return invalid_argument("safetensors: {}: the header is not a JSON object", name);
  const uint64_t data_size = bytes.size() - 8 - header_len;
  const uint8_t* data = bytes.data() + 8 + header_len;
  std::vector<StTensor> out;
  for (const auto& [key, v] : header.items()) {
    if (key == "__metadata__") continue;
    if (!v.is_object() || !v.contains("dtype") || !v["dtype"].is_string() || !v.contains("shape") ||
        !v["shape"].is_array() || !v.contains("data_offsets") || !v["data_offsets"].is_array() ||
        v["data_offsets"].size() != 2) {
      return invalid_argument("safetensors: {}: tensor '{}': expected {{dtype, shape, data_offsets: [begin, end]}}", name, key);
    }
    StTensor t;
    t.name = key;
    t.file = name;
    t.dtype = v["dtype"].get<std::string>();
    const size_t elem = safetensors_dtype_size(t.dtype);
    if (elem == 0) return unsupported("safetensors: {}: tensor '{}' has unknown dtype '{}'", name, key, t.dtype);
    uint64_t n = 1;
    for (const auto& d : v["shape"]) {
      if (!d.is_number_unsigned()) return invalid_argument("safetensors: {}: tensor '{}': shape has a non-integer or negative dimension", name, key);
      const uint64_t dim = d.get<uint64_t>();
      if (dim != 0 && n > (uint64_t{1} << 62) / dim) return invalid_argument("safetensors: {}: tensor '{}': shape overflows", name, key);
      n *= dim;
      t.shape.push_back(static_cast<int64_t>(dim));
    }
    const auto& off = v["data_offsets"];
    if (!off[0].is_number_unsigned() || !off[1].is_number_unsigned()) {
      return invalid_argument("safetensors: {}: tensor '{}': data_offsets are not non-negative integers", name, key);
    }
    const uint64_t begin = off[0].get<uint64_t>(), end = off[1].get<uint64_t>();
    if (begin > end || end > data_size) {
      return invalid_argument("safetensors: {}: tensor '{}': data_offsets [{}, {}] outside the {} data bytes", name, key, begin,
                              end, data_size);
    }
    if (end - begin != n * elem) {
      return invalid_argument("safetensors: {}: tensor '{}': data_offsets span {} bytes but {} {} elements need {}", name, key,
                              end - begin, n, t.dtype, n * elem);
    }
    t.data = std::span<const uint8_t>(data + begin, end - begin);
    out.push_back(std::move(t));
  }
  return out;
}

Result<Checkpoint> Checkpoint::open(const std::string& dir) {
  Checkpoint c;
  const fs::path root(dir);
  std::map<std::string, std::string> weight_map;  // tensor -> shard (sharded checkpoints)
  std::vector<std::string> shards;
  const fs::path index = root / "model.safetensors.index.json";
  std::error_code ec;
  if (fs::exists(index, ec)) {
    std::ifstream in(index, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    const nlohmann::json j = nlohmann::json::parse(ss.str(), nullptr, false);
    if (!j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object()) {
      return invalid_argument("convert: {}: expected a JSON object with a weight_map", index.string());
    }
    std::set<std::string> unique;
    for (const auto& [k, v] : j["weight_map"].items()) {
      if (!v.is_string() || v.get<std::string>().find('/') != std::string::npos) {
        return invalid_argument("convert: {}: weight_map['{}'] is not a file name in the folder", index.string(), k);
      }
      weight_map[k] = v.get<std::string>();
      if (unique.insert(v.get<std::string>()).second) shards.push_back(v.get<std::string>());
    }
  } else if (fs::exists(root / "model.safetensors", ec)) {
    shards.push_back("model.safetensors");
  } else {
    return not_found("convert: {}: no model.safetensors or model.safetensors.index.json", dir);
  }
  for (const std::string& shard : shards) {
    MINFER_ASSIGN_OR_RETURN(MappedFile mf, MappedFile::open((root / shard).string()));
    auto owned = std::make_unique<MappedFile>(std::move(mf));
    MINFER_ASSIGN_OR_RETURN(std::vector<StTensor> ts, parse_safetensors(owned->bytes(), shard));
    for (StTensor& t : ts) {
      if (!weight_map.empty()) {
        auto it = weight_map.find(t.name);
        if (it == weight_map.end() || it->second != shard) {
          return invalid_argument("convert: tensor '{}' is in {} but the index maps it to {}", t.name, shard,
                                  it == weight_map.end() ? "nothing" : it->second);
        }
      }
      if (c.tensors_.count(t.name)) return invalid_argument("convert: tensor '{}' appears in two shards", t.name);
      c.tensors_.emplace(t.name, std::move(t));
    }
    c.files_.push_back(std::move(owned));
  }
  for (const auto& [name, shard] : weight_map) {
    if (!c.tensors_.count(name)) return not_found("convert: tensor '{}' is listed in the index but missing from {}", name, shard);
  }
  return c;
}

const StTensor* Checkpoint::find(const std::string& name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

}  // namespace minfer::tools
