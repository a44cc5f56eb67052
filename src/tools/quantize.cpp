// quantize_model: decisions from quant::choose_tensor_types, rows encoded with quant::quantize_rows,
// streamed to gguf::Writer through per-tensor producers (one tensor's f32 copy in memory at a time).
#include "tools/quantize.h"

#include <algorithm>
#include <filesystem>
#include <memory>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "gguf/reader.h"
#include "gguf/writer.h"
#include "quant/quant.h"
#include "quant/quantize_rules.h"

namespace minfer::tools {
namespace {

bool same_file(const std::string& a, const std::string& b) {
  std::error_code ec;
  if (std::filesystem::equivalent(a, b, ec)) return true;
  const auto ca = std::filesystem::weakly_canonical(a, ec);
  const auto cb = std::filesystem::weakly_canonical(b, ec);
  return !ec && ca == cb;
}

std::string shape_string(const gguf::TensorInfo& t) {
  std::vector<int64_t> ne(t.ne.begin(), t.ne.begin() + std::max(1, t.n_dims));
  return fmt::format("[{}]", fmt::join(ne, ", "));
}

bool is_float_source(DType t) {
  return t == DType::F32 || t == DType::F16 || t == DType::BF16;
}

// The order llama-quantize writes tensors in: its loader's weights map, sorted by layer (tensors outside
// the blocks first), then by name. Writing the same order (and the metadata as below) makes the whole
// output file byte-identical to llama-quantize's, not only each tensor.
std::vector<size_t> llama_quantize_order(const std::vector<gguf::TensorInfo>& tensors) {
  std::vector<size_t> order(tensors.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const int la = quant::layer_of(tensors[a].name), lb = quant::layer_of(tensors[b].name);
    return la != lb ? la < lb : tensors[a].name < tensors[b].name;
  });
  return order;
}

}  // namespace

Result<QuantizeReport> quantize_model(const QuantizeOptions& options) {
  const auto ft = quant::file_type_from_name(options.type);
  if (!ft) {
    return invalid_argument("quantize: unknown type '{}' (valid: {})", options.type,
                            fmt::join(quant::file_type_names(), " "));
  }
  MINFER_ASSIGN_OR_RETURN(auto opened, gguf::File::open(options.input));
  auto file = std::make_shared<gguf::File>(std::move(opened));
  for (size_t i = 0; i < file->n_parts(); ++i) {
    if (same_file(file->part_path(i), options.output)) {
      return invalid_argument("quantize: output '{}' is the input file; refusing to overwrite it",
                              options.output);
    }
  }

  const std::vector<size_t> order = llama_quantize_order(file->tensors());
  std::vector<quant::TensorDesc> descs;  // in the output order, as llama-quantize counts attn_v / ffn_down
  for (size_t i : order) {
    const gguf::TensorInfo& t = file->tensors()[i];
    quant::TensorDesc d;
    d.name = t.name;
    d.type = t.type;
    d.n_dims = t.n_dims;
    for (int dim = 0; dim < 4; ++dim) d.ne[dim] = t.ne[static_cast<size_t>(dim)];
    descs.push_back(std::move(d));
  }
  int n_expert = 0;  // llama-quantize reads hparams.n_expert (<arch>.expert_count) for its expert rules
  bool llm_type_70b = false;
  if (file->metadata().contains("general.architecture")) {
    const gguf::Metadata& md = file->metadata();
    MINFER_ASSIGN_OR_RETURN(std::string arch, md.get_string("general.architecture"));
    if (!quant::quantize_rules_cover(arch)) {
      return unsupported(
          "quantize: architecture '{}' is not supported (llama-quantize's type rules are implemented for qwen2, "
          "qwen3, qwen3moe, llama and gemma3)",
          arch);
    }
    MINFER_ASSIGN_OR_RETURN(uint32_t experts, md.get_u32_or(arch + ".expert_count", 0));
    n_expert = static_cast<int>(std::min<uint32_t>(experts, 1u << 20));
    MINFER_ASSIGN_OR_RETURN(uint32_t n_layer, md.get_u32_or(arch + ".block_count", 0));
    if (n_layer == 80) {  // only then can the model be llama.cpp's LLM_TYPE_70B
      MINFER_ASSIGN_OR_RETURN(uint32_t n_head, md.get_u32_or(arch + ".attention.head_count", 0));
      MINFER_ASSIGN_OR_RETURN(uint32_t n_head_kv, md.get_u32_or(arch + ".attention.head_count_kv", n_head));
      llm_type_70b = quant::is_llm_type_70b(arch, n_layer, n_head, n_head_kv, experts);
    }
  }
  const std::vector<quant::TensorDecision> decisions =
      quant::choose_tensor_types(*ft, descs, options.pure, n_expert, llm_type_70b);

  gguf::Writer writer;
  // llama-quantize copies every key, then sets general.quantization_version and general.file_type (gguf
  // moves a key it sets to the end, so these two come last, in this order, for every output type), then
  // drops the split keys.
  for (const auto& [key, value] : file->metadata().entries()) {
    if (key.rfind("split.", 0) == 0) continue;  // the output is one file
    if (key == "general.quantization_version" || key == "general.file_type") continue;
    writer.metadata().set(key, value);
  }
  writer.metadata().set("general.quantization_version", gguf::Value::u32(2));  // GGML_QNT_VERSION
  writer.metadata().set("general.file_type", gguf::Value::u32(ft->ftype));

  QuantizeReport report;
  std::vector<uint64_t> done_bytes;  // output bytes after each tensor, for progress
  report.file_type = ft->ftype;
  report.n_tensors = file->tensors().size();
  for (size_t k = 0; k < order.size(); ++k) {
    const gguf::TensorInfo& t = file->tensors()[order[k]];
    const quant::TensorDecision& d = decisions[k];
    std::vector<int64_t> ne(t.ne.begin(), t.ne.begin() + t.n_dims);
    report.bytes_in += t.n_bytes;
    if (!d.quantize) {
      if (options.on_decision) {
        options.on_decision(fmt::format("{:<32} {:>5} {:<14} -> {:<5} ({})", t.name, dtype_name(t.type),
                                        shape_string(t), dtype_name(t.type), d.reason));
      }
      report.bytes_out += t.n_bytes;
      done_bytes.push_back(report.bytes_out);
      MINFER_RETURN_IF_ERROR(
          writer.add_tensor(t.name, t.type, ne, std::span<const uint8_t>(t.data, t.n_bytes)));
      continue;
    }
    if (!is_float_source(t.type)) {
      return unsupported("quantize: tensor '{}' is {}; only f32/f16/bf16 tensors can be re-encoded (to {})",
                         t.name, dtype_name(t.type), dtype_name(d.type));
    }
    const int64_t ne0 = t.ne[0];
    const auto out_row = row_bytes(d.type, ne0);
    if (!out_row) {
      return invalid_argument("quantize: tensor '{}': row of {} is not a multiple of the {} block", t.name,
                              ne0, dtype_name(d.type));
    }
    const int64_t rows = t.n_elements() / ne0;
    report.bytes_out += *out_row * static_cast<uint64_t>(rows);
    done_bytes.push_back(report.bytes_out);
    ++report.n_quantized;
    if (options.on_decision) {
      options.on_decision(fmt::format("{:<32} {:>5} {:<14} -> {:<5} ({})", t.name, dtype_name(t.type),
                                      shape_string(t), dtype_name(d.type), d.reason));
    }
    const DType from = t.type, to = d.type;
    const uint8_t* data = t.data;
    const int n_threads = options.n_threads;
    // `file` is captured so the mapping outlives the producer.
    auto producer = [file, data, from, to, ne0, rows, n_threads]() -> Result<std::vector<uint8_t>> {
      std::vector<float> f32;
      const float* src = reinterpret_cast<const float*>(data);
      if (from != DType::F32) {
        f32.resize(static_cast<size_t>(ne0 * rows));
        quant::dequantize_row(from, data, f32.data(), ne0 * rows);
        src = f32.data();
      }
      std::vector<uint8_t> out(*row_bytes(to, ne0) * static_cast<size_t>(rows));
      quant::quantize_rows(to, src, out.data(), rows, ne0, n_threads);
      return out;
    };
    MINFER_RETURN_IF_ERROR(writer.add_tensor(t.name, to, ne, gguf::Writer::Producer(producer)));
  }

  gguf::Writer::Progress progress;
  if (options.on_progress) {
    progress = [&options, &done_bytes](size_t done, size_t n) {
      options.on_progress(done, n, done_bytes[done - 1]);
    };
  }
  MINFER_RETURN_IF_ERROR(writer.write(options.output, progress));
  return report;
}

}  // namespace minfer::tools
