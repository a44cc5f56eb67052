// The committed trained models (models/trained/, made by scripts/train/run.sh) in the normal test tier: they
// load, tokenize and generate as llama.cpp does on the same files (tests/parity/trained/refs.json, recorded
// by make_refs.py there through ../shared/peer), and they have learned the text: their held-out perplexity
// is far below a random model's.
#include <cmath>

#include "parity/synthetic_parity.h"

namespace minfer {
namespace {

using nlohmann::json;

std::string trained_path(const std::string& name) { return std::string(MINFER_SOURCE_DIR) + "/" + name; }

// Tolerance on max |log-softmax difference| (the last two prompt positions), also the top-1/top-2 gap
// under which a greedy step is a near-tie and not compared, by the rule of tests/parity/llama_parity_test.cpp
// (where the causes are explained): max(2 x llama.cpp's own batch vs token-by-token floor, TOL).
// - F16 weights: 0.05 (llama.cpp's flash attention rounds Q to f16 on the f16 cache, we keep it in f32, and
//   sums in another order); observed 0.0023 on the target.
// - Q8_0: 0.25 (both engines quantize the activations to q8 blocks and a 1-ulp difference flips a rounding);
//   observed 0.10 (target) and 0.096 (draft). Tighter than the random-weight models' 0.5: trained layers do
//   not amplify the rounding.
// The greedy comparison follows llama.cpp's tokens past near-ties (a trained model has many: a comma against
// "and"), so every clear step of the 96 (3 prompts x 32) is compared on llama.cpp's own path; at least half.
class TrainedParity : public ::testing::TestWithParam<int> {};

TEST_P(TrainedParity, LogitsAndGreedyMatchLlamaCpp) {
  const json all = test::read_refs(MINFER_TRAINED_REFS);
  const json& m = all.at("models").at(static_cast<size_t>(GetParam()));
  const std::string file = m.at("file");
  SCOPED_TRACE(file);
  const bool f16 = file.find("-f16") != std::string::npos;
  test::check_file_parity(trained_path(file), m, "trained", f16 ? 0.05 : 0.25, 48, /*follow_near_ties=*/true);
}

constexpr const char* kCaseNames[] = {"target_f16", "target_q8_0", "draft_q8_0"};

INSTANTIATE_TEST_SUITE_P(Refs, TrainedParity, ::testing::Range(0, 3),
                         [](const auto& param_info) { return std::string(kCaseNames[param_info.param]); });

// Mean next-token NLL over the first 512 tokens of the held-out text (never trained on), every position
// scored. A random-weight model scores about ln(8218) = 9.0 nats; trained, the target scores 3.16 and the
// draft 3.50 (Q8_0, this text is Bible chapters): the bounds leave room for another run of the recipe and
// fail only an untrained or broken model.
TEST(TrainedModel, HasLearnedTheHeldOutText) {
  struct Case {
    const char* file;
    double max_nll;
  };
  for (const Case c : {Case{"models/trained/tinyqwen3-8m-q8_0.gguf", 4.0},
                       Case{"models/trained/tinyqwen3-draft-1m-q8_0.gguf", 5.0}}) {
    SCOPED_TRACE(c.file);
    engine::EngineOptions options;
    options.n_ctx = 512;
    options.n_threads = 2;
    auto loaded = engine::Engine::load(trained_path(c.file), options);
    ASSERT_TRUE(loaded.ok()) << loaded.status().message();
    engine::Engine& e = **loaded;
    std::ifstream in(trained_path("models/trained/heldout.txt"));
    std::stringstream ss;
    ss << in.rdbuf();
    std::vector<int32_t> ids = e.tokenizer().encode(ss.str(), /*add_special=*/false, /*parse_special=*/false);
    ASSERT_GE(ids.size(), 512u);
    ids.resize(512);
    engine::Batch batch;
    for (size_t i = 0; i < ids.size(); ++i) batch.add(ids[i], static_cast<int32_t>(i), 0, true);
    auto logits = e.decode(batch);
    ASSERT_TRUE(logits.ok()) << logits.status().message();
    const auto nv = static_cast<size_t>(e.n_vocab());
    double nll = 0;
    for (size_t i = 0; i + 1 < ids.size(); ++i) {
      nll -= test::log_softmax(logits->data() + i * nv, nv)[static_cast<size_t>(ids[i + 1])];
    }
    nll /= static_cast<double>(ids.size() - 1);
    ::testing::Test::RecordProperty(c.file, fmt::format("{:.3f}", nll));
    EXPECT_LT(nll, c.max_nll);
  }
}

}  // namespace
}  // namespace minfer
