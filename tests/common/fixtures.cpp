#include "common/fixtures.h"

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

}  // namespace minfer::test
