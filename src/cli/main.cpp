// `minfer <subcommand> ...`: the one executable. Subcommands are listed once, in kCommands.
#include <cstdio>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "cli/cli_app.h"
#include "cli/commands.h"

namespace {

struct Command {
  std::string_view name;
  std::string_view summary;
  int (*run)(const minfer::cli::Args&);
};

constexpr Command kCommands[] = {
    {"run", "generate text: minfer [run] MODEL [prompt] [options] (also -m MODEL -p PROMPT)",
     minfer::cli::run_command},
    {"bench", "measure prompt (pp) and generation (tg) speed, llama-bench style", minfer::cli::bench_command},
    {"info", "print a GGUF file's metadata, tensors, totals and hyperparameters", minfer::cli::info_command},
    {"make-model", "write a random-weight Qwen2/Qwen3/llama GGUF (tiny or real shapes) for demos and benchmarks",
     minfer::cli::make_model_command},
    {"quantize", "re-encode a GGUF model's weights (q4_0 ... q6_K, q4_K_M, q5_K_M, f16, bf16) like llama-quantize",
     minfer::cli::quantize_command},
    {"tokenize", "print the token ids and pieces of a text (stdin with -)", minfer::cli::tokenize_command},
    {"template", "render a chat template with messages and print the exact prompt", minfer::cli::template_command},
    {"grammar", "print the GBNF for a JSON Schema, or check a GBNF grammar", minfer::cli::grammar_command},
    {"serve", "OpenAI-compatible HTTP server with continuous batching (minfer serve <model.gguf>)",
     minfer::cli::serve_command},
    {"perplexity", "perplexity and KL divergence on a text, llama-perplexity style (-f TEXT, --kl-divergence)",
     minfer::cli::perplexity_command},
    {"specverify", "measure the speculative verify-step cost C(nt) and its amortization",
     minfer::cli::specverify_command},
    {"convert", "convert a Hugging Face Qwen2/Qwen3 checkpoint to GGUF (--outtype f32|f16|bf16|q8_0|...)",
     minfer::cli::convert_command},
    {"split", "split a GGUF model into llama-gguf-split parts (--max-size 200M | --max-tensors N)",
     minfer::cli::split_command},
    {"merge", "merge the parts of a split GGUF model into one file", minfer::cli::merge_command},
    {"download",
     "download a model: hf:OWNER/REPO[:QUANT|:FILE] | ollama:NAME[:TAG]; `download hf OWNER/REPO` lists its "
     "GGUF files",
     minfer::cli::download_command},
    {"list", "list the cached models (name, source, size, type, date)", minfer::cli::list_command},
    {"rm", "remove a cached model", minfer::cli::rm_command},
    {"viz",
     "web page: the compute graph, live inference, tensor statistics, top-5 logits (minfer viz <model>)",
     minfer::cli::viz_command},
    {"dump-diff", "first node whose outputs differ between two MINFER_DUMP_DIR dumps (--tol X)",
     minfer::cli::dump_diff_command},
    {"devices", "list backends and devices (Vulkan GPUs, lavapipe, the CPU) and which are used by default", minfer::cli::devices_command},
};

void print_usage(std::FILE* out) {
  fmt::print(out,
             "minfer: local LLM inference for Qwen-family and llama GGUF models\n\n"
             "usage: minfer MODEL [prompt] [options]     (same as `minfer run`; flags may come first,\n"
             "                                           and -m MODEL / -p PROMPT work too)\n"
             "       minfer <command> [options]\n"
             "       minfer --version                    (also `minfer version`)\n\n");
  for (const Command& c : kCommands) fmt::print(out, "  {:<12} {}\n", c.name, c.summary);
  fmt::print(out,
             "\nMODEL (for every command that opens one, positional or -m/--model) is {}.\n"
             "`minfer <command> --help` (or `minfer help <command>`) describes a command's options.\n",
             minfer::cli::kModelForms);
}

}  // namespace

int main(int argc, char** argv) {
  // Environment variables (booleans, MINFER_CPU_ISA, MINFER_LOG, ...) with a bad value are refused here, by
  // name, before anything reads them.
  if (minfer::Status s = minfer::cli::check_environment(); !s.ok()) {
    fmt::print(stderr, "minfer: {}\n", s.message());
    return 2;
  }
  if (argc < 2) {
    print_usage(stderr);
    return 2;
  }
  const std::string_view name = argv[1];
  if (name == "help" && argc > 2) {  // `minfer help COMMAND` is `minfer COMMAND --help`
    const std::string_view topic = argv[2];
    for (const Command& c : kCommands) {
      if (c.name == topic) return c.run(minfer::cli::Args{"--help"});
    }
    fmt::print(stderr, "minfer: help: '{}' is not a command (minfer --help lists them)\n", topic);
    return 2;
  }
  if (name == "-h" || name == "--help" || name == "help") {
    print_usage(stdout);
    return 0;
  }
  if (name == "--version" || name == "version") {
    fmt::print("minfer {}\n", MINFER_VERSION);
    return 0;
  }
  for (const Command& c : kCommands) {
    if (c.name == name) return c.run(minfer::cli::Args(argv + 2, argv + argc));
  }
  // A flag first (`minfer --cnv MODEL`, `minfer -m MODEL -p PROMPT`) or a model: the default command, run.
  if ((!name.empty() && name[0] == '-') || minfer::cli::looks_like_model(std::string(name)))
    return minfer::cli::run_command(minfer::cli::Args(argv + 1, argv + argc));
  std::string names;
  for (const Command& c : kCommands) names += fmt::format("{}{}", names.empty() ? "" : ", ", c.name);
  fmt::print(stderr,
             "minfer: '{}' is neither a command nor a model\n"
             "commands: {}\n"
             "a model is {}; give it first (minfer MODEL [prompt]) or with -m MODEL\n",
             name, names, minfer::cli::kModelForms);
  return 2;
}
