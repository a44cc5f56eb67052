// `minfer dump-diff DIR_A DIR_B [--tol X]`: the first node (in evaluation order) whose outputs differ by
// more than the tolerance between two MINFER_DUMP_DIR dumps. Exit 0: none; 1: found; 2: error.
#include <fmt/format.h>

#include "cli/cli_app.h"
#include "cli/commands.h"
#include "inspect/dump_diff.h"

namespace minfer::cli {

int dump_diff_command(const Args& argv) {
  std::string dir_a, dir_b;
  double tol = 1e-4;
  CLI::App app{"compare two MINFER_DUMP_DIR dumps; print the first node whose max |delta| exceeds --tol",
               "minfer dump-diff"};
  app.add_option("dir_a", dir_a, "first dump (MINFER_DUMP_DIR of one run, or one of its step-NNNN folders)")
      ->required();
  app.add_option("dir_b", dir_b, "second dump, of the same kind")->required();
  app.add_option("--tol", tol, "largest absolute difference still counted as equal")->capture_default_str();
  if (int code = parse_args(app, argv); code >= 0) return code;
  auto report = inspect::diff_dumps(dir_a, dir_b, tol);
  if (!report.ok()) {
    fmt::print(stderr, "minfer: {}\n", report.status().message());
    return 2;
  }
  fmt::print("{}", inspect::format_diff(*report, tol));
  return report->first ? 1 : 0;
}

}  // namespace minfer::cli
