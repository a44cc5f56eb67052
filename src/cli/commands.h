// Subcommands of the `minfer` executable. Each takes the arguments after its name and returns the
// process exit code; main.cpp dispatches to them from one table.
#pragma once

#include <string>
#include <vector>

namespace minfer::cli {

using Args = std::vector<std::string>;

int run_command(const Args& args);
int info_command(const Args& args);
int bench_command(const Args& args);
int make_model_command(const Args& args);
int quantize_command(const Args& args);
int tokenize_command(const Args& args);
int template_command(const Args& args);
int grammar_command(const Args& args);
int specverify_command(const Args& args);
int serve_command(const Args& args);
int split_command(const Args& args);
int merge_command(const Args& args);
int download_command(const Args& args);
int list_command(const Args& args);
int rm_command(const Args& args);
int convert_command(const Args& args);
int dump_diff_command(const Args& args);
int viz_command(const Args& args);
int devices_command(const Args& args);
int perplexity_command(const Args& args);

}  // namespace minfer::cli
