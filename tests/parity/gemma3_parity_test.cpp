// Parity with llama.cpp on the `gemma3` architecture, self-contained: tiny random-weight gemma3 models are
// generated in-test (tools::make_synthetic_model, fixed preset / type / seed) and compared with llama.cpp's
// outputs on the same files, recorded once in tests/parity/gemma3/refs.json by make_refs.py (the command is
// in its header) through ../shared/peer. Covered: the sqrt(n_embd) embedding scale, pre- and post-norms,
// per-head q/k norm, GeGLU with ggml's GELU, sliding-window attention on the local layers (window 8, every
// prompt longer) with their own RoPE base, the global layer's RoPE base with linear scaling, the tied output
// head, final logit soft-capping (tiny-gemma3-softcap), f32 / q8_0 / q4_0 / q4_K_M weights. ctest runs the
// cases at the best kernel level and again with MINFER_CPU_ISA=avx2 (the `.avx2` suffix).
#include "parity/synthetic_parity.h"

namespace minfer {
namespace {

using nlohmann::json;

// Tolerance on max |log-softmax difference| (the last two prompt positions), and the top-1/top-2 gap under
// which a greedy step counts as a near-tie (where the comparison stops): the rule of the llama parity
// (tests/parity/llama_parity_test.cpp, where the causes are explained): max(2 x llama.cpp's own batch vs
// token-by-token floor, 0.05 for f32 weights, 0.5 for quantized ones). A window off by one position, a
// local layer rotated with the global base or a missing post-norm moves log-softmax values by units.
class Gemma3Parity : public ::testing::TestWithParam<int> {};

TEST_P(Gemma3Parity, LogitsAndGreedyMatchLlamaCpp) {
  const json all = test::read_refs(MINFER_GEMMA3_REFS);
  test::check_synthetic_parity(all.at("models").at(static_cast<size_t>(GetParam())), "gemma3", 0.05, 0.5);
}

constexpr const char* kCaseNames[] = {"tiny_gemma3_f32", "tiny_gemma3_q8_0", "tiny_gemma3_q4_0",
                                      "tiny_gemma3_q4_K_M", "tiny_gemma3_softcap_f32"};

INSTANTIATE_TEST_SUITE_P(Refs, Gemma3Parity, ::testing::Range(0, 5),
                         [](const auto& param_info) { return std::string(kCaseNames[param_info.param]); });

TEST(Gemma3ParityFixture, ListsTheFiveModelsWithPromptsLongerThanTheWindow) {
  const json all = test::read_refs(MINFER_GEMMA3_REFS);
  ASSERT_EQ(all.at("models").size(), 5u);
  EXPECT_EQ(all["models"][0]["preset"], "tiny-gemma3");
  EXPECT_EQ(all["models"][3]["type"], "q4_K_M");
  EXPECT_EQ(all["models"][4]["preset"], "tiny-gemma3-softcap");
  const tools::SyntheticShape shape = *tools::synthetic_preset("tiny-gemma3");
  EXPECT_GE(shape.n_layer, 7u);  // local layers 0-4 and 6, global layer 5
  for (const json& p : all["models"][0]["prompts"]) {
    EXPECT_GT(p.at("prompt_ids").size(), shape.n_swa) << p.at("text");
  }
}

}  // namespace
}  // namespace minfer
