// Locating the shared reference fixtures (../shared/fixtures, or $MINFER_FIXTURES_DIR) from tests.
#pragma once

#include <string>
#include <vector>

namespace minfer::test {

// Absolute path of the fixtures directory, or "" when it does not exist.
std::string fixtures_dir();
bool fixtures_required();
// fixtures_dir() + "/" + relative; skips the current test (GTEST_SKIP is the caller's) when absent.
std::string fixture_path(const std::string& relative);
// Reads a whole file; fails the current test on error.
std::string read_file(const std::string& path);
// A fresh temporary directory for the calling test (removed at process exit is not guaranteed).
std::string temp_dir();

}  // namespace minfer::test

// Skips a test when the fixtures are absent, or fails it when MINFER_FIXTURES_REQUIRED=1 (CI sets it,
// so a missing fixtures directory can never turn the parity tier into silent skips).
#define MINFER_REQUIRE_FIXTURES()                                                          \
  do {                                                                                     \
    if (::minfer::test::fixtures_dir().empty()) {                                          \
      if (::minfer::test::fixtures_required()) FAIL() << "fixtures required but not found"; \
      GTEST_SKIP() << "no fixtures (set MINFER_FIXTURES_DIR)";                             \
    }                                                                                      \
  } while (0)
