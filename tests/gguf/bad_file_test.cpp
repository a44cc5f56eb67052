// Hostile input: every malformed file must give a specific error (field + byte offset), never a crash,
// over-read or huge allocation. Files are generated here, never checked in.
#include <cstring>
#include <string>

#include <gtest/gtest.h>

#include "gguf/reader.h"
#include "sample.h"

namespace minfer::gguf {
namespace {

// Hand-assembles GGUF bytes so each test can lie in exactly one field.
class Bytes {
 public:
  template <typename T>
  Bytes& put(T v) {
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    b_.insert(b_.end(), p, p + sizeof(T));
    return *this;
  }
  Bytes& str(const std::string& s) {
    put<uint64_t>(s.size());
    b_.insert(b_.end(), s.begin(), s.end());
    return *this;
  }
  Bytes& header(uint64_t n_tensors, uint64_t n_kv, uint32_t version = 3) {
    return put<uint32_t>(kMagic).put<uint32_t>(version).put<uint64_t>(n_tensors).put<uint64_t>(n_kv);
  }
  Bytes& kv_u32(const std::string& key, uint32_t v) { return str(key).put<uint32_t>(4).put<uint32_t>(v); }
  Bytes& tensor(const std::string& name, std::vector<uint64_t> ne, uint32_t type, uint64_t offset) {
    str(name).put<uint32_t>(static_cast<uint32_t>(ne.size()));
    for (uint64_t d : ne) put<uint64_t>(d);
    return put<uint32_t>(type).put<uint64_t>(offset);
  }
  Bytes& pad_to(size_t alignment) {
    while (b_.size() % alignment != 0) b_.push_back(0);
    return *this;
  }
  Bytes& zeros(size_t n) {
    b_.insert(b_.end(), n, 0);
    return *this;
  }
  std::vector<uint8_t>& vec() { return b_; }

 private:
  std::vector<uint8_t> b_;
};

std::string parse_error(std::vector<uint8_t> bytes) {
  auto r = parse(bytes, "bad.gguf");
  return r.ok() ? std::string("<parsed OK>") : r.status().message();
}

void expect_error(std::vector<uint8_t> bytes, const std::string& fragment) {
  const std::string msg = parse_error(std::move(bytes));
  EXPECT_NE(msg.find(fragment), std::string::npos) << "message: " << msg << "\nexpected fragment: " << fragment;
}

TEST(GgufBadFile, TruncationAtEveryByteIsAnError) {
  const std::vector<uint8_t> good = test::sample_bytes();
  auto parsed = parse(good, "good");
  ASSERT_TRUE(parsed.ok());
  // The last tensor's zero padding is optional; everything before the end of its data is required.
  const TensorInfo& last = parsed->tensors.back();
  ASSERT_LT(last.file_offset + last.n_bytes, good.size());
  for (size_t n = 0; n < last.file_offset + last.n_bytes; ++n) {
    std::vector<uint8_t> cut(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(n));  // exact-size heap copy: ASan sees over-reads
    auto r = parse(cut, "cut");
    ASSERT_FALSE(r.ok()) << "truncated to " << n << " bytes parsed";
  }
}

TEST(GgufBadFile, EveryCorruptedHeaderWordFailsCleanlyOrParses) {
  // Overwrite each header word with hostile values; parse must return (error or success) without UB.
  const std::vector<uint8_t> good = test::sample_bytes();
  const size_t header_end = parse(good, "good")->data_offset;
  for (size_t at = 0; at + 8 <= header_end; ++at) {
    for (uint64_t hostile : {~0ull, 1ull << 62, 0x7fffffffull, 0ull}) {
      std::vector<uint8_t> bad = good;
      std::memcpy(bad.data() + at, &hostile, 8);
      auto r = parse(bad, "bad");
      if (!r.ok()) {
        EXPECT_NE(r.status().message().find("bad"), std::string::npos);
      }
    }
  }
}

TEST(GgufBadFile, MagicAndVersion) {
  expect_error(Bytes().put<uint32_t>(0x12345678).put<uint32_t>(3).zeros(16).vec(), "magic at byte 0: not a GGUF file");
  expect_error(Bytes().header(0, 0, 2).vec(), "GGUF version 2 is not supported");
  expect_error(Bytes().header(0, 0, 1).vec(), "GGUF version 1 is not supported");
  expect_error(Bytes().header(0, 0, 4).vec(), "unknown GGUF version 4");
}

TEST(GgufBadFile, LyingCountsAreRefusedBeforeAllocating) {
  expect_error(Bytes().header(0, 1ull << 60).vec(), "metadata count at byte 16");
  expect_error(Bytes().header(1ull << 60, 0).vec(), "tensor count at byte 8");
  // A string length beyond the file.
  expect_error(Bytes().header(0, 1).put<uint64_t>(1ull << 40).zeros(8).vec(), "string length 1099511627776 exceeds");
  // An array count beyond the file.
  expect_error(Bytes().header(0, 1).str("k").put<uint32_t>(9).put<uint32_t>(5).put<uint64_t>(1ull << 50).zeros(8).vec(),
               "array count 1125899906842624 of i32 cannot fit");
  expect_error(Bytes().header(0, 1).str("k").put<uint32_t>(9).put<uint32_t>(8).put<uint64_t>(1000).zeros(64).vec(),
               "array count 1000 of string cannot fit");
}

TEST(GgufBadFile, UnknownTypesAndBadValues) {
  expect_error(Bytes().header(0, 1).str("k").put<uint32_t>(13).zeros(8).vec(), "metadata 'k' at byte 33: unknown value type 13");
  expect_error(Bytes().header(0, 1).str("k").put<uint32_t>(7).put<uint8_t>(2).zeros(8).vec(), "bool byte is 2");
  expect_error(Bytes().header(0, 1).str("k\xff").put<uint32_t>(4).put<uint32_t>(0).vec(), "not valid UTF-8");
  expect_error(Bytes().header(0, 1).str("").put<uint32_t>(4).put<uint32_t>(0).vec(), "empty key");
  expect_error(Bytes().header(0, 2).kv_u32("k", 1).kv_u32("k", 2).vec(), "metadata key 'k' at byte 41: duplicate key");
  expect_error(Bytes().header(0, 1).kv_u32("general.alignment", 24).vec(), "general.alignment = 24 is not a power of two");
  expect_error(Bytes().header(0, 1).str("general.alignment").put<uint32_t>(8).str("x").vec(),
               "general.alignment has type string");
  // Arrays nested deeper than the limit.
  Bytes deep;
  deep.header(0, 1).str("k").put<uint32_t>(9);
  for (int i = 0; i < 20; ++i) deep.put<uint32_t>(9).put<uint64_t>(1);
  deep.put<uint32_t>(4).put<uint64_t>(0).zeros(64);
  expect_error(deep.vec(), "arrays nested deeper than 8");
}

TEST(GgufBadFile, TensorInfoFields) {
  auto one_tensor = [](std::vector<uint64_t> ne, uint32_t type, uint64_t offset, size_t data = 64) {
    Bytes b;
    b.header(1, 0).tensor("w", std::move(ne), type, offset).pad_to(32).zeros(data);
    return b.vec();
  };
  EXPECT_EQ(parse_error(one_tensor({4, 4}, 0, 0)), "<parsed OK>");
  expect_error(one_tensor({4, 4, 1, 1, 1}, 0, 0), "tensor 'w' n_dims at byte 33: 5 dimensions");
  expect_error(one_tensor({4}, 99, 0), "tensor 'w' type at byte 45: unknown tensor type 99");
  expect_error(one_tensor({4}, 4, 0), "unknown tensor type 4");  // retired Q4_2
  expect_error(one_tensor({33}, 2, 0), "33 is not a multiple of the q4_0 block size 32");
  expect_error(one_tensor({~0ull}, 0, 0), "dimension -1 is negative");
  expect_error(one_tensor({1ull << 40, 1ull << 40}, 0, 0), "element count overflows int64");
  expect_error(one_tensor({4, 4}, 0, 8), "tensor 'w' offset 8 is not a multiple of the alignment 32");
  expect_error(one_tensor({4, 4}, 0, 64), "lies past the end of the file");
  expect_error(one_tensor({4, 4}, 0, 0, 63), "lies past the end of the file");
  expect_error(one_tensor({4, 4}, 0, ~0ull & ~31ull), "lies past the end of the file");
  // Data section start past EOF.
  expect_error(Bytes().header(1, 0).tensor("w", {0}, 0, 0).vec(), "starts past the end of the file");

  Bytes dup;
  dup.header(2, 0).tensor("w", {4}, 0, 0).tensor("w", {4}, 0, 32).pad_to(32).zeros(64);
  expect_error(dup.vec(), "tensor 'w' at byte 57: duplicate tensor name");

  Bytes overlap;
  overlap.header(2, 0).tensor("a", {16}, 0, 0).tensor("b", {16}, 0, 32).pad_to(32).zeros(96);
  expect_error(overlap.vec(), "tensor 'b' data at byte 128 overlaps tensor 'a'");

  Bytes empty_name;
  empty_name.header(1, 0).tensor("", {4}, 0, 0).pad_to(32).zeros(32);
  expect_error(empty_name.vec(), "empty tensor name");
}

}  // namespace
}  // namespace minfer::gguf
