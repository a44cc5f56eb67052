// Split and merge of GGUF models with llama-gguf-split's conventions (part names, split.* keys and their
// types, size suffixes in powers of 1000). Tensor data is borrowed from the input's mapping, never decoded.
#include "tools/split.h"

#include <cctype>
#include <filesystem>

#include <fmt/format.h>

#include "gguf/reader.h"
#include "gguf/split.h"
#include "gguf/writer.h"

namespace minfer::tools {
namespace {

uint64_t padded(uint64_t n, uint64_t align) {
  return (n + align - 1) / align * align;
}

std::vector<int64_t> dims(const gguf::TensorInfo& t) {
  return std::vector<int64_t>(t.ne.begin(), t.ne.begin() + t.n_dims);
}

Status add_view(gguf::Writer& w, const gguf::TensorInfo& t) {
  return w.add_tensor(t.name, t.type, dims(t), std::span<const uint8_t>(t.data, t.n_bytes));
}

bool same_file(const std::string& a, const std::string& b) {
  std::error_code ec;
  return std::filesystem::exists(b, ec) && std::filesystem::equivalent(a, b, ec);
}

}  // namespace

Result<uint64_t> parse_split_size(const std::string& text) {
  size_t i = 0;
  uint64_t value = 0;
  while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) {
    if (value > (UINT64_MAX - 9) / 10) return invalid_argument("split: size '{}' is too large", text);
    value = value * 10 + static_cast<uint64_t>(text[i] - '0');
    ++i;
  }
  if (i == 0)
    return invalid_argument("split: size '{}' is not a number with an optional K, M or G suffix", text);
  uint64_t scale = 1;
  if (i < text.size()) {
    const char s = static_cast<char>(std::toupper(static_cast<unsigned char>(text[i])));
    if (s == 'K')
      scale = 1000;
    else if (s == 'M')
      scale = 1000 * 1000;
    else if (s == 'G')
      scale = 1000 * 1000 * 1000;
    else
      return invalid_argument("split: size '{}' has an unknown suffix (use K, M or G: powers of 1000)", text);
    if (i + 1 != text.size()) return invalid_argument("split: size '{}' has trailing characters", text);
  }
  if (value == 0) return invalid_argument("split: size '{}' must be positive", text);
  if (value > UINT64_MAX / scale) return invalid_argument("split: size '{}' is too large", text);
  return value * scale;
}

Result<std::vector<std::string>> split_model(const SplitOptions& options) {
  if ((options.max_bytes == 0) == (options.max_tensors <= 0)) {
    return invalid_argument("split: give exactly one of --max-size and --max-tensors");
  }
  if (gguf::parse_split_path(options.input)) {
    return invalid_argument("split: '{}' is already a split part; merge it first", options.input);
  }
  MINFER_ASSIGN_OR_RETURN(gguf::File in, gguf::File::open(options.input));
  if (in.metadata().contains(gguf::kSplitCountKey)) {
    return invalid_argument("split: '{}' carries split.count; it is a part of a split model", options.input);
  }
  const auto& tensors = in.tensors();
  // Group tensors into parts, in file order.
  std::vector<std::pair<size_t, size_t>> groups;  // [begin, end) into tensors
  size_t begin = 0;
  uint64_t bytes = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const uint64_t n = padded(tensors[i].n_bytes, in.alignment());
    const size_t in_part = i - begin;
    const bool full = options.max_tensors > 0 ? in_part >= static_cast<size_t>(options.max_tensors)
                                              : (in_part > 0 && bytes + n > options.max_bytes);
    if (full) {
      groups.emplace_back(begin, i);
      begin = i;
      bytes = 0;
    }
    bytes += n;
  }
  groups.emplace_back(begin, tensors.size());  // a model without tensors still gets one part
  if (groups.size() > 99999)
    return invalid_argument("split: {} parts is more than the 99999 the names allow", groups.size());

  const int count = static_cast<int>(groups.size());
  std::vector<std::string> paths;
  for (int k = 0; k < count; ++k) {
    const std::string path = gguf::split_path(options.output_prefix, k + 1, count);
    if (same_file(options.input, path)) return invalid_argument("split: output '{}' is the input", path);
    gguf::Writer w;
    if (k == 0) {
      for (const auto& [key, value] : in.metadata().entries()) w.metadata().set(key, value);
    }
    w.metadata().set(gguf::kSplitNoKey, gguf::Value::u16(static_cast<uint16_t>(k)));
    w.metadata().set(gguf::kSplitCountKey, gguf::Value::u16(static_cast<uint16_t>(count)));
    w.metadata().set(gguf::kSplitTensorsCountKey, gguf::Value::i32(static_cast<int32_t>(tensors.size())));
    for (size_t i = groups[k].first; i < groups[k].second; ++i)
      MINFER_RETURN_IF_ERROR(add_view(w, tensors[i]));
    MINFER_RETURN_IF_ERROR(w.write(path));
    if (options.on_part) options.on_part(k + 1, count, path);
    paths.push_back(path);
  }
  return paths;
}

Status merge_model(const std::string& any_part, const std::string& output) {
  MINFER_ASSIGN_OR_RETURN(gguf::File in, gguf::File::open(any_part));
  if (!in.metadata().contains(gguf::kSplitCountKey)) {
    return invalid_argument("merge: '{}' is not part of a split model (no {} key): nothing to merge",
                            any_part, gguf::kSplitCountKey);
  }
  for (size_t i = 0; i < in.n_parts(); ++i) {
    if (same_file(in.part_path(i), output))
      return invalid_argument("merge: output '{}' is one of the parts", output);
  }
  gguf::Writer w;
  for (const auto& [key, value] : in.metadata().entries()) {
    if (key == gguf::kSplitNoKey || key == gguf::kSplitCountKey || key == gguf::kSplitTensorsCountKey)
      continue;
    w.metadata().set(key, value);
  }
  for (const auto& t : in.tensors()) MINFER_RETURN_IF_ERROR(add_view(w, t));
  return w.write(output);
}

}  // namespace minfer::tools
