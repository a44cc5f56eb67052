// The Sampler pipeline: stage order, greedy, determinism per seed, the pinned default sequence, logit
// bias, grammar masking inside the pipeline and its refusals.
#include <gtest/gtest.h>

#include <cmath>

#include "core/rng.h"
#include "sampling/sampler.h"

namespace minfer::sampling {
namespace {

std::shared_ptr<const VocabView> byte_vocab() {
  // Ids 0..127: one ASCII byte each; 128: "ab"; 129: EOG (empty bytes).
  auto v = std::make_shared<VocabView>();
  for (int i = 0; i < 128; ++i) v->token_bytes.emplace_back(1, static_cast<char>(i));
  v->token_bytes.emplace_back("ab");
  v->token_bytes.emplace_back();
  v->eog_ids = {129};
  return v;
}

std::vector<float> random_logits(uint64_t seed, size_t n) {
  Rng rng(seed);
  std::vector<float> l(n);
  for (float& x : l) x = static_cast<float>(rng.normal()) * 2.0f;
  return l;
}

Sampler make(const SamplerConfig& cfg, std::shared_ptr<const VocabView> vocab = byte_vocab()) {
  auto s = Sampler::create(cfg, std::move(vocab));
  EXPECT_TRUE(s.ok()) << s.status().message();
  return std::move(s).value();
}

TEST(Sampler, GreedyIsArgmaxWithLowerIdOnTies) {
  SamplerConfig cfg;
  cfg.temp = 0.0f;
  Sampler s = make(cfg);
  std::vector<float> l(130, 0.0f);
  l[70] = 5.0f;
  l[90] = 5.0f;
  EXPECT_EQ(*s.sample(l), 70);
}

TEST(Sampler, LogitBiasChangesTheChoice) {
  SamplerConfig cfg;
  cfg.temp = 0.0f;
  cfg.logit_bias = {{3, 10.0f}};
  Sampler s = make(cfg);
  std::vector<float> l(130, 0.0f);
  l[70] = 5.0f;
  EXPECT_EQ(*s.sample(l), 3);
}

TEST(Sampler, RepeatPenaltyAppliesBeforeGreedy) {
  SamplerConfig cfg;
  cfg.temp = 0.0f;
  cfg.repeat_penalty = 4.0f;
  Sampler s = make(cfg);
  std::vector<float> l(130, 0.0f);
  l[70] = 4.0f;
  l[71] = 3.0f;
  s.accept(70);
  EXPECT_EQ(*s.sample(l), 71);  // 4 / 4 = 1 < 3
}

TEST(Sampler, SameSeedSameRunDifferentSeedDifferentRun) {
  SamplerConfig cfg;
  cfg.top_k = 0;
  cfg.top_p = 1.0f;
  cfg.temp = 1.5f;
  auto run = [&](uint64_t seed) {
    cfg.seed = seed;
    Sampler s = make(cfg);
    std::vector<int32_t> out;
    for (int i = 0; i < 50; ++i) {
      std::vector<float> l = random_logits(static_cast<uint64_t>(i), 130);
      out.push_back(*s.sample(l));
      s.accept(out.back());
    }
    return out;
  };
  EXPECT_EQ(run(1), run(1));
  EXPECT_NE(run(1), run(2));
}

TEST(Sampler, DefaultPipelineIsPinned) {
  // The default config (temp 0.8, top-k 40, top-p 0.95, everything else off) with seed 1234 on fixed
  // logits. A change here changes every default run: update only on purpose.
  SamplerConfig cfg;
  cfg.seed = 1234;
  Sampler s = make(cfg);
  std::vector<int32_t> got;
  for (int i = 0; i < 16; ++i) {
    std::vector<float> l = random_logits(100 + static_cast<uint64_t>(i), 130);
    got.push_back(*s.sample(l));
    s.accept(got.back());
  }
  const std::vector<int32_t> pinned = {13, 82, 118, 26, 112, 67, 32, 112, 100, 93, 91, 31, 71, 27, 41, 106};
  EXPECT_EQ(got, pinned);
}

TEST(Sampler, TemperatureOneSamplesTheSoftmax) {
  SamplerConfig cfg;
  cfg.seed = 9;
  cfg.top_k = 0;
  cfg.top_p = 1.0f;
  cfg.temp = 2.0f;
  Sampler s = make(cfg);
  std::vector<float> base(130, -INFINITY);
  base[10] = std::log(0.1f) * 2.0f;  // temp 2 halves the logits back to log p
  base[11] = std::log(0.3f) * 2.0f;
  base[12] = std::log(0.6f) * 2.0f;
  std::vector<int> counts(3, 0);
  const int n = 20000;
  for (int i = 0; i < n; ++i) {
    std::vector<float> l = base;
    ++counts[static_cast<size_t>(*s.sample(l) - 10)];
  }
  EXPECT_NEAR(counts[0] / static_cast<double>(n), 0.1, 0.01);
  EXPECT_NEAR(counts[1] / static_cast<double>(n), 0.3, 0.012);
  EXPECT_NEAR(counts[2] / static_cast<double>(n), 0.6, 0.012);
}

TEST(Sampler, TopKOneIsGreedyAtAnyTemperature) {
  SamplerConfig cfg;
  cfg.top_k = 1;
  cfg.temp = 5.0f;
  cfg.seed = 3;
  Sampler s = make(cfg);
  for (int i = 0; i < 20; ++i) {
    std::vector<float> l = random_logits(static_cast<uint64_t>(i), 130);
    const auto best = static_cast<int32_t>(std::max_element(l.begin(), l.end()) - l.begin());
    EXPECT_EQ(*s.sample(l), best);
  }
}

TEST(Sampler, GreedyRespectsTheGrammarMask) {
  SamplerConfig cfg;
  cfg.temp = 0.0f;
  cfg.grammar = "root ::= \"ab\" [0-9]";
  Sampler s = make(cfg);
  std::vector<float> l(130, 0.0f);
  l['z'] = 10.0f;  // best raw logit but not allowed
  l['a'] = 1.0f;
  l[128] = 2.0f;  // "ab" as one token
  EXPECT_EQ(*s.sample(l), 128);
  s.accept(128);
  EXPECT_FALSE(s.grammar_accepting());
  l.assign(130, 0.0f);
  l[129] = 50.0f;  // EOG not allowed yet
  l['7'] = 1.0f;
  EXPECT_EQ(*s.sample(l), '7');
  s.accept('7');
  EXPECT_TRUE(s.grammar_accepting());
  l.assign(130, 0.0f);
  EXPECT_EQ(*s.sample(l), 129);  // only EOG is left
}

TEST(Sampler, NoAllowedTokenIsAnErrorNotAToken) {
  SamplerConfig cfg;
  cfg.temp = 0.0f;
  cfg.grammar = "root ::= \"a\" [\\u00e9]";  // é is two bytes, and no token provides them
  Sampler s = make(cfg);
  std::vector<float> l(130, 0.0f);
  ASSERT_EQ(*s.sample(l), 'a');
  s.accept('a');
  auto r = s.sample(l);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("no token"), std::string::npos) << r.status().message();
}

TEST(Sampler, RejectedAcceptIsReportedByTheNextSample) {
  SamplerConfig cfg;
  cfg.grammar = "root ::= \"a\"+";
  Sampler s = make(cfg);
  s.accept('b');
  std::vector<float> l(130, 0.0f);
  auto r = s.sample(l);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("rejected"), std::string::npos) << r.status().message();
}

TEST(Sampler, CreateRefusesBadGrammarAndConfig) {
  SamplerConfig cfg;
  cfg.grammar = "root ::= undefined-rule";
  auto r = Sampler::create(cfg, byte_vocab());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("undefined-rule"), std::string::npos);
  cfg = {};
  cfg.top_p = -1.0f;
  EXPECT_FALSE(Sampler::create(cfg, byte_vocab()).ok());
  cfg = {};
  std::vector<float> wrong(5, 0.0f);
  Sampler s = make(cfg);
  EXPECT_FALSE(s.sample(wrong).ok());
}

TEST(Sampler, IsMovable) {
  SamplerConfig cfg;
  cfg.seed = 5;
  cfg.grammar = "root ::= [a-c]+";
  Sampler a = make(cfg);
  Sampler b = std::move(a);
  std::vector<float> l(130, 0.0f);
  const int32_t t = *b.sample(l);
  EXPECT_TRUE(t == 'a' || t == 'b' || t == 'c' || t == 128);
}

TEST(Sampler, MirostatRunsAndIsSeeded) {
  SamplerConfig cfg;
  cfg.mirostat = 2;
  cfg.seed = 11;
  Sampler a = make(cfg);
  Sampler b = make(cfg);
  for (int i = 0; i < 20; ++i) {
    std::vector<float> l = random_logits(static_cast<uint64_t>(i), 130);
    std::vector<float> l2 = l;
    const int32_t x = *a.sample(l);
    EXPECT_EQ(x, *b.sample(l2));
    a.accept(x);
    b.accept(x);
  }
}

}  // namespace
}  // namespace minfer::sampling
