// CLI11 glue shared by the subcommands: parse a subcommand's arguments and report errors uniformly.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "core/status.h"

namespace minfer::cli {

// Parses `args` into `app`. Returns -1 to continue, or the exit code to return (0 for --help, 2 for errors).
int parse_args(CLI::App& app, const Args& args);

// Prints "minfer: <message>" to stderr and returns exit code 1.
int fail(const Status& status);

}  // namespace minfer::cli
