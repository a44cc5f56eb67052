// CLI11 glue shared by the subcommands: parse a subcommand's arguments and report errors uniformly.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "core/dtype.h"
#include "core/status.h"

namespace minfer::cli {

// Parses `args` into `app`. Returns -1 to continue, or the exit code to return (0 for --help, 2 for errors).
int parse_args(CLI::App& app, const Args& args);

// Prints "minfer: <message>" to stderr and returns exit code 1.
int fail(const Status& status);

// The KV cache type from --cache-type, else MINFER_CACHE_TYPE, else f16; refuses a name that is not a
// cache type (f32, f16, q8_0), naming it.
Result<DType> kv_cache_type(const std::string& flag);

}  // namespace minfer::cli
