// Parity tier: quantizing the f32 fixture models with our reference encoders and llama-quantize's type
// rules reproduces llama-quantize's output tensor for tensor (type and sha256 of the data bytes, as
// recorded in ../shared/fixtures/models/manifest.json), and `minfer quantize` writes its whole file.
#include <openssl/sha.h>

#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/fixtures.h"
#include "gguf/reader.h"
#include "quant/quant.h"
#include "quant/quantize_rules.h"
#include "tools/quantize.h"

namespace minfer::quant {
namespace {

std::string sha256_hex(const void* data, size_t n) {
  unsigned char md[SHA256_DIGEST_LENGTH];
  SHA256(static_cast<const unsigned char*>(data), n, md);
  std::string out;
  for (unsigned char c : md) out += fmt::format("{:02x}", c);
  return out;
}

struct Case {
  std::string model;  // "qwen2-mini"; empty for the placeholder
  std::string type;   // "q4_k_m"
};
// Readable case names in gtest and ctest listings (instead of the struct's bytes).
void PrintTo(const Case& c, std::ostream* os) {
  *os << c.model << "-" << c.type;
}

class QuantizeParity : public ::testing::TestWithParam<Case> {};

TEST_P(QuantizeParity, MatchesLlamaQuantizeTensorForTensor) {
  const Case& c = GetParam();
  if (c.model.empty()) return minfer::test::no_parity_cases("quantize");
  const auto manifest =
      nlohmann::json::parse(minfer::test::read_file(minfer::test::fixture_path("models/manifest.json")));
  const std::string out_name = c.model + "-" + c.type + ".gguf";
  ASSERT_TRUE(manifest.contains(out_name)) << out_name;
  const auto& entry = manifest[out_name];

  auto src = gguf::File::open(minfer::test::fixture_path("models/" + c.model + "-f32.gguf"));
  ASSERT_TRUE(src.ok()) << src.status().message();
  const auto ft = file_type_from_name(c.type);
  ASSERT_TRUE(ft.has_value()) << c.type;
  EXPECT_EQ(ft->ftype, entry["general.file_type"].get<uint32_t>());

  std::vector<TensorDesc> descs;
  for (const auto& t : src->tensors()) {
    TensorDesc d;
    d.name = t.name;
    d.type = t.type;
    d.n_dims = static_cast<int>(t.n_dims);
    for (int i = 0; i < 4; ++i) d.ne[i] = t.ne[i];
    descs.push_back(d);
  }
  const auto decisions = choose_tensor_types(*ft, descs);
  std::map<std::string, size_t> index;
  for (size_t i = 0; i < descs.size(); ++i) index[descs[i].name] = i;

  size_t checked = 0;
  for (const auto& want : entry["tensors"]) {
    const std::string name = want["name"];
    ASSERT_TRUE(index.count(name)) << name;
    const size_t i = index[name];
    const auto& info = src->tensors()[i];
    const TensorDecision& d = decisions[i];
    const auto want_type = dtype_from_name(want["type"].get<std::string>());
    ASSERT_TRUE(want_type.has_value());
    EXPECT_EQ(dtype_name(d.type), dtype_name(*want_type))
        << out_name << ": " << name << " (" << d.reason << ")";
    if (d.type != *want_type) continue;
    std::vector<uint8_t> bytes;
    if (!d.quantize) {
      bytes.assign(static_cast<const uint8_t*>(info.data),
                   static_cast<const uint8_t*>(info.data) + info.n_bytes);
    } else {
      const int64_t ne0 = info.ne[0];
      const int64_t rows = static_cast<int64_t>(info.n_bytes / (sizeof(float) * static_cast<size_t>(ne0)));
      bytes.resize(*row_bytes(d.type, ne0) * static_cast<size_t>(rows));
      const size_t written = quantize_rows(d.type, reinterpret_cast<const float*>(info.data), bytes.data(),
                                           rows, ne0, /*n_threads=*/2);
      ASSERT_EQ(written, bytes.size());
    }
    EXPECT_EQ(bytes.size(), want["n_bytes"].get<size_t>()) << name;
    EXPECT_EQ(sha256_hex(bytes.data(), bytes.size()), want["sha256"].get<std::string>())
        << out_name << ": " << name << " as " << dtype_name(d.type);
    ++checked;
  }
  EXPECT_EQ(checked, entry["tensors"].size());
  // `minfer quantize` itself (tools::quantize_model) writes llama-quantize's whole file: the tensors above in
  // its order, with its metadata.
  tools::QuantizeOptions o;
  o.input = minfer::test::fixture_path("models/" + c.model + "-f32.gguf");
  o.output = minfer::test::temp_dir() + "/" + out_name;
  o.type = c.type;
  o.n_threads = 2;
  auto report = tools::quantize_model(o);
  ASSERT_TRUE(report.ok()) << report.status().message();
  const std::string whole = minfer::test::read_file(o.output);
  EXPECT_EQ(sha256_hex(whole.data(), whole.size()), entry["sha256"].get<std::string>())
      << out_name << ": the whole file differs from llama-quantize's";
  minfer::test::record_parity_case("quantize", c.model + "-" + c.type);
}

// Every llama-quantize output the fixtures hold (models/<model>-<type>.gguf next to <model>-f32.gguf),
// listed when the binary runs, not when it was built.
std::vector<Case> all_cases() {
  std::vector<Case> out;
  for (const std::string& file : minfer::test::fixture_entries("models", ".gguf")) {
    const std::string stem = file.substr(0, file.size() - 5);
    const size_t dash = stem.rfind('-');
    if (dash == std::string::npos || stem.substr(dash + 1) == "f32") continue;
    out.push_back({stem.substr(0, dash), stem.substr(dash + 1)});
  }
  if (out.empty()) out.push_back({});  // one placeholder: gtest wants an instance; it never passes
  return out;
}

INSTANTIATE_TEST_SUITE_P(Fixtures, QuantizeParity, ::testing::ValuesIn(all_cases()),
                         [](const ::testing::TestParamInfo<Case>& p) {
                           if (p.param.model.empty()) return std::string("NoFixtures");
                           std::string s = p.param.model + "_" + p.param.type;
                           for (char& ch : s) {
                             if (ch == '-') ch = '_';
                           }
                           return s;
                         });

}  // namespace
}  // namespace minfer::quant
