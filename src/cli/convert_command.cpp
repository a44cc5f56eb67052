// `minfer convert HF_DIR OUT.gguf [--outtype f32|f16|bf16|q8_0|q4_0|...]`: a Hugging Face checkpoint
// (Qwen2/Qwen3/Qwen3-MoE, Llama/Mistral, Gemma 3 text) to GGUF (library code in tools/convert).
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <cstdio>
#include <thread>

#include <fmt/format.h>

#include "cli/cli_app.h"
#include "tools/convert.h"
#include "tools/convert_plan.h"

namespace minfer::cli {

int convert_command(const Args& args) {
  CLI::App app(fmt::format("Convert a Hugging Face checkpoint ({}) to GGUF as llama.cpp's convert_hf_to_gguf.py "
                           "does.",
                           tools::supported_hf_architectures()),
               "minfer convert");
  tools::ConvertOptions options;
  options.n_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  app.add_option("hf_dir", options.input_dir,
                 "folder with config.json, model.safetensors (or an index + shards), tokenizer.json, tokenizer_config.json")
      ->required();
  app.add_option("output", options.output, "GGUF file to write (atomically)")->required();
  CLI::Option* outtype =
      app.add_option("--outtype", options.outtype,
                     "f32 | f16 | bf16 | any `minfer quantize` type (q8_0, q4_0, q4_K_M, ...)")
          ->capture_default_str();
  app.add_option("--name", options.name, "general.name (default: the folder's name)");
  CLI::Option* threads =
      app.add_option("-t,--threads", options.n_threads, "threads for quantized outtypes (1 to 1024)")
          ->capture_default_str()
          ->check(CLI::Range(1, 1024));
  bool vocab_only = false;
  app.add_flag(
         "--vocab-only", vocab_only,
         "write only the vocabulary (tokenizer.json, tokenizer_config.json, config.json; no weights needed)")
      ->excludes(outtype)
      ->excludes(threads);  // both are about weights: refused rather than ignored
  if (int code = parse_args(app, args); code >= 0) return code;
  if (vocab_only) {
    auto report = tools::convert_vocab_only(options);
    if (!report.ok()) return fail(report.status());
    fmt::print("wrote {}: {} vocabulary only ({} tokens, {:.1f} MB)\n", options.output, report->arch, report->n_vocab,
               static_cast<double>(report->bytes_out) / 1e6);
    return 0;
  }

  const bool tty = isatty(fileno(stderr)) != 0;
  const auto start = std::chrono::steady_clock::now();
  auto last = start;
  options.on_progress = [&](size_t done, size_t n, uint64_t) {
    const auto now = std::chrono::steady_clock::now();
    if (done != n && std::chrono::duration<double>(now - last).count() < (tty ? 0.1 : 2.0)) return;
    last = now;
    const double s = std::max(1e-3, std::chrono::duration<double>(now - start).count());
    std::error_code ec;
    const double mb = static_cast<double>(std::filesystem::exists(options.output + ".tmp", ec)
                                              ? std::filesystem::file_size(options.output + ".tmp", ec)
                                              : 0) /
                      1e6;
    fmt::print(stderr, "{}convert: {}/{} tensors written, {:.1f} MB, {:.1f} MB/s{}", tty ? "\r" : "", done, n, mb,
               mb / s, tty && done != n ? "" : "\n");
    std::fflush(stderr);
  };
  auto report = tools::convert_hf(options);
  if (!report.ok()) return fail(report.status());
  fmt::print("wrote {}: {} ({} tensors, {} tokens, {:.1f} MB)\n", options.output, report->arch, report->n_tensors,
             report->n_vocab, static_cast<double>(report->bytes_out) / 1e6);
  return 0;
}

}  // namespace minfer::cli
