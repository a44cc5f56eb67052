// `minfer make-model <out.gguf> [--preset P] [--type f32|f16|bf16|q8_0|q4_0|q4_K_M|...] [--seed N] [--vocab FILE]`
#include <fmt/format.h>

#include <algorithm>
#include <thread>

#include "cli/cli_app.h"
#include "quant/quantize_rules.h"
#include "tools/synthetic_model.h"

namespace minfer::cli {

int make_model_command(const Args& args) {
  CLI::App app("Write a random-weight Qwen2/Qwen3/llama GGUF model (labelled as random; its output is noise).",
               "minfer make-model");
  std::string out_path;
  std::string preset = "tiny-qwen2";
  std::string type_name = "f32";
  std::string vocab_path;
  uint64_t seed = 42;
  app.add_option("output", out_path, "GGUF file to write")->required();
  app.add_option("--preset", preset,
                 fmt::format("shape: {}", fmt::join(tools::synthetic_preset_names(), ", ")))
      ->capture_default_str();
  app.add_option("--type", type_name, "weight type: f32, f16, bf16 or a `minfer quantize` type (q8_0, q4_K_M, ...)")
      ->capture_default_str();
  app.add_option("--seed", seed, "random seed (an integer >= 0)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);  // CLI11 would read -1 as 2^64-1
  app.add_option("--vocab", vocab_path, "copy the tokenizer from this GGUF (e.g. a vocab-only file)");
  if (int code = parse_args(app, args); code >= 0) return code;

  tools::SyntheticOptions options;
  auto shape = tools::synthetic_preset(preset);
  if (!shape.ok()) return fail(shape.status());
  options.shape = *shape;
  auto type = dtype_from_name(type_name);
  if (type && (*type == DType::F32 || *type == DType::F16 || *type == DType::BF16)) {
    options.weight_type = *type;
  } else if (quant::file_type_from_name(type_name)) {
    options.quant_type = type_name;
  } else {
    return fail(invalid_argument("unknown --type '{}'", type_name));
  }
  options.seed = seed;
  std::optional<gguf::File> vocab;
  if (!vocab_path.empty()) {
    auto opened = gguf::File::open(vocab_path);
    if (!opened.ok()) return fail(opened.status());
    vocab = std::move(*opened);
    options.vocab_source = &*vocab;
  }
  auto writer = tools::make_synthetic_model(options);
  if (!writer.ok()) return fail(writer.status());
  // Each tensor draws from its own seed, so tensors are generated in parallel with the same bytes (a
  // 7B-shaped model is mostly its normal draws: minutes on one core).
  const int producers = static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, 16u));
  if (Status st = writer->write(out_path, {}, producers); !st.ok()) return fail(st);
  fmt::print("wrote {} ({} preset, {} weights, RANDOM WEIGHTS)\n", out_path, preset, type_name);
  return 0;
}

}  // namespace minfer::cli
