// split / merge: llama-gguf-split's part names, keys and key types; merge is byte-identical to the
// original; a split model loads and gives the same logits as the single file.
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "common/fixtures.h"
#include "engine/engine.h"
#include "gguf/reader.h"
#include "gguf/split.h"
#include "tools/split.h"
#include "tools/synthetic_model.h"

namespace minfer::tools {
namespace {
namespace fs = std::filesystem;

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::string tiny_model(const std::string& dir, const std::string& quant = "") {
  SyntheticOptions o;
  o.shape = *synthetic_preset("tiny-qwen3");
  o.weight_type = DType::F16;
  o.quant_type = quant;
  auto w = make_synthetic_model(o);
  EXPECT_TRUE(w.ok()) << w.status().message();
  const std::string path = dir + "/tiny" + quant + ".gguf";
  EXPECT_TRUE(w->write(path).ok());
  return path;
}

std::vector<float> logits_of(const std::string& path) {
  engine::EngineOptions o;
  o.n_ctx = 64;
  o.n_threads = 1;
  auto e = engine::Engine::load(path, o);
  EXPECT_TRUE(e.ok()) << e.status().message();
  if (!e.ok()) return {};
  engine::Batch b;
  const int32_t ids[] = {1, 17, 42, 5, 99, 3};
  for (int i = 0; i < 6; ++i) b.add(ids[i], i, 0, true);
  auto r = (*e)->decode(b);
  EXPECT_TRUE(r.ok()) << r.status().message();
  return r.ok() ? *r : std::vector<float>();
}

TEST(SplitSize, PowersOf1000AsLlamaGgufSplit) {
  EXPECT_EQ(*parse_split_size("200M"), 200'000'000u);
  EXPECT_EQ(*parse_split_size("3k"), 3000u);
  EXPECT_EQ(*parse_split_size("2G"), 2'000'000'000u);
  EXPECT_EQ(*parse_split_size("12345"), 12345u);
  for (const char* bad : {"", "M", "1.5G", "10T", "5MB", "-1", "0"})
    EXPECT_FALSE(parse_split_size(bad).ok()) << bad;
}

TEST(Split, ByTensorCountWritesTypedKeysAndMergesByteIdentical) {
  const std::string dir = test::temp_dir();
  const std::string in = tiny_model(dir);
  auto original = gguf::File::open(in);
  ASSERT_TRUE(original.ok());
  const size_t n_tensors = original->tensors().size();
  SplitOptions o;
  o.input = in;
  o.output_prefix = dir + "/parts/tiny";
  fs::create_directories(dir + "/parts");
  o.max_tensors = 5;
  auto parts = split_model(o);
  ASSERT_TRUE(parts.ok()) << parts.status().message();
  const size_t expect_parts = (n_tensors + 4) / 5;
  ASSERT_EQ(parts->size(), expect_parts);
  EXPECT_EQ((*parts)[0], gguf::split_path(o.output_prefix, 1, static_cast<int>(expect_parts)));
  size_t seen = 0;
  for (size_t k = 0; k < parts->size(); ++k) {
    auto bytes = slurp((*parts)[k]);
    auto p = gguf::parse({reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()}, (*parts)[k]);
    ASSERT_TRUE(p.ok()) << p.status().message();
    const auto* no = p->metadata.find(gguf::kSplitNoKey);
    const auto* count = p->metadata.find(gguf::kSplitCountKey);
    const auto* total = p->metadata.find(gguf::kSplitTensorsCountKey);
    ASSERT_TRUE(no && count && total);
    EXPECT_EQ(no->type(), gguf::ValueType::U16);
    EXPECT_EQ(count->type(), gguf::ValueType::U16);
    EXPECT_EQ(total->type(), gguf::ValueType::I32);
    EXPECT_EQ(no->as_u64(), k);
    EXPECT_EQ(count->as_u64(), expect_parts);
    EXPECT_EQ(total->as_i64(), static_cast<int64_t>(n_tensors));
    EXPECT_LE(p->tensors.size(), 5u);
    // The first part carries all metadata, the others only the split keys.
    EXPECT_EQ(p->metadata.contains("general.architecture"), k == 0);
    for (const auto& t : p->tensors) {
      const auto* src = original->find_tensor(t.name);
      ASSERT_NE(src, nullptr);
      EXPECT_EQ(t.n_bytes, src->n_bytes);
      EXPECT_EQ(0, std::memcmp(bytes.data() + t.file_offset, src->data, t.n_bytes)) << t.name;
    }
    seen += p->tensors.size();
  }
  EXPECT_EQ(seen, n_tensors);

  const std::string merged = dir + "/merged.gguf";
  ASSERT_TRUE(merge_model((*parts)[1], merged).ok());  // any part names the set
  EXPECT_EQ(slurp(merged), slurp(in)) << "merge must reproduce the original byte for byte";
  EXPECT_FALSE(merge_model((*parts)[0], (*parts)[0]).ok());
}

TEST(Split, BySizeNeverSplitsATensorAndGivesIdenticalLogits) {
  const std::string dir = test::temp_dir();
  const std::string in = tiny_model(dir, "q8_0");
  auto original = gguf::File::open(in);
  ASSERT_TRUE(original.ok());
  uint64_t largest = 0;
  for (const auto& t : original->tensors()) largest = std::max(largest, t.n_bytes);
  SplitOptions o;
  o.input = in;
  o.output_prefix = dir + "/q8";
  o.max_bytes = 15'000;  // smaller than the embedding: it gets a part of its own
  ASSERT_LT(o.max_bytes, largest);
  auto parts = split_model(o);
  ASSERT_TRUE(parts.ok()) << parts.status().message();
  EXPECT_GT(parts->size(), 2u);
  for (const auto& part : *parts) {
    auto bytes = slurp(part);
    auto p = gguf::parse({reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()}, part);
    ASSERT_TRUE(p.ok());
    uint64_t data = 0;
    for (const auto& t : p->tensors) data += (t.n_bytes + 31) / 32 * 32;
    EXPECT_TRUE(p->tensors.size() == 1 || data <= o.max_bytes) << part;
  }
  auto split = gguf::File::open((*parts)[0]);
  ASSERT_TRUE(split.ok()) << split.status().message();
  EXPECT_EQ(split->n_parts(), parts->size());
  const auto a = logits_of(in), b = logits_of((*parts)[0]);
  ASSERT_FALSE(a.empty());
  EXPECT_EQ(a, b) << "same bytes, same arithmetic: bitwise-equal logits";
  const std::string merged = dir + "/merged.gguf";
  ASSERT_TRUE(merge_model((*parts)[0], merged).ok());
  EXPECT_EQ(slurp(merged), slurp(in));
}

TEST(Split, RefusesBadRequests) {
  const std::string dir = test::temp_dir();
  const std::string in = tiny_model(dir);
  SplitOptions o;
  o.input = in;
  o.output_prefix = dir + "/x";
  EXPECT_FALSE(split_model(o).ok());  // no limit
  o.max_tensors = 2;
  o.max_bytes = 100;
  EXPECT_FALSE(split_model(o).ok());  // two limits
  o.max_bytes = 0;
  auto parts = split_model(o);
  ASSERT_TRUE(parts.ok());
  o.input = (*parts)[0];
  o.output_prefix = dir + "/y";
  auto again = split_model(o);
  ASSERT_FALSE(again.ok());
  EXPECT_NE(again.status().message().find("merge it first"), std::string::npos);
  o.input = dir + "/missing.gguf";
  EXPECT_EQ(split_model(o).status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace minfer::tools
