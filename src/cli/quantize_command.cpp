// `minfer quantize <in.gguf> <out.gguf> --type T [--pure] [-t N]`: re-encode a model's weights.
#include <chrono>
#include <cstdio>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include "cli/cli_app.h"
#include "quant/quantize_rules.h"
#include "tools/quantize.h"

namespace minfer::cli {

int quantize_command(const Args& args) {
  CLI::App app("Re-encode a GGUF model's 2-D float weights (llama-quantize's type rules and encoders).",
               "minfer quantize");
  tools::QuantizeOptions options;
  options.n_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  bool quiet = false;
  app.add_option("input", options.input, "source model (f32/f16/bf16 weights): a path, a cached name, hf: or ollama:")->required();
  app.add_option("output", options.output, "GGUF file to write (never the input)")->required();
  app.add_option("--type", options.type, fmt::format("target: {}", fmt::join(quant::file_type_names(), " ")))
      ->required();
  app.add_flag("--pure", options.pure,
               "every 2-D weight in the base type (no output/attn_v/ffn_down upgrades)");
  app.add_option("-t,--threads", options.n_threads, "encoding threads (1 to 1024)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  app.add_flag("-q,--quiet", quiet, "no per-tensor lines");
  if (int code = parse_args(app, args); code >= 0) return code;
  auto input = resolve_model_arg(options.input);
  if (!input.ok()) return fail(input.status());
  options.input = *input;

  if (!quiet) options.on_decision = [](const std::string& line) { fmt::print("{}\n", line); };
  const bool tty = isatty(fileno(stderr)) != 0;
  const auto start = std::chrono::steady_clock::now();
  options.on_progress = [tty, start](size_t done, size_t n, uint64_t bytes) {
    if (!tty && done != n) return;
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    fmt::print(stderr, "\rquantize: {}/{} tensors, {:.1f} MiB written, {:.1f} s{}", done, n,
               static_cast<double>(bytes) / (1024.0 * 1024.0), s, done == n ? "\n" : "");
    std::fflush(stderr);
  };
  auto report = tools::quantize_model(options);
  if (!report.ok()) return fail(report.status());
  fmt::print("wrote {}: {} tensors ({} re-encoded), {:.2f} MiB -> {:.2f} MiB, general.file_type = {}\n",
             options.output, report->n_tensors, report->n_quantized,
             static_cast<double>(report->bytes_in) / (1024.0 * 1024.0),
             static_cast<double>(report->bytes_out) / (1024.0 * 1024.0), report->file_type);
  return 0;
}

}  // namespace minfer::cli
