#include "cli/cli_app.h"

#include <algorithm>
#include <cstdlib>

#include <fmt/format.h>

#include "kv/kv_cache.h"

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

Result<DType> kv_cache_type(const std::string& flag) {
  std::string name = flag;
  if (name.empty()) {
    const char* env = std::getenv("MINFER_CACHE_TYPE");
    name = env != nullptr ? env : "f16";
  }
  auto type = dtype_from_name(name);
  if (!type) return invalid_argument("unknown --cache-type '{}' (use f32, f16 or q8_0)", name);
  MINFER_RETURN_IF_ERROR(kv::check_cache_type(*type));
  return *type;
}

}  // namespace minfer::cli
