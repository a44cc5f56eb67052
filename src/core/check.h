// MINFER_CHECK: invariants and programmer errors. Aborts with file:line in every build type.
// Input errors (files, users, network) never use this: they return a Status.
#pragma once

#include <cstdio>
#include <cstdlib>

#include <fmt/format.h>

namespace minfer::detail {
[[noreturn]] void check_failed(const char* file, int line, const char* cond, const std::string& message);
}  // namespace minfer::detail

#define MINFER_CHECK(cond, ...)                                                                   \
  do {                                                                                            \
    if (!(cond)) [[unlikely]]                                                                     \
      ::minfer::detail::check_failed(__FILE__, __LINE__, #cond, ::fmt::format("" __VA_ARGS__)); \
  } while (0)

#ifdef NDEBUG
#define MINFER_DCHECK(cond, ...) \
  do {                           \
  } while (0)
#else
#define MINFER_DCHECK(cond, ...) MINFER_CHECK(cond, __VA_ARGS__)
#endif
