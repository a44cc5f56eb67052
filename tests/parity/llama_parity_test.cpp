// Parity with llama.cpp on the `llama` architecture, self-contained: tiny random-weight llama models are
// generated in-test (tools::make_synthetic_model, fixed preset / type / seed) and compared with llama.cpp's
// outputs on the same files, recorded once in tests/parity/llama/refs.json by make_refs.py (the command is
// in its header) through ../shared/peer. Covered: normal-pair RoPE with llama3 rope_freqs (tiny-llama),
// untied and tied output heads, GQA, f32 / q8_0 / q4_0 / q4_K_M weights, prompt ids of the same vocabulary.
#include <cmath>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/fixtures.h"
#include "engine/engine.h"
#include "tools/synthetic_model.h"

namespace minfer {
namespace {

using nlohmann::json;

json refs() {
  std::ifstream in(MINFER_LLAMA_REFS);
  EXPECT_TRUE(in.good()) << MINFER_LLAMA_REFS;
  std::stringstream ss;
  ss << in.rdbuf();
  return json::parse(ss.str());
}

std::string fnv1a64(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  uint64_t h = 0xCBF29CE484222325ULL;
  char c;
  while (in.get(c)) {
    h ^= static_cast<uint8_t>(c);
    h *= 0x100000001B3ULL;
  }
  return fmt::format("{:016x}", h);
}

std::vector<double> log_softmax(const float* x, size_t n) {
  double mx = -1e300, sum = 0;
  for (size_t i = 0; i < n; ++i) mx = std::max(mx, static_cast<double>(x[i]));
  for (size_t i = 0; i < n; ++i) sum += std::exp(x[i] - mx);
  std::vector<double> out(n);
  for (size_t i = 0; i < n; ++i) out[i] = x[i] - mx - std::log(sum);
  return out;
}

// Tolerance on max |log-softmax difference| (the last two prompt positions), and the top-1/top-2 gap under
// which a greedy step counts as a near-tie (where the comparison stops):
// - f32 weights: 0.05. llama.cpp's own batch vs token-by-token disagreement on these models is 4e-3..6e-3
//   (recorded per model, `floor_batch_vs_tokenwise`); on top of it llama.cpp's flash attention on the f16
//   cache rounds Q to f16 while we keep it in f32, and sums in another order: 0.017..0.018 observed.
// - quantized weights: 0.5. Both engines quantize the activations to q8 blocks before the quantized dot
//   products, and a 1-ulp difference in an f32 sum flips a rounding there, which these random-weight models
//   amplify: 0.29..0.31 observed here, the same 0.23..0.38 that our Qwen models show against llama.cpp's
//   own references on short prompts (tests/parity/logits_parity_test.cpp), so not llama-specific. A wrong
//   rope pairing, factor or head layout moves log-softmax values by several units.
double tolerance(const std::string& type, double floor) { return std::max(2.0 * floor, type == "f32" ? 0.05 : 0.5); }

class LlamaParity : public ::testing::TestWithParam<int> {};

TEST_P(LlamaParity, LogitsAndGreedyMatchLlamaCpp) {
  const json all = refs();
  const json& m = all.at("models").at(static_cast<size_t>(GetParam()));
  const std::string preset = m.at("preset"), type = m.at("type");
  SCOPED_TRACE(preset + " " + type);
  tools::SyntheticOptions o;
  o.shape = *tools::synthetic_preset(preset);
  o.seed = m.at("seed").get<uint64_t>();
  if (type != "f32") o.quant_type = type;
  auto writer = tools::make_synthetic_model(o);
  ASSERT_TRUE(writer.ok()) << writer.status().message();
  const std::string path = test::temp_dir() + "/parity-" + preset + "-" + type + ".gguf";
  ASSERT_TRUE(writer->write(path).ok());
  ASSERT_EQ(fnv1a64(path), m.at("fnv1a64").get<std::string>())
      << "the generator changed: rerun tests/parity/llama/make_refs.py";

  engine::EngineOptions options;
  options.n_ctx = 256;
  options.n_threads = 1;
  options.cache_type = DType::F16;  // the peer's KV cache type
  auto loaded = engine::Engine::load(path, options);
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  engine::Engine& e = **loaded;
  const auto nv = static_cast<size_t>(e.n_vocab());
  const double tol = tolerance(type, m.at("floor_batch_vs_tokenwise").get<double>());

  double worst = 0;
  int compared_steps = 0;
  for (const json& p : m.at("prompts")) {
    const std::string text = p.at("text");
    SCOPED_TRACE(text);
    const std::vector<int32_t> want_ids = p.at("prompt_ids");
    const std::vector<int32_t> ids = e.tokenizer().encode(text, /*parse_special=*/true);
    ASSERT_EQ(ids, want_ids);
    e.kv().clear();
    const auto first = p.at("first_position").get<size_t>();
    engine::Batch batch;
    for (size_t i = 0; i < ids.size(); ++i) batch.add(ids[i], static_cast<int32_t>(i), 0, i >= first);
    auto logits = e.decode(batch);
    ASSERT_TRUE(logits.ok()) << logits.status().message();
    const json& rows = p.at("logsoftmax");
    ASSERT_EQ(logits->size(), rows.size() * nv);
    for (size_t r = 0; r < rows.size(); ++r) {
      const std::vector<double> got = log_softmax(logits->data() + r * nv, nv);
      ASSERT_EQ(rows[r].size(), nv);
      for (size_t v = 0; v < nv; ++v) {
        const double want = rows[r][v].get<double>();
        if (want < -80) continue;  // the peer's softmax underflows there
        worst = std::max(worst, std::abs(got[v] - want));
      }
    }
    // Greedy: identical up to the first step whose top-1/top-2 gap (in llama.cpp) is within tol.
    const std::vector<int32_t> greedy = p.at("greedy");
    const std::vector<double> gaps = p.at("gap_top1_top2");
    std::vector<float> cur(logits->end() - static_cast<std::ptrdiff_t>(nv), logits->end());
    auto pos = static_cast<int32_t>(ids.size());
    for (size_t i = 0; i < greedy.size(); ++i) {
      if (gaps[i] <= tol) break;
      const auto best = static_cast<int32_t>(std::max_element(cur.begin(), cur.end()) - cur.begin());
      EXPECT_EQ(best, greedy[i]) << "greedy step " << i << " (llama.cpp's top-1/top-2 gap " << gaps[i] << ")";
      if (best != greedy[i]) break;
      ++compared_steps;
      engine::Batch b;
      b.add(best, pos++, 0, true);
      auto next = e.decode(b);
      ASSERT_TRUE(next.ok()) << next.status().message();
      cur = *next;
    }
  }
  EXPECT_LE(worst, tol) << "max |log-softmax difference| against llama.cpp";
  // f32: most of the 48 steps (3 prompts x 16) are clear; quantized: steps stop at the first gap under 0.5
  // (2..6 steps compared with this fixture).
  EXPECT_GE(compared_steps, type == "f32" ? 24 : 2) << "too few greedy steps compared (near-ties everywhere?)";
  RecordProperty("max_abs_diff", fmt::format("{:.3g}", worst));
  RecordProperty("greedy_steps", compared_steps);
  if (std::getenv("MINFER_PARITY_REPORT") != nullptr) {
    std::printf("llama parity %-16s %-7s max diff %.3g tol %.3g greedy steps %d\n", preset.c_str(), type.c_str(),
                worst, tol, compared_steps);
  }
}

constexpr const char* kCaseNames[] = {"tiny_llama_f32", "tiny_llama_tied_f32", "tiny_llama_q8_0",
                                      "tiny_llama_q4_0", "tiny_llama_q4_K_M"};

INSTANTIATE_TEST_SUITE_P(Refs, LlamaParity, ::testing::Range(0, 5),
                         [](const auto& param_info) { return std::string(kCaseNames[param_info.param]); });

TEST(LlamaParityFixture, ListsTheFiveModels) {
  const json all = refs();
  ASSERT_EQ(all.at("models").size(), 5u);
  EXPECT_EQ(all["models"][0]["preset"], "tiny-llama");
  EXPECT_EQ(all["models"][1]["preset"], "tiny-llama-tied");
  EXPECT_EQ(all["models"][4]["type"], "q4_K_M");
}

}  // namespace
}  // namespace minfer
