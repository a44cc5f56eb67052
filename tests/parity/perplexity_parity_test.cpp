// Perplexity and KL divergence against llama.cpp on the shared fixture models: the reference numbers in
// tests/parity/perplexity/refs.json were computed by make_refs.py (the command is in its header) from the
// llama.cpp peer's per-token log-softmax, with llama-perplexity's definitions, on text.txt with n_ctx 128.
// Here the same chunks run through apps/perplexity (evaluate_chunks, token_nll, the 16-bit base rows,
// KldSums) and every scored token's NLL, the PPL and the KLD statistics are compared with them.
#include <cmath>
#include <fstream>
#include <map>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "apps/perplexity.h"
#include "apps/perplexity_base_file.h"
#include "common/fixtures.h"
#include "engine/engine.h"

namespace minfer {
namespace {

using nlohmann::json;

json refs() {
  std::ifstream in(MINFER_PERPLEXITY_REFS);
  EXPECT_TRUE(in.good()) << MINFER_PERPLEXITY_REFS;
  std::stringstream ss;
  ss << in.rdbuf();
  return json::parse(ss.str());
}

std::string text() {
  std::ifstream in(MINFER_PERPLEXITY_TEXT, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Tolerances, from the logits tolerance the fixtures document (../shared/fixtures/README.md, "Noise floor",
// and tests/parity/llama_parity_test.cpp, which uses the same bounds for log-softmax on the peer):
// - per token, |NLL - NLL_llama| is a log-softmax difference at one position: 0.05 for f32 weights (llama.cpp
//   rounds Q to f16 in its flash attention on the f16 cache and sums in another order), 0.5 for quantized
//   weights (8-bit activation roundings flipped by 1-ulp differences, amplified by random weights);
// - ln PPL is the mean of the NLLs, so it is within the same bound. Measured (MINFER_PARITY_REPORT=1 prints
//   them): max per-token difference 0.0065 / 0.011 (qwen3 / qwen2 f32), 0.25 (q8_0), 0.28 (q4_0); ln PPL
//   3.5e-5 / 3.4e-4 (f32), 2.4e-3 (q8_0), 6.3e-3 (q4_0): the per-token differences mostly cancel.
double tolerance(const std::string& model) {
  return model.find("f32") != std::string::npos ? 0.05 : 0.5;
}

struct Scored {
  std::vector<double> nll;
  std::vector<std::vector<uint8_t>> rows;  // encoded base rows, when asked
};

struct Sink : apps::RowSink {
  int32_t n_vocab = 0;
  bool encode = false;
  const std::vector<std::vector<uint8_t>>* base = nullptr;
  Scored out;
  apps::KldSums kld;
  Status on_row(int32_t, int32_t, const float* logits, int32_t target) override {
    out.nll.push_back(apps::token_nll(logits, n_vocab, target));
    if (encode) {
      out.rows.emplace_back(apps::base_row_bytes(n_vocab));
      apps::encode_base_row(logits, n_vocab, target, out.rows.back().data());
    }
    if (base != nullptr) kld.add(logits, n_vocab, (*base)[out.nll.size() - 1].data(), target);
    return {};
  }
  Status on_chunk_end(int32_t) override { return {}; }
};

std::unique_ptr<engine::Engine> load(const std::string& name, int32_t n_ctx) {
  engine::EngineOptions options;
  options.n_ctx = n_ctx;
  options.n_threads = 1;            // ctest runs binaries in parallel
  options.cache_type = DType::F16;  // the peer's KV cache type
  auto e = engine::Engine::load(test::fixture_path("models/" + name + ".gguf"), options);
  EXPECT_TRUE(e.ok()) << e.status().message();
  return e.ok() ? std::move(*e) : nullptr;
}

void report(const std::string& what, double got, double want) {
  if (std::getenv("MINFER_PARITY_REPORT") != nullptr) {
    std::printf("perplexity parity %-40s minfer %.6g llama.cpp %.6g diff %.3g\n", what.c_str(), got, want,
                got - want);
  }
}

TEST(PerplexityParity, PplAndKldEqualLlamaCppsOnTheFixtureModels) {
  MINFER_REQUIRE_FIXTURES();
  const json r = refs();
  const auto n_ctx = r.at("n_ctx").get<int32_t>();
  const std::string body = text();
  ASSERT_FALSE(body.empty());
  std::map<std::string, Scored> scored;
  const std::string base_name = r.at("base");
  for (const json& m : r.at("models")) {
    const std::string name = m.at("model");
    SCOPED_TRACE(name);
    auto e = load(name, n_ctx);
    ASSERT_TRUE(e);
    const tokenizer::Tokenizer& tok = e->tokenizer();
    ASSERT_FALSE(tok.add_bos());  // the fixture vocabularies add no BOS, as llama.cpp also sees them
    const std::vector<int32_t> ids = tok.encode(body, /*add_special=*/false, /*parse_special=*/false);
    ASSERT_EQ(ids, m.at("tokens").get<std::vector<int32_t>>()) << "tokenization differs from llama.cpp's";
    auto plan = apps::plan_chunks(static_cast<int64_t>(ids.size()), n_ctx, -1);
    ASSERT_TRUE(plan.ok()) << plan.status().message();
    ASSERT_EQ(plan->n_chunk, m.at("n_chunk").get<int32_t>());

    Sink sink;
    sink.n_vocab = e->n_vocab();
    sink.encode = name == base_name;
    if (m.contains("kld_vs_base")) sink.base = &scored.at(base_name).rows;
    apps::EvalOptions eval;  // one chunk per forward, like the peer's one-batch evaluation
    ASSERT_TRUE(apps::evaluate_chunks(*e, ids, *plan, eval, sink).ok());

    const std::vector<double> want_nll = m.at("nll");
    ASSERT_EQ(sink.out.nll.size(), want_nll.size());
    const double tol = tolerance(name);
    double worst = 0;
    for (size_t i = 0; i < want_nll.size(); ++i)
      worst = std::max(worst, std::abs(sink.out.nll[i] - want_nll[i]));
    EXPECT_LE(worst, tol) << "max |NLL - llama.cpp's| over " << want_nll.size() << " tokens";
    report(name + " max token NLL diff", worst, 0);

    apps::NllSums sums;
    const std::vector<double> running = m.at("running_ppl");
    for (size_t i = 0; i < sink.out.nll.size(); ++i) {
      sums.add(sink.out.nll[i]);
      if ((i + 1) % static_cast<size_t>(plan->n_scored) == 0) {
        const size_t chunk = i / static_cast<size_t>(plan->n_scored);
        EXPECT_NEAR(std::log(sums.ppl()), std::log(running.at(chunk)), tol) << "chunk " << chunk + 1;
      }
    }
    const double want_ppl = m.at("ppl");
    EXPECT_NEAR(std::log(sums.ppl()), std::log(want_ppl), tol);
    report(name + " PPL", sums.ppl(), want_ppl);
    // The +/- is a standard error of the NLLs: relative to PPL it moves with their spread only.
    EXPECT_NEAR(sums.ppl_uncertainty() / sums.ppl(), m.at("ppl_uncertainty").get<double>() / want_ppl, 0.01);

    if (m.contains("kld_vs_base")) {
      const json& k = m.at("kld_vs_base");
      const apps::KldStats st = apps::kld_stats(sink.kld);
      ASSERT_EQ(st.count, k.at("count").get<int64_t>());
      // KLD = sum_i p_base (ln p_base - ln q): a log-probability difference on either side moves it by at
      // most that difference (p_base sums to <= 1), so both models' tolerances add up.
      const double kld_tol = tolerance(base_name) + tol;
      EXPECT_NEAR(st.kld.mean, k.at("kld_mean").get<double>(), kld_tol);
      EXPECT_NEAR(st.kld_median, k.at("kld_median").get<double>(), kld_tol);
      EXPECT_NEAR(st.ln_ppl_ratio.mean, k.at("ln_ppl_ratio").get<double>(), kld_tol);
      EXPECT_NEAR(std::log(st.ppl_base.mean), std::log(k.at("ppl_base").get<double>()), tolerance(base_name));
      // Top-token agreement and RMS Δp: near-ties may flip within the tolerance; a few percent is that.
      EXPECT_NEAR(st.same_top.mean, k.at("same_top_p").get<double>(), 0.05);
      EXPECT_NEAR(st.rms_p_diff.mean, k.at("rms_p_diff").get<double>(), 0.05);
      report(name + " mean KLD vs " + base_name, st.kld.mean, k.at("kld_mean").get<double>());
      report(name + " median KLD", st.kld_median, k.at("kld_median").get<double>());
      report(name + " same top p", st.same_top.mean, k.at("same_top_p").get<double>());
      report(name + " RMS dp", st.rms_p_diff.mean, k.at("rms_p_diff").get<double>());
    }
    scored[name] = std::move(sink.out);
  }
}

// A base file from one vocabulary is refused for a model of another, even of the same size: qwen2-mini and
// qwen3-mini both have 4096 ids, but 4022..4025 are <tool_response>..</think> in one and padding in the
// other.
TEST(PerplexityParity, ABaseFileFromAnotherVocabularyOfTheSameSizeIsRefused) {
  MINFER_REQUIRE_FIXTURES();
  auto qwen3 = load("qwen3-mini-f32", 128);
  auto qwen2 = load("qwen2-mini-f32", 128);
  ASSERT_TRUE(qwen3 && qwen2);
  ASSERT_EQ(qwen3->n_vocab(), qwen2->n_vocab());
  apps::KldBaseInfo info;
  info.n_ctx = 8;
  info.n_vocab = qwen3->n_vocab();
  info.n_chunk = 1;
  info.n_scored = 3;
  info.vocab_hash = apps::vocab_hash(qwen3->tokenizer());
  info.tokens.assign(8, 1);
  const std::string path = test::temp_dir() + "/qwen3.kld";
  auto w = apps::KldBaseWriter::create(path, info);
  ASSERT_TRUE(w.ok());
  ASSERT_TRUE(w->write_chunk(std::vector<uint8_t>(3 * apps::base_row_bytes(info.n_vocab))).ok());
  ASSERT_TRUE(w->finish().ok());
  auto r = apps::KldBaseReader::open(path);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_TRUE(r->check({.n_vocab = qwen3->n_vocab(),
                        .vocab_hash = apps::vocab_hash(qwen3->tokenizer()),
                        .n_ctx = {},
                        .text_hash = {}})
                  .ok());
  const Status refused = r->check({.n_vocab = qwen2->n_vocab(),
                                   .vocab_hash = apps::vocab_hash(qwen2->tokenizer()),
                                   .n_ctx = {},
                                   .text_hash = {}});
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.message().find("another vocabulary"), std::string::npos) << refused.message();
}

}  // namespace
}  // namespace minfer
