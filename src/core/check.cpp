#include "core/check.h"

namespace minfer::detail {

void check_failed(const char* file, int line, const char* cond, const std::string& message) {
  std::fprintf(stderr, "minfer: check failed at %s:%d: %s%s%s\n", file, line, cond, message.empty() ? "" : ": ",
               message.c_str());
  std::fflush(stderr);
  std::abort();
}

}  // namespace minfer::detail
