// `minfer info <model.gguf> [--json] [--no-tensors]`
#include <fmt/format.h>

#include "cli/cli_app.h"
#include "gguf/reader.h"
#include "tools/model_info.h"

namespace minfer::cli {

int info_command(const Args& args) {
  CLI::App app("Print a GGUF file's metadata, tensor table, totals and hyperparameters (header only).", "minfer info");
  std::string path;
  bool json = false;
  bool no_tensors = false;
  tools::InfoOptions options;
  ModelArg model;
  add_model_arg(app, &model);
  app.add_flag("--json", json, "emit JSON for scripts");
  app.add_flag("--no-tensors", no_tensors, "omit the per-tensor table");
  app.add_option("--array-preview", options.array_preview, "elements shown from each end of long arrays")
      ->check(CLI::Range(0, 1000000));
  if (int code = parse_args(app, args); code >= 0) return code;
  options.show_tensors = !no_tensors;
  auto taken = take_model(model);
  if (!taken.ok()) return fail(taken.status());
  auto resolved = resolve_model_arg(*taken);  // a path, split part, cached name, hf: or ollama: URI
  if (!resolved.ok()) return fail(resolved.status());
  path = *resolved;

  auto file = gguf::File::open(path);
  if (!file.ok()) return fail(file.status());
  if (json) {
    fmt::print("{}\n", tools::info_json(*file, options).dump(2));
  } else {
    fmt::print("{}", tools::info_text(*file, options));
  }
  return 0;
}

}  // namespace minfer::cli
