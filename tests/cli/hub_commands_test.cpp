// The model-name paths of the CLI without a network: a cached model runs by its short name, `list` shows
// it (and never a partial download), `rm` removes it; split and merge round-trip through the commands.
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "cli/commands.h"
#include "common/fixtures.h"
#include "hub/cache.h"
#include "tools/synthetic_model.h"

namespace minfer::cli {
namespace {
namespace fs = std::filesystem;

TEST(HubCommands, CachedModelRunsByShortNameAndListAndRmWork) {
  const std::string cache = test::temp_dir() + "/cache";
  fs::remove_all(cache);
  ::setenv("MINFER_CACHE", cache.c_str(), 1);
  hub::CacheEntry e;
  e.name = "tiny-qwen3-f32";
  e.source = "hf";
  e.uri = "hf:acme/tiny:tiny-qwen3-F32.gguf";
  e.repo = "acme/tiny";
  e.files = {"tiny-qwen3-F32.gguf"};
  e.type = "F32";
  e.date = "2026-12-01 12:00";
  e.dir = hub::model_dir(cache, e.name);
  fs::create_directories(e.dir);
  tools::SyntheticOptions o;
  o.shape = *tools::synthetic_preset("tiny-qwen3");
  ASSERT_TRUE(tools::make_synthetic_model(o)->write(e.path()).ok());
  e.size = fs::file_size(e.path());
  // A partial download next to it: a folder with a .part and no record.
  fs::create_directories(hub::model_dir(cache, "half"));
  std::ofstream(hub::model_dir(cache, "half") + "/half.gguf.part") << "partial";

  testing::internal::CaptureStdout();
  testing::internal::CaptureStderr();
  EXPECT_EQ(run_command({"tiny-qwen3-f32", "hi", "-n", "2", "-t", "1"}), 1) << "not cached yet: no record";
  ASSERT_TRUE(hub::write_entry(e).ok());
  EXPECT_EQ(run_command({"tiny-qwen3-f32", "hi", "-n", "2", "-t", "1", "-o", "json"}), 0);
  EXPECT_EQ(run_command({"hf:acme/tiny:tiny-qwen3-F32.gguf", "hi", "-n", "2", "-t", "1", "-o", "json"}), 0);
  (void)testing::internal::GetCapturedStdout();
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("no cached model of that name"), std::string::npos) << err;

  testing::internal::CaptureStdout();
  EXPECT_EQ(list_command({}), 0);
  const std::string listed = testing::internal::GetCapturedStdout();
  EXPECT_NE(listed.find("tiny-qwen3-f32"), std::string::npos) << listed;
  EXPECT_NE(listed.find("F32"), std::string::npos);
  EXPECT_EQ(listed.find("half"), std::string::npos) << "a partial download is never listed";

  testing::internal::CaptureStdout();
  EXPECT_EQ(rm_command({"tiny-qwen3-f32"}), 0);
  (void)testing::internal::GetCapturedStdout();
  EXPECT_FALSE(fs::exists(e.dir));
  testing::internal::CaptureStderr();
  EXPECT_EQ(rm_command({"tiny-qwen3-f32"}), 1);
  (void)testing::internal::GetCapturedStderr();
  ::unsetenv("MINFER_CACHE");
}

TEST(HubCommands, SplitAndMergeRoundTrip) {
  const std::string dir = test::temp_dir();
  tools::SyntheticOptions o;
  o.shape = *tools::synthetic_preset("tiny-qwen2");
  const std::string in = dir + "/m.gguf";
  ASSERT_TRUE(tools::make_synthetic_model(o)->write(in).ok());
  testing::internal::CaptureStdout();
  ASSERT_EQ(split_command({in, dir + "/part", "--max-size", "30K"}), 0);
  const std::string out = testing::internal::GetCapturedStdout();
  EXPECT_NE(out.find("wrote part 1/"), std::string::npos) << out;
  std::string first;
  for (const auto& f : fs::directory_iterator(dir)) {
    if (f.path().filename().string().rfind("part-00001-of-", 0) == 0) first = f.path().string();
  }
  ASSERT_FALSE(first.empty());
  testing::internal::CaptureStdout();
  ASSERT_EQ(merge_command({first, dir + "/merged.gguf"}), 0);
  (void)testing::internal::GetCapturedStdout();
  EXPECT_EQ(test::read_file(dir + "/merged.gguf"), test::read_file(in));
  testing::internal::CaptureStderr();
  EXPECT_EQ(split_command({in, dir + "/x", "--max-size", "12T"}), 1);
  EXPECT_NE(split_command({in, dir + "/x", "--max-size", "1M", "--max-tensors", "3"}), 0);
  (void)testing::internal::GetCapturedStderr();
}

}  // namespace
}  // namespace minfer::cli
