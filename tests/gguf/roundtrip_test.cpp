#include <atomic>
#include <chrono>
#include <filesystem>
#include <memory>
#include <thread>

#include <gtest/gtest.h>

#include "common/fixtures.h"
#include "gguf/reader.h"
#include "sample.h"

namespace minfer::gguf {
namespace {

// Writes back what a parse produced: same metadata, same tensors, borrowed data.
std::vector<uint8_t> rewrite(const Parsed& p) {
  Writer w;
  w.metadata() = p.metadata;
  for (const TensorInfo& t : p.tensors) {
    std::vector<int64_t> ne(t.ne.begin(), t.ne.begin() + t.n_dims);
    EXPECT_TRUE(w.add_tensor(t.name, t.type, ne, std::span<const uint8_t>(t.data, t.n_bytes)).ok());
  }
  return *w.to_bytes();
}

TEST(GgufRoundTrip, ParseThenWriteIsByteIdentical) {
  for (uint32_t alignment : {1u, 8u, 32u, 64u, 4096u}) {
    std::vector<uint8_t> bytes = test::sample_bytes(alignment);
    auto parsed = parse(bytes, "sample");
    ASSERT_TRUE(parsed.ok()) << parsed.status().message();
    EXPECT_EQ(parsed->alignment, alignment);
    EXPECT_EQ(parsed->data_offset % alignment, 0u);
    EXPECT_EQ(rewrite(*parsed), bytes) << "alignment " << alignment;
  }
}

TEST(GgufRoundTrip, TensorsAreViewsWithExactSizesAndOffsets) {
  std::vector<uint8_t> bytes = test::sample_bytes();
  auto parsed = parse(bytes, "sample");
  ASSERT_TRUE(parsed.ok());
  ASSERT_EQ(parsed->tensors.size(), 3u);
  const TensorInfo& b = parsed->tensors[1];
  EXPECT_EQ(b.name, "b.weight");
  EXPECT_EQ(b.type, DType::Q8_0);
  EXPECT_EQ(b.n_bytes, 136u);
  EXPECT_EQ(b.ne[0], 64);
  EXPECT_EQ(b.ne[1], 2);
  EXPECT_EQ(b.offset, 64u);  // 48 bytes of a.weight padded to 32
  EXPECT_EQ(b.data, bytes.data() + b.file_offset);
  EXPECT_EQ(std::vector<uint8_t>(b.data, b.data + b.n_bytes), test::pattern_bytes(136, 2));
  const Value* nested = parsed->metadata.find("t.arr_arr");
  ASSERT_NE(nested, nullptr);
  EXPECT_EQ(nested->as_array().arrays[1].strings[0], "x");
}

TEST(GgufRoundTrip, FileOpenMapsTheWrittenFile) {
  const std::string path = minfer::test::temp_dir() + "/sample.gguf";
  ASSERT_TRUE(test::sample_writer().write(path).ok());
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  auto file = File::open(path);
  ASSERT_TRUE(file.ok()) << file.status().message();
  EXPECT_EQ(file->n_parts(), 1u);
  const TensorInfo* c = file->find_tensor("c.bias");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(std::vector<uint8_t>(c->data, c->data + c->n_bytes), test::pattern_bytes(10, 3));
  EXPECT_EQ(file->find_tensor("missing"), nullptr);
}

TEST(GgufWriter, RefusesBadTensors) {
  Writer w;
  EXPECT_FALSE(w.add_tensor("x", DType::Q4_0, {33}, std::vector<uint8_t>(18)).ok());  // not a block multiple
  EXPECT_FALSE(w.add_tensor("x", DType::F32, {4}, std::vector<uint8_t>(15)).ok());    // size mismatch
  EXPECT_TRUE(w.add_tensor("x", DType::F32, {4}, std::vector<uint8_t>(16)).ok());
  EXPECT_FALSE(w.add_tensor("x", DType::F32, {4}, std::vector<uint8_t>(16)).ok());  // duplicate
  auto missing_dir = w.write("/nonexistent-dir/x.gguf");
  EXPECT_EQ(missing_dir.code(), StatusCode::kIo);
}

// Producers run ahead of the tensor being written (make-model's parallel generation) give the bytes of
// one at a time, whatever order they finish in, with at most `producers_ahead` running at once; a failing
// producer's error is the write's, and no file is left behind.
TEST(GgufWriter, ProducersRunAheadGiveTheSameBytes) {
  std::atomic<int> running{0}, most_running{0};
  auto make = [&](int fail_at) {
    auto w = std::make_unique<Writer>();
    w->metadata().set("general.architecture", Value::string("test"));
    for (int t = 0; t < 9; ++t) {
      const std::string name = "t" + std::to_string(t);
      if (t % 3 == 1) {  // a borrowed tensor between producers: the window skips it
        EXPECT_TRUE(
            w->add_tensor(name, DType::F32, {5}, test::pattern_bytes(20, static_cast<uint8_t>(t))).ok());
        continue;
      }
      EXPECT_TRUE(w->add_tensor(name, DType::F32, {3 + t}, [&, t, fail_at]() -> Result<std::vector<uint8_t>> {
                     const int now = running.fetch_add(1) + 1;
                     for (int m = most_running.load();
                          now > m && !most_running.compare_exchange_weak(m, now);) {
                     }
                     // Earlier tensors finish last, so completion order is the reverse of writing's.
                     std::this_thread::sleep_for(std::chrono::milliseconds(10 * (9 - t)));
                     running.fetch_sub(1);
                     if (t == fail_at) return error(StatusCode::kInternal, "producer {} failed", t);
                     return test::pattern_bytes(4 * (3 + t), static_cast<uint8_t>(7 * t));
                   }).ok());
    }
    return w;
  };
  const std::string dir = minfer::test::temp_dir();
  ASSERT_TRUE(make(-1)->write(dir + "/one.gguf").ok());
  EXPECT_EQ(most_running.load(), 1);
  most_running = 0;
  ASSERT_TRUE(make(-1)->write(dir + "/ahead.gguf", {}, 3).ok());
  EXPECT_GE(most_running.load(), 2);  // ran at once (3 unless a thread started 60 ms late) ...
  EXPECT_LE(most_running.load(), 3);  // ... and never more than asked
  EXPECT_EQ(minfer::test::read_file(dir + "/ahead.gguf"), minfer::test::read_file(dir + "/one.gguf"));

  const Status failed = make(6)->write(dir + "/failed.gguf", {}, 4);
  EXPECT_EQ(failed.code(), StatusCode::kInternal);
  EXPECT_NE(failed.message().find("producer 6 failed"), std::string::npos) << failed.message();
  EXPECT_FALSE(std::filesystem::exists(dir + "/failed.gguf"));
  EXPECT_FALSE(std::filesystem::exists(dir + "/failed.gguf.tmp"));
  std::filesystem::remove_all(dir);
}

TEST(GgufOpen, MissingFileIsNotFound) {
  auto file = File::open("/nonexistent/model.gguf");
  ASSERT_FALSE(file.ok());
  EXPECT_EQ(file.status().code(), StatusCode::kNotFound);
  EXPECT_NE(file.status().message().find("/nonexistent/model.gguf"), std::string::npos);
}

}  // namespace
}  // namespace minfer::gguf
