#include "tools/model_info.h"

#include <algorithm>
#include <cctype>
#include <map>

#include <fmt/format.h>

namespace minfer::tools {
namespace {

using nlohmann::ordered_json;

std::string upper(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

ordered_json scalar_json(const gguf::Value& v) {
  using gguf::ValueType;
  switch (v.type()) {
    case ValueType::U8:
    case ValueType::U16:
    case ValueType::U32:
    case ValueType::U64: return v.as_u64();
    case ValueType::I8:
    case ValueType::I16:
    case ValueType::I32:
    case ValueType::I64: return v.as_i64();
    // f32 is shown by its shortest decimal form (1e-06, not 9.99999997e-07).
    case ValueType::F32: return std::stod(fmt::format("{}", static_cast<float>(v.as_f64())));
    case ValueType::F64: return v.as_f64();
    case ValueType::BOOL: return v.as_bool();
    case ValueType::STRING: return v.as_string();
    case ValueType::ARRAY: break;
  }
  return nullptr;
}

ordered_json array_element(const gguf::Array& a, size_t i, size_t preview);

// Long arrays are summarised: {"type": "array", "elem_type", "count", "head": [...], "tail": [...]}.
ordered_json array_json(const gguf::Array& a, size_t preview) {
  ordered_json out;
  out["type"] = "array";
  out["elem_type"] = std::string(gguf::value_type_name(a.elem_type));
  out["count"] = a.count;
  const bool whole = a.count <= 2 * preview;
  ordered_json head = ordered_json::array();
  ordered_json tail = ordered_json::array();
  for (size_t i = 0; i < a.count && (whole || i < preview); ++i) head.push_back(array_element(a, i, preview));
  if (!whole) {
    for (size_t i = a.count - preview; i < a.count; ++i) tail.push_back(array_element(a, i, preview));
  }
  out[whole ? "values" : "head"] = std::move(head);
  if (!whole) out["tail"] = std::move(tail);
  return out;
}

ordered_json array_element(const gguf::Array& a, size_t i, size_t preview) {
  if (a.elem_type == gguf::ValueType::STRING) return a.strings[i];
  if (a.elem_type == gguf::ValueType::ARRAY) return array_json(a.arrays[i], preview);
  return scalar_json(gguf::Value::from_raw(a.elem_type, a.raw.data() + i * gguf::value_type_size(a.elem_type)));
}

ordered_json value_json(const gguf::Value& v, size_t preview) {
  if (v.type() == gguf::ValueType::ARRAY) return array_json(v.as_array(), preview);
  return scalar_json(v);
}

std::string shorten(const std::string& s, size_t max) {
  std::string out = s.size() <= max ? s : s.substr(0, max) + "...";
  std::string escaped;
  for (char c : out) {
    if (c == '\n') escaped += "\\n";
    else if (c == '\t') escaped += "\\t";
    else if (c == '\r') escaped += "\\r";
    else escaped += c;
  }
  return escaped;
}

std::string value_text(const gguf::Value& v, size_t preview) {
  if (v.type() == gguf::ValueType::STRING) return fmt::format("\"{}\"", shorten(v.as_string(), 80));
  if (v.type() != gguf::ValueType::ARRAY) return scalar_json(v).dump();
  const gguf::Array& a = v.as_array();
  std::string out = fmt::format("[{} x {}]", a.count, gguf::value_type_name(a.elem_type));
  const bool whole = a.count <= 2 * preview;
  auto elem = [&](size_t i) {
    if (a.elem_type == gguf::ValueType::STRING) return fmt::format("\"{}\"", shorten(a.strings[i], 24));
    return array_element(a, i, preview).dump();
  };
  std::vector<std::string> parts;
  for (size_t i = 0; i < a.count && (whole || i < preview); ++i) parts.push_back(elem(i));
  if (!whole) {
    parts.push_back("...");
    for (size_t i = a.count - preview; i < a.count; ++i) parts.push_back(elem(i));
  }
  return fmt::format("{} {}", out, fmt::join(parts, ", "));
}

// Architecture hyperparameters under `<arch>.` that inference reads (each shown when the file has it):
// the dense shape, then the mixture-of-experts settings, then RoPE scaling and attention windows.
constexpr std::string_view kHparamKeys[] = {
    "context_length",        "embedding_length",      "block_count",       "feed_forward_length",
    "attention.head_count",  "attention.head_count_kv", "attention.key_length", "attention.value_length",
    "rope.freq_base",        "attention.layer_norm_rms_epsilon",
    "expert_count",          "expert_used_count",     "expert_feed_forward_length", "expert_shared_count",
    "expert_weights_norm",   "rope.scaling.type",     "rope.scaling.factor",
    "rope.scaling.original_context_length", "attention.sliding_window", "final_logit_softcapping",
};

}  // namespace

ordered_json info_json(const gguf::File& file, const InfoOptions& options) {
  ordered_json out;
  out["path"] = file.part_path(0);
  out["version"] = file.version();
  out["alignment"] = file.alignment();
  ordered_json parts = ordered_json::array();
  for (size_t i = 0; i < file.n_parts(); ++i) {
    parts.push_back({{"path", file.part_path(i)}, {"size", file.part_size(i)}, {"data_offset", file.data_offset(i)}});
  }
  out["parts"] = std::move(parts);

  ordered_json meta = ordered_json::object();
  for (const auto& [key, value] : file.metadata().entries()) meta[key] = value_json(value, options.array_preview);
  out["metadata"] = std::move(meta);

  uint64_t n_params = 0;
  uint64_t n_bytes = 0;
  std::map<std::string, std::array<uint64_t, 3>> by_type;  // type -> {tensors, params, bytes}
  ordered_json tensors = ordered_json::array();
  for (const gguf::TensorInfo& t : file.tensors()) {
    const auto n = static_cast<uint64_t>(t.n_elements());
    n_params += n;
    n_bytes += t.n_bytes;
    auto& agg = by_type[upper(dtype_name(t.type))];
    agg[0] += 1;
    agg[1] += n;
    agg[2] += t.n_bytes;
    if (options.show_tensors) {
      ordered_json ne = ordered_json::array();
      for (int d = 0; d < t.n_dims; ++d) ne.push_back(t.ne[d]);
      tensors.push_back({{"name", t.name},
                         {"type", upper(dtype_name(t.type))},
                         {"ne", std::move(ne)},
                         {"offset", t.file_offset},
                         {"n_bytes", t.n_bytes},
                         {"part", t.part}});
    }
  }
  if (options.show_tensors) out["tensors"] = std::move(tensors);
  ordered_json types = ordered_json::object();
  for (const auto& [name, agg] : by_type) {
    types[name] = {{"tensors", agg[0]},
                   {"params", agg[1]},
                   {"bytes", agg[2]},
                   {"bits_per_weight", agg[1] ? 8.0 * static_cast<double>(agg[2]) / static_cast<double>(agg[1]) : 0.0}};
  }
  out["totals"] = {{"tensors", file.tensors().size()},
                   {"params", n_params},
                   {"bytes", n_bytes},
                   {"bits_per_weight", n_params ? 8.0 * static_cast<double>(n_bytes) / static_cast<double>(n_params) : 0.0},
                   {"by_type", std::move(types)}};

  ordered_json hparams = ordered_json::object();
  auto arch = file.metadata().get_string("general.architecture");
  if (arch.ok()) {
    hparams["architecture"] = *arch;
    for (std::string_view k : kHparamKeys) {
      const std::string key = fmt::format("{}.{}", *arch, k);
      if (const gguf::Value* v = file.metadata().find(key)) hparams[std::string(k)] = scalar_json(*v);
    }
  }
  if (const gguf::Value* tokens = file.metadata().find("tokenizer.ggml.tokens");
      tokens != nullptr && tokens->type() == gguf::ValueType::ARRAY) {
    hparams["n_vocab"] = tokens->as_array().count;
  }
  out["hparams"] = std::move(hparams);
  return out;
}

std::string info_text(const gguf::File& file, const InfoOptions& options) {
  const ordered_json j = info_json(file, options);
  std::string out;
  out += fmt::format("file:      {}\n", file.part_path(0));
  if (file.n_parts() > 1) out += fmt::format("parts:     {}\n", file.n_parts());
  out += fmt::format("format:    GGUF v{}, alignment {}\n", file.version(), file.alignment());

  out += fmt::format("\nmetadata ({} keys):\n", file.metadata().size());
  size_t key_width = 0;
  for (const auto& [key, value] : file.metadata().entries()) key_width = std::max(key_width, key.size());
  for (const auto& [key, value] : file.metadata().entries()) {
    out += fmt::format("  {:<{}}  {:<6}  {}\n", key, key_width, gguf::value_type_name(value.type()),
                       value_text(value, options.array_preview));
  }

  if (options.show_tensors) {
    out += fmt::format("\ntensors ({}):\n", file.tensors().size());
    size_t name_width = 4;
    for (const gguf::TensorInfo& t : file.tensors()) name_width = std::max(name_width, t.name.size());
    out += fmt::format("  {:<{}}  {:<7}  {:<22}  {:>12}  {:>12}\n", "name", name_width, "type", "shape", "offset", "bytes");
    for (const gguf::TensorInfo& t : file.tensors()) {
      std::vector<int64_t> ne(t.ne.begin(), t.ne.begin() + t.n_dims);
      out += fmt::format("  {:<{}}  {:<7}  {:<22}  {:>12}  {:>12}\n", t.name, name_width, upper(dtype_name(t.type)),
                         fmt::format("[{}]", fmt::join(ne, ", ")), t.file_offset, t.n_bytes);
    }
  }

  const ordered_json& totals = j["totals"];
  out += fmt::format("\ntotals: {} tensors, {} parameters, {} bytes ({:.2f} MiB), {:.3f} bits/weight\n",
                     totals["tensors"].get<uint64_t>(), totals["params"].get<uint64_t>(), totals["bytes"].get<uint64_t>(),
                     static_cast<double>(totals["bytes"].get<uint64_t>()) / (1024.0 * 1024.0),
                     totals["bits_per_weight"].get<double>());
  for (const auto& [type, agg] : totals["by_type"].items()) {
    out += fmt::format("  {:<7} {:>4} tensors  {:>12} params  {:>12} bytes  {:.3f} bits/weight\n", type,
                       agg["tensors"].get<uint64_t>(), agg["params"].get<uint64_t>(), agg["bytes"].get<uint64_t>(),
                       agg["bits_per_weight"].get<double>());
  }
  const ordered_json& hp = j["hparams"];
  if (!hp.empty()) {
    out += "\nhyperparameters:\n";
    for (const auto& [key, value] : hp.items()) {
      out += fmt::format("  {:<32} {}\n", key, value.is_string() ? value.get<std::string>() : value.dump());
    }
  }
  return out;
}

}  // namespace minfer::tools
