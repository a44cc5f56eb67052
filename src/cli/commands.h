// Subcommands of the `minfer` executable. Each takes the arguments after its name and returns the
// process exit code; main.cpp dispatches to them from one table.
#pragma once

#include <string>
#include <vector>

namespace minfer::cli {

using Args = std::vector<std::string>;

int info_command(const Args& args);
int make_model_command(const Args& args);

}  // namespace minfer::cli
