// Parity tier: every GGUF in ../shared/fixtures loads, `info --json` agrees with models/manifest.json
// (written from llama.cpp's own reading of the files), and parse + write reproduces each file byte for byte.
#include <filesystem>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/fixtures.h"
#include "gguf/reader.h"
#include "gguf/writer.h"
#include "tools/model_info.h"

namespace minfer::gguf {
namespace {

std::vector<std::string> fixture_ggufs() {
  std::vector<std::string> out;
  for (const char* sub : {"models", "tokenizer"}) {
    for (const auto& e : std::filesystem::directory_iterator(minfer::test::fixture_path(sub))) {
      if (e.path().extension() == ".gguf") out.push_back(e.path().string());
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

TEST(GgufFixtures, InfoJsonAgreesWithTheManifest) {
  MINFER_REQUIRE_FIXTURES();
  const auto manifest = nlohmann::json::parse(minfer::test::read_file(minfer::test::fixture_path("models/manifest.json")));
  size_t checked = 0;
  for (const auto& [file_name, entry] : manifest.items()) {
    auto file = File::open(minfer::test::fixture_path("models/" + file_name));
    ASSERT_TRUE(file.ok()) << file.status().message();
    const auto info = tools::info_json(*file);
    EXPECT_EQ(file->part_size(0), entry["size"].get<uint64_t>()) << file_name;
    EXPECT_EQ(*file->metadata().get_u32("general.file_type"), entry["general.file_type"].get<uint32_t>()) << file_name;
    const auto& want = entry["tensors"];
    const auto& got = info["tensors"];
    ASSERT_EQ(got.size(), want.size()) << file_name;
    ASSERT_EQ(entry["n_tensors"].get<size_t>(), want.size());
    for (size_t i = 0; i < want.size(); ++i) {
      EXPECT_EQ(got[i]["name"], want[i]["name"]) << file_name << " #" << i;
      EXPECT_EQ(got[i]["type"], want[i]["type"]) << file_name << " " << want[i]["name"];
      EXPECT_EQ(got[i]["ne"], want[i]["ne"]) << file_name << " " << want[i]["name"];
      EXPECT_EQ(got[i]["offset"], want[i]["offset"]) << file_name << " " << want[i]["name"];
      EXPECT_EQ(got[i]["n_bytes"], want[i]["n_bytes"]) << file_name << " " << want[i]["name"];
    }
    ++checked;
  }
  EXPECT_EQ(checked, 22u);
}

TEST(GgufFixtures, EveryFileRoundTripsByteForByte) {
  MINFER_REQUIRE_FIXTURES();
  const auto paths = fixture_ggufs();
  ASSERT_EQ(paths.size(), 24u);  // 22 models + 2 vocabularies
  for (const std::string& path : paths) {
    auto file = File::open(path);
    ASSERT_TRUE(file.ok()) << file.status().message();
    Writer w;
    w.metadata() = file->metadata();
    for (const TensorInfo& t : file->tensors()) {
      std::vector<int64_t> ne(t.ne.begin(), t.ne.begin() + t.n_dims);
      ASSERT_TRUE(w.add_tensor(t.name, t.type, ne, std::span<const uint8_t>(t.data, t.n_bytes)).ok());
    }
    auto bytes = w.to_bytes();
    ASSERT_TRUE(bytes.ok());
    auto original = MappedFile::open(path);
    ASSERT_TRUE(original.ok());
    ASSERT_EQ(bytes->size(), original->size()) << path;
    EXPECT_TRUE(std::equal(bytes->begin(), bytes->end(), original->data())) << path;
  }
}

TEST(GgufFixtures, VocabFilesExposeTheirTokenizerKeys) {
  MINFER_REQUIRE_FIXTURES();
  auto file = File::open(minfer::test::fixture_path("tokenizer/qwen3-vocab.gguf"));
  ASSERT_TRUE(file.ok()) << file.status().message();
  EXPECT_EQ(file->tensors().size(), 0u);
  EXPECT_EQ(file->metadata().get_string_array("tokenizer.ggml.tokens")->size(), 151936u);
  EXPECT_EQ(file->metadata().get_string_array("tokenizer.ggml.merges")->size(), 151387u);
  EXPECT_EQ(*file->metadata().get_string("tokenizer.ggml.pre"), "qwen2");
  EXPECT_EQ(*file->metadata().get_u32("tokenizer.ggml.eos_token_id"), 151645u);
}

}  // namespace
}  // namespace minfer::gguf
