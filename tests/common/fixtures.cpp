#include "common/fixtures.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>
#include <unistd.h>

namespace minfer::test {

std::string fixtures_dir() {
  const char* env = std::getenv("MINFER_FIXTURES_DIR");
  std::filesystem::path p = env != nullptr ? env : MINFER_DEFAULT_FIXTURES_DIR;
  std::error_code ec;
  if (!std::filesystem::is_directory(p, ec)) return "";
  // An empty folder holds no fixtures: the same as none (skip, or fail under MINFER_FIXTURES_REQUIRED=1).
  if (std::filesystem::directory_iterator(p, ec) == std::filesystem::directory_iterator()) return "";
  return std::filesystem::canonical(p, ec).string();
}

bool fixtures_required() {
  const char* env = std::getenv("MINFER_FIXTURES_REQUIRED");
  return env != nullptr && std::string(env) == "1";
}

std::string fixture_path(const std::string& relative) { return fixtures_dir() + "/" + relative; }

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << "cannot read " << path;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string temp_dir() {
  const testing::TestInfo* info = testing::UnitTest::GetInstance()->current_test_info();
  std::filesystem::path p = std::filesystem::temp_directory_path() /
                            ("minfer-test-" + std::to_string(::getpid()) + "-" +
                             (info ? std::string(info->test_suite_name()) + "." + info->name() : "x"));
  std::filesystem::create_directories(p);
  return p.string();
}

std::vector<std::string> fixture_entries(const std::string& relative, const std::string& suffix, bool dirs) {
  std::vector<std::string> out;
  const std::string root = fixtures_dir();
  if (root.empty()) return out;
  std::error_code ec;
  std::filesystem::directory_iterator it(root + "/" + relative, ec);
  if (ec) return out;
  for (const auto& e : it) {
    const std::string name = e.path().filename().string();
    if (name.size() < suffix.size() || name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0) continue;
    if (e.is_directory(ec) != dirs) continue;
    out.push_back(name);
  }
  std::sort(out.begin(), out.end());
  return out;
}

void record_parity_case(const std::string& kind, const std::string& name) {
  const char* log = std::getenv("MINFER_PARITY_LOG");
  if (log == nullptr || *log == '\0') return;
  // One write per line on an O_APPEND stream: ctest runs the parity binaries in parallel.
  const std::string line = kind + " " + name + "\n";
  std::FILE* f = std::fopen(log, "a");
  ASSERT_NE(f, nullptr) << "cannot append to MINFER_PARITY_LOG=" << log;
  std::fwrite(line.data(), 1, line.size(), f);
  std::fclose(f);
}

void no_parity_cases(const std::string& kind) {
  const std::string where = fixtures_dir().empty() ? std::string("no fixtures directory (set MINFER_FIXTURES_DIR)")
                                                   : "fixtures at " + fixtures_dir() + " hold no " + kind + " case";
  if (fixtures_required()) FAIL() << "MINFER_FIXTURES_REQUIRED=1: " << where;
  GTEST_SKIP() << where;
}

}  // namespace minfer::test
