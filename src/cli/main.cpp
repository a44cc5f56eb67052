// `minfer <subcommand> ...`: the one executable. Subcommands are listed once, in kCommands.
#include <cstdio>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "cli/commands.h"

namespace {

struct Command {
  std::string_view name;
  std::string_view summary;
  int (*run)(const minfer::cli::Args&);
};

constexpr Command kCommands[] = {
    {"info", "print a GGUF file's metadata, tensors, totals and hyperparameters", minfer::cli::info_command},
    {"make-model", "write a random-weight Qwen2/Qwen3 GGUF (tiny or real shapes) for demos and benchmarks",
     minfer::cli::make_model_command},
};

void print_usage(std::FILE* out) {
  fmt::print(out, "minfer: local LLM inference for Qwen-family GGUF models\n\nusage: minfer <command> [options]\n\n");
  for (const Command& c : kCommands) fmt::print(out, "  {:<12} {}\n", c.name, c.summary);
  fmt::print(out, "\n`minfer <command> --help` describes a command's options.\n");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    print_usage(stderr);
    return 2;
  }
  const std::string_view name = argv[1];
  if (name == "-h" || name == "--help" || name == "help") {
    print_usage(stdout);
    return 0;
  }
  for (const Command& c : kCommands) {
    if (c.name == name) return c.run(minfer::cli::Args(argv + 2, argv + argc));
  }
  fmt::print(stderr, "minfer: unknown command '{}'\n\n", name);
  print_usage(stderr);
  return 2;
}
