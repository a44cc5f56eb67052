#include <filesystem>

#include <gtest/gtest.h>

#include "common/fixtures.h"
#include "gguf/reader.h"
#include "gguf/split.h"
#include "sample.h"

namespace minfer::gguf {
namespace {

TEST(SplitPath, ParsesAndFormatsLlamaCppNames) {
  auto s = parse_split_path("/m/qwen-00002-of-00003.gguf");
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->stem, "/m/qwen");
  EXPECT_EQ(s->index, 2);
  EXPECT_EQ(s->count, 3);
  EXPECT_EQ(split_path("/m/qwen", 1, 3), "/m/qwen-00001-of-00003.gguf");
  EXPECT_FALSE(parse_split_path("/m/qwen.gguf").has_value());
  EXPECT_FALSE(parse_split_path("/m/qwen-0002-of-00003.gguf").has_value());
  EXPECT_FALSE(parse_split_path("/m/qwen-00004-of-00003.gguf").has_value());
  EXPECT_FALSE(parse_split_path("-00001-of-00002.gguf").has_value());
}

// Writes `n` parts; part i holds tensor "t<i>" and the split keys (optionally lying in one part).
std::string write_parts(const std::string& dir, int n, int lie_part = -1) {
  const std::string stem = dir + "/model";
  for (int i = 0; i < n; ++i) {
    Writer w;
    w.metadata().set("general.architecture", Value::string("qwen2"));
    w.metadata().set(kSplitNoKey, Value::u16(static_cast<uint16_t>(i == lie_part ? i + 1 : i)));
    w.metadata().set(kSplitCountKey, Value::u16(static_cast<uint16_t>(n)));
    w.metadata().set(kSplitTensorsCountKey, Value::i32(n));
    EXPECT_TRUE(w.add_tensor(fmt::format("t{}", i), DType::F32, {2}, test::pattern_bytes(8, static_cast<uint8_t>(i))).ok());
    EXPECT_TRUE(w.write(split_path(stem, i + 1, n)).ok());
  }
  return stem;
}

TEST(SplitOpen, AnyPartOpensTheMergedModel) {
  const std::string stem = write_parts(minfer::test::temp_dir(), 3);
  for (int k = 1; k <= 3; ++k) {
    auto file = File::open(split_path(stem, k, 3));
    ASSERT_TRUE(file.ok()) << file.status().message();
    EXPECT_EQ(file->n_parts(), 3u);
    ASSERT_EQ(file->tensors().size(), 3u);
    const TensorInfo* t2 = file->find_tensor("t2");
    ASSERT_NE(t2, nullptr);
    EXPECT_EQ(t2->part, 2u);
    EXPECT_EQ(std::vector<uint8_t>(t2->data, t2->data + 8), test::pattern_bytes(8, 2));
  }
}

TEST(SplitOpen, MissingOrInconsistentPartsAreNamed) {
  const std::string dir = minfer::test::temp_dir();
  const std::string stem = write_parts(dir, 3);
  std::filesystem::remove(split_path(stem, 2, 3));
  auto missing = File::open(split_path(stem, 1, 3));
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("split part 2 of 3 is missing"), std::string::npos)
      << missing.status().message();
  EXPECT_NE(missing.status().message().find("model-00002-of-00003.gguf"), std::string::npos);

  const std::string dir2 = dir + "/lie";
  std::filesystem::create_directories(dir2);
  const std::string stem2 = write_parts(dir2, 2, 1);
  auto lying = File::open(split_path(stem2, 1, 2));
  ASSERT_FALSE(lying.ok());
  EXPECT_NE(lying.status().message().find("inconsistent split part: split.no=2"), std::string::npos)
      << lying.status().message();
}

}  // namespace
}  // namespace minfer::gguf
