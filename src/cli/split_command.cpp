// `minfer split IN.gguf OUT_PREFIX --max-size 200M | --max-tensors N` and `minfer merge PART OUT.gguf`:
// llama-gguf-split's split and merge (library code in tools/split), with its flag spellings.
#include <fmt/format.h>

#include "cli/cli_app.h"
#include "tools/split.h"

namespace minfer::cli {

int split_command(const Args& args) {
  CLI::App app(
      "Split a GGUF model into parts as llama-gguf-split does (tensors whole, bytes verbatim). "
      "llama-gguf-split's spellings work too: --split-max-size, --split-max-tensors, --split, and "
      "--merge FIRST_PART OUT.gguf (the same as `minfer merge`).",
      "minfer split");
  tools::SplitOptions options;
  std::string max_size;
  bool split = false, merge = false;
  app.add_option("input", options.input,
                 "GGUF model (a single file; a cached name, hf: or ollama: work too); with --merge, any part")
      ->required();
  app.add_option("output_prefix", options.output_prefix,
                 "parts are OUT_PREFIX-00001-of-0000K.gguf; with --merge, the merged GGUF file")
      ->required();
  auto* size = app.add_option("--max-size,--split-max-size", max_size,
                              "largest tensor data per part: N, NK, NM, NG (powers of 1000)");
  auto* tensors =
      app.add_option("--max-tensors,--split-max-tensors", options.max_tensors, "most tensors per part")
          ->check(CLI::Range(1, 1 << 30));
  size->excludes(tensors);
  auto* split_flag =
      app.add_flag("--split", split, "split (the default operation, as llama-gguf-split's --split)");
  auto* merge_flag =
      app.add_flag("--merge", merge, "merge the parts of INPUT into OUTPUT instead of splitting");
  merge_flag->excludes(split_flag)->excludes(size)->excludes(tensors);
  // llama-gguf-split's other flags: refused by name rather than with CLI11's "not expected".
  static const std::vector<RefusedFlag> kRefused = {
      {{"--dry-run"},
       "llama-gguf-split's dry run is not supported; split writes the parts (each atomically)"},
      {{"--no-tensor-first-split"},
       "llama-gguf-split's metadata-only first part is not supported; here the first part holds tensors too"},
  };
  if (int code = parse_args(app, args, kRefused); code >= 0) return code;
  if (merge) {
    if (Status s = tools::merge_model(options.input, options.output_prefix); !s.ok()) return fail(s);
    fmt::print("wrote {}\n", options.output_prefix);
    return 0;
  }
  auto input = resolve_model_arg(options.input);
  if (!input.ok()) return fail(input.status());
  options.input = *input;
  if (!max_size.empty()) {
    auto bytes = tools::parse_split_size(max_size);
    if (!bytes.ok()) return fail(bytes.status());
    options.max_bytes = *bytes;
  }
  options.on_part = [](int k, int n, const std::string& path) {
    fmt::print("wrote part {}/{}: {}\n", k, n, path);
  };
  auto parts = tools::split_model(options);
  if (!parts.ok()) return fail(parts.status());
  return 0;
}

int merge_command(const Args& args) {
  CLI::App app("Merge the parts of a split GGUF model into one file (the inverse of split).", "minfer merge");
  std::string part, output;
  app.add_option("first_part", part, "any part of the split model (OUT_PREFIX-00001-of-0000K.gguf)")
      ->required();
  app.add_option("output", output, "single GGUF file to write")->required();
  if (int code = parse_args(app, args); code >= 0) return code;
  if (Status s = tools::merge_model(part, output); !s.ok()) return fail(s);
  fmt::print("wrote {}\n", output);
  return 0;
}

}  // namespace minfer::cli
