// `minfer quantize` against llama-quantize on the families beyond Qwen dense (llama, gemma3, qwen3moe),
// self-contained: each tiny f32 model is generated in-test (tools::make_synthetic_model, fixed preset and
// seed; its FNV-1a hash is checked against the file llama.cpp quantized), quantized with
// tools::quantize_model (the library call behind `minfer quantize`) into every file type minfer writes, and
// every tensor's type and sha256 of its data bytes is compared with llama_model_quantize's output recorded
// in tests/parity/quantize_families/refs.json by make_refs.py there (its README says how and why). Exact:
// there is no tolerance, a single differing byte fails.
#include <openssl/sha.h>

#include <map>
#include <string>
#include <vector>

#include "parity/synthetic_parity.h"
#include "tools/quantize.h"

namespace minfer {
namespace {

using nlohmann::json;

std::string sha256_hex(const uint8_t* data, size_t n) {
  unsigned char md[SHA256_DIGEST_LENGTH];
  SHA256(data, n, md);
  std::string out;
  for (unsigned char c : md) out += fmt::format("{:02x}", c);
  return out;
}

// The models and file types of refs.json (ListsEveryCase checks that they are all there).
constexpr const char* kPresets[] = {"tiny-llama", "tiny-llama-kquant", "tiny-gemma3", "tiny-gemma3-softcap",
                                    "tiny-qwen3moe"};
constexpr const char* kTypes[] = {"f16",  "bf16",   "q8_0",   "q4_0",   "q4_1",   "q5_0",
                                  "q5_1", "q4_K_S", "q4_K_M", "q5_K_S", "q5_K_M", "q6_K"};

const json& refs() {
  static const json all = test::read_refs(MINFER_QUANTIZE_FAMILIES_REFS);
  return all;
}

const json& model_refs(const std::string& preset) {
  for (const json& m : refs().at("models")) {
    if (m.at("preset") == preset) return m;
  }
  static const json none;
  ADD_FAILURE() << preset << " is not in refs.json: rerun tests/parity/quantize_families/make_refs.py";
  return none;
}

// The f32 model llama-quantize read, regenerated once per preset.
std::string f32_model(const std::string& preset) {
  static std::map<std::string, std::string> made;
  if (auto it = made.find(preset); it != made.end()) return it->second;
  const json& m = model_refs(preset);
  tools::SyntheticOptions o;
  o.shape = *tools::synthetic_preset(preset);
  o.seed = m.at("seed").get<uint64_t>();
  auto writer = tools::make_synthetic_model(o);
  EXPECT_TRUE(writer.ok()) << writer.status().message();
  const std::string path = test::temp_dir() + "/qfam-" + preset + "-f32.gguf";
  EXPECT_TRUE(writer->write(path).ok());
  EXPECT_EQ(test::fnv1a64(path), m.at("fnv1a64").get<std::string>())
      << path << " is not the file llama-quantize read: rerun tests/parity/quantize_families/make_refs.py";
  return made[preset] = path;
}

struct Case {
  std::string preset, type;
};
void PrintTo(const Case& c, std::ostream* os) {
  *os << c.preset << " " << c.type;
}

class QuantizeFamilies : public ::testing::TestWithParam<Case> {};

TEST_P(QuantizeFamilies, TensorsByteIdenticalToLlamaQuantize) {
  const Case& c = GetParam();
  const json& want = model_refs(c.preset).at("outputs").at(c.type);
  const std::string in = f32_model(c.preset);
  ASSERT_FALSE(HasFailure());
  tools::QuantizeOptions o;
  o.input = in;
  o.output = test::temp_dir() + "/qfam-" + c.preset + "-" + c.type + ".gguf";
  o.type = c.type;
  o.n_threads = 2;
  auto report = tools::quantize_model(o);
  ASSERT_TRUE(report.ok()) << report.status().message();
  auto out = gguf::File::open(o.output);
  ASSERT_TRUE(out.ok()) << out.status().message();

  const auto& md = out->metadata();
  EXPECT_EQ(*md.get_u32("general.file_type"), want.at("general.file_type").get<uint32_t>());
  EXPECT_EQ(*md.get_u32("general.quantization_version"),
            want.at("general.quantization_version").get<uint32_t>());
  std::vector<std::string> keys;
  for (const auto& [key, value] : md.entries()) keys.push_back(key);
  EXPECT_EQ(keys, want.at("metadata_keys").get<std::vector<std::string>>()) << "metadata keys or their order";

  std::vector<std::string> names, want_names;
  for (const gguf::TensorInfo& t : out->tensors()) names.push_back(t.name);
  for (const json& t : want.at("tensors")) want_names.push_back(t.at(0).get<std::string>());
  EXPECT_EQ(names, want_names) << "tensor names or their order";
  size_t compared = 0;
  for (const json& t : want.at("tensors")) {
    const std::string name = t.at(0);
    const gguf::TensorInfo* got = out->find_tensor(name);
    if (got == nullptr) continue;  // reported by the name list above
    const std::string want_type = t.at(1);
    EXPECT_EQ(dtype_name(got->type),
              dtype_from_name(want_type) ? dtype_name(*dtype_from_name(want_type)) : want_type)
        << c.preset << " " << c.type << ": " << name;
    EXPECT_EQ(sha256_hex(got->data, got->n_bytes), t.at(2).get<std::string>())
        << c.preset << " " << c.type << ": " << name << " as " << dtype_name(got->type);
    ++compared;
  }
  EXPECT_EQ(compared, want.at("tensors").size());
  // The same tensors, keys and order make the same file: header, metadata values, alignment and padding
  // included.
  const std::string whole = test::read_file(o.output);
  EXPECT_EQ(whole.size(), want.at("bytes").get<size_t>());
  EXPECT_EQ(sha256_hex(reinterpret_cast<const uint8_t*>(whole.data()), whole.size()),
            want.at("sha256").get<std::string>())
      << "the whole file differs from llama-quantize's";
}

std::vector<Case> all_cases() {
  std::vector<Case> out;
  for (const char* p : kPresets) {
    for (const char* t : kTypes) out.push_back({p, t});
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Refs, QuantizeFamilies, ::testing::ValuesIn(all_cases()),
                         [](const ::testing::TestParamInfo<Case>& p) {
                           std::string s = p.param.preset + "_" + p.param.type;
                           for (char& ch : s) {
                             if (ch == '-') ch = '_';
                           }
                           return s;
                         });

TEST(QuantizeFamiliesFixture, ListsEveryCase) {
  ASSERT_EQ(refs().at("models").size(), std::size(kPresets));
  for (const char* p : kPresets) {
    for (const char* t : kTypes) EXPECT_TRUE(model_refs(p).at("outputs").contains(t)) << p << " " << t;
  }
}

// llama-quantize has rules for architectures minfer does not implement (Falcon's, ssm_conv1d, shared-expert
// ffn_down counting): such a file is refused by name, never quantized with the rules of another family.
TEST(QuantizeFamiliesRefusal, AnArchitectureWithoutItsRulesIsRefusedByName) {
  tools::SyntheticOptions so;
  so.shape = *tools::synthetic_preset("tiny-llama");
  auto writer = tools::make_synthetic_model(so);
  ASSERT_TRUE(writer.ok()) << writer.status().message();
  writer->metadata().set("general.architecture", gguf::Value::string("falcon"));
  const std::string in = test::temp_dir() + "/qfam-falcon-f32.gguf";
  ASSERT_TRUE(writer->write(in).ok());
  tools::QuantizeOptions o;
  o.input = in;
  o.output = test::temp_dir() + "/qfam-falcon-q4_K_M.gguf";
  o.type = "q4_K_M";
  auto report = tools::quantize_model(o);
  ASSERT_FALSE(report.ok());
  EXPECT_EQ(report.status().code(), StatusCode::kUnsupported);
  EXPECT_NE(report.status().message().find("architecture 'falcon' is not supported"), std::string::npos)
      << report.status().message();
}

}  // namespace
}  // namespace minfer
