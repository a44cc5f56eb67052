// Parity with llama.cpp on the `llama` architecture, self-contained: tiny random-weight llama models are
// generated in-test (tools::make_synthetic_model, fixed preset / type / seed) and compared with llama.cpp's
// outputs on the same files, recorded once in tests/parity/llama/refs.json by make_refs.py (the command is
// in its header) through ../shared/peer. Covered: normal-pair RoPE with llama3 rope_freqs (tiny-llama),
// untied and tied output heads, GQA, f32 / q8_0 / q4_0 / q4_K_M weights, prompt ids of the same vocabulary.
#include "parity/synthetic_parity.h"

namespace minfer {
namespace {

using nlohmann::json;

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
class LlamaParity : public ::testing::TestWithParam<int> {};

TEST_P(LlamaParity, LogitsAndGreedyMatchLlamaCpp) {
  const json all = test::read_refs(MINFER_LLAMA_REFS);
  test::check_synthetic_parity(all.at("models").at(static_cast<size_t>(GetParam())), "llama", 0.05, 0.5);
}

constexpr const char* kCaseNames[] = {"tiny_llama_f32", "tiny_llama_tied_f32", "tiny_llama_q8_0",
                                      "tiny_llama_q4_0", "tiny_llama_q4_K_M"};

INSTANTIATE_TEST_SUITE_P(Refs, LlamaParity, ::testing::Range(0, 5),
                         [](const auto& param_info) { return std::string(kCaseNames[param_info.param]); });

TEST(LlamaParityFixture, ListsTheFiveModels) {
  const json all = test::read_refs(MINFER_LLAMA_REFS);
  ASSERT_EQ(all.at("models").size(), 5u);
  EXPECT_EQ(all["models"][0]["preset"], "tiny-llama");
  EXPECT_EQ(all["models"][1]["preset"], "tiny-llama-tied");
  EXPECT_EQ(all["models"][4]["type"], "q4_K_M");
}

}  // namespace
}  // namespace minfer
