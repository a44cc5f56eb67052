#include "cli/cli_app.h"

#include <algorithm>

#include <fmt/format.h>

namespace minfer::cli {

int parse_args(CLI::App& app, const Args& args) {
  std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 consumes from the back
  try {
    app.parse(reversed);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : 2;
  }
  return -1;
}

int fail(const Status& status) {
  fmt::print(stderr, "minfer: {}\n", status.message());
  return 1;
}

}  // namespace minfer::cli
