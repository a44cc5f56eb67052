// Locating the shared reference fixtures (../shared/fixtures, or $MINFER_FIXTURES_DIR) from tests.
#pragma once

#include <string>
#include <vector>

namespace minfer::test {

// Absolute path of the fixtures directory ($MINFER_FIXTURES_DIR when set, else the configured default),
// or "" when it does not exist or is empty.
std::string fixtures_dir();
bool fixtures_required();
// fixtures_dir() + "/" + relative; skips the current test (GTEST_SKIP is the caller's) when absent.
std::string fixture_path(const std::string& relative);
// Reads a whole file; fails the current test on error.
std::string read_file(const std::string& path);
// A fresh temporary directory for the calling test (removed at process exit is not guaranteed).
std::string temp_dir();

// Sorted names of the entries of fixtures_dir()/relative whose name ends with `suffix` (directories only
// when `dirs`); empty when the fixtures or the folder are absent. Never throws: the parity suites call it
// while gtest lists their cases, which happens when ctest runs (DISCOVERY_MODE PRE_TEST), not at build.
std::vector<std::string> fixture_entries(const std::string& relative, const std::string& suffix, bool dirs = false);

// Appends "<kind> <name>" to $MINFER_PARITY_LOG (when set) once a parity case has run to its end.
// scripts/test.sh counts these lines per kind and compares them with what the fixtures hold, so a case
// list that silently shrank (stale, filtered, placeholder) is visible and, when required, a failure.
void record_parity_case(const std::string& kind, const std::string& name);

// Body of the one test a parity suite instantiates when it found no case: it never passes. It fails when
// MINFER_FIXTURES_REQUIRED=1 and is skipped (ctest: "Not Run", not "Passed") otherwise.
void no_parity_cases(const std::string& kind);

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
