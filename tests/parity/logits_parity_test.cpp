// Parity with llama.cpp on the shared fixtures: for every model file, both reference settings and every
// prompt, our prompt ids equal llama.cpp's, our logits agree within a tolerance derived from llama.cpp's
// own noise floor (see kTolerance), and the greedy continuation matches up to the first near-tie.
#include <cmath>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/fixtures.h"
#include "engine/engine.h"

namespace minfer {
namespace {

using nlohmann::json;

std::vector<float> read_f32(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  const auto size = static_cast<size_t>(in.tellg());
  std::vector<float> v(size / sizeof(float));
  in.seekg(0);
  in.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(size));
  return v;
}

double max_abs_diff(const float* a, const float* b, size_t n) {
  double m = 0;
  for (size_t i = 0; i < n; ++i) m = std::max(m, std::abs(static_cast<double>(a[i]) - b[i]));
  return m;
}

struct Case {
  std::string model;    // e.g. qwen2-mini-q4_0; empty for the placeholder
  std::string setting;  // exact | default
};
// Readable case names in gtest and ctest listings (instead of the struct's bytes).
void PrintTo(const Case& c, std::ostream* os) { *os << c.model << "/" << c.setting; }


// Every models/refs/<model>/<setting> folder the fixtures hold, listed when the binary runs (ctest lists
// the tests right before running them), so fixtures added or removed after the build are seen.
std::vector<Case> cases() {
  std::vector<Case> out;
  for (const std::string& model : test::fixture_entries("models/refs", "", /*dirs=*/true)) {
    for (const std::string& setting : test::fixture_entries("models/refs/" + model, "", /*dirs=*/true)) {
      out.push_back({model, setting});
    }
  }
  if (out.empty()) out.push_back({});  // one placeholder: gtest wants an instance; it never passes
  return out;
}

// Tolerance on max |logit difference| against llama.cpp, per weight type and setting. The floor is
// llama.cpp's own disagreement with itself (one-batch prefill vs token by token, max over all prompts of
// both models with that weight type, from refs/summary.json; the fixtures README tabulates it): a 1-ulp
// difference in an f32 sum flips 8-bit activation roundings, which these random-weight models amplify,
// and our kernels sum in another order than llama.cpp's, so the same phenomenon separates us from it.
// We allow twice that floor, and never less than 5e-3 (f32 sums in a different order: ~1e-6 relative on
// logits up to 20, through 2 layers).
double tolerance(const json& summary, const Case& c) {
  const std::string type = c.model.substr(c.model.rfind('-') + 1);  // "q4_k_m" of "qwen3-mini-q4_k_m"
  double floor = 0;
  for (const char* arch : {"qwen2-mini-", "qwen3-mini-"}) {
    floor = std::max(floor, summary.at(arch + type).at(c.setting).at("max_abs_diff_batch_vs_tokenwise").get<double>());
  }
  return std::max(2.0 * floor, 5e-3);
}

class LogitsParity : public ::testing::TestWithParam<Case> {};

TEST_P(LogitsParity, PromptIdsLogitsAndGreedyMatchLlamaCpp) {
  const Case& c = GetParam();
  if (c.model.empty()) return test::no_parity_cases("logits");
  const std::string root = test::fixture_path("models");
  const json summary = json::parse(test::read_file(root + "/refs/summary.json"));
  const double tol = tolerance(summary, c);
  engine::EngineOptions options;
  options.n_ctx = 2048;
  options.n_threads = 1;  // ctest runs binaries in parallel; oversubscribed spinning pools crawl
  options.cache_type = c.setting == "exact" ? DType::F32 : DType::F16;
  auto loaded = engine::Engine::load(root + "/" + c.model + ".gguf", options);
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  engine::Engine& e = **loaded;
  const auto nv = static_cast<size_t>(e.n_vocab());

  const std::string ref_dir = root + "/refs/" + c.model + "/" + c.setting;
  int n_prompts = 0;
  for (const auto& entry : std::filesystem::directory_iterator(ref_dir)) {
    if (entry.path().extension() != ".json") continue;
    ++n_prompts;
    const json ref = json::parse(test::read_file(entry.path().string()));
    const std::string name = ref["prompt_name"];
    SCOPED_TRACE(c.model + "/" + c.setting + "/" + name);
    const std::vector<int32_t> want_ids = ref["prompt_ids"];
    const std::vector<int32_t> ids = e.tokenizer().encode(ref["prompt_text"].get<std::string>(), /*add_special=*/false, true);
    ASSERT_EQ(ids, want_ids);

    e.kv().clear();
    const bool all = std::filesystem::exists(ref_dir + "/" + name + ".all.bin");
    engine::Batch batch;
    for (size_t i = 0; i < ids.size(); ++i) batch.add(ids[i], static_cast<int32_t>(i), 0, all || i + 1 == ids.size());
    auto logits = e.decode(batch);
    ASSERT_TRUE(logits.ok()) << logits.status().message();
    const std::vector<float> last_ref = read_f32(ref_dir + "/" + name + ".last.bin");
    ASSERT_EQ(last_ref.size(), nv);
    const float* last = logits->data() + logits->size() - nv;
    const double d_last = max_abs_diff(last, last_ref.data(), nv);
    EXPECT_LE(d_last, tol) << "last-position logits";
    double d_all = 0;
    if (all) {
      const std::vector<float> all_ref = read_f32(ref_dir + "/" + name + ".all.bin");
      ASSERT_EQ(all_ref.size(), logits->size());
      d_all = max_abs_diff(logits->data(), all_ref.data(), all_ref.size());
      EXPECT_LE(d_all, tol) << "all-position logits";
    }

    // Greedy continuation: identical up to the first step whose recorded top-1/top-2 gap is within tol.
    const json& steps = ref["greedy"]["steps"];
    std::vector<float> cur(last, last + nv);
    int32_t pos = static_cast<int32_t>(ids.size());
    int compared = 0;
    for (const json& step : steps) {
      if (step["gap_top1_top2"].get<double>() <= tol) break;
      const auto best = static_cast<int32_t>(std::max_element(cur.begin(), cur.end()) - cur.begin());
      ASSERT_EQ(best, step["token"].get<int32_t>()) << "greedy step " << compared;
      ++compared;
      engine::Batch b;
      b.add(best, pos++, 0, true);
      auto next = e.decode(b);
      ASSERT_TRUE(next.ok()) << next.status().message();
      cur = *next;
    }
    if (std::getenv("MINFER_PARITY_REPORT") != nullptr) {
      std::printf("parity %-22s %-7s %-34s last %.3g all %.3g tol %.3g greedy %d/%zu\n", c.model.c_str(),
                  c.setting.c_str(), name.c_str(), d_last, d_all, tol, compared, steps.size());
    }
  }
  EXPECT_EQ(n_prompts, 7);
  test::record_parity_case("logits", c.model + "/" + c.setting);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, LogitsParity, ::testing::ValuesIn(cases()), [](const auto& param_info) {
  if (param_info.param.model.empty()) return std::string("NoFixtures");
  std::string n = param_info.param.model + "_" + param_info.param.setting;
  for (char& ch : n) {
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  }
  return n;
});

}  // namespace
}  // namespace minfer
