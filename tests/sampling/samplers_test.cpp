// Each sampler stage against hand-computed results on small distributions (the cases of llama.cpp's
// test-sampling.cpp where they apply), plus statistical checks of the random stages with fixed seeds.
#include <gtest/gtest.h>

#include <cmath>

#include "sampling/samplers/samplers.h"

namespace minfer::sampling {
namespace {

Candidates from_probs(const std::vector<float>& probs) {
  Candidates c;
  for (size_t i = 0; i < probs.size(); ++i)
    c.data.push_back({static_cast<int32_t>(i), std::log(probs[i]), 0.0f});
  return c;
}

// Renormalised probabilities in descending order, the shape llama.cpp's tests compare.
std::vector<float> probs_desc(Candidates c) {
  softmax(c, true);
  std::vector<float> p;
  for (const TokenData& t : c.data) p.push_back(t.p);
  return p;
}

void expect_probs(const Candidates& c, const std::vector<float>& expected) {
  const std::vector<float> got = probs_desc(c);
  ASSERT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], expected[i], 1e-5f) << "index " << i;
}

TEST(Samplers, TopK) {
  Candidates c = from_probs({0.1f, 0.2f, 0.3f, 0.4f});
  top_k(c, 1);
  expect_probs(c, {1.0f});
  c = from_probs({0.1f, 0.2f, 0.3f, 0.4f});
  top_k(c, 3);
  expect_probs(c, {4 / 9.0f, 3 / 9.0f, 2 / 9.0f});
  EXPECT_EQ(c.data[0].id, 3);
  c = from_probs({0.1f, 0.2f, 0.3f, 0.4f});
  top_k(c, 0);  // off
  expect_probs(c, {0.4f, 0.3f, 0.2f, 0.1f});
  c = from_probs({0.1f, 0.2f, 0.3f, 0.4f});
  top_k(c, 10);  // larger than the list
  EXPECT_EQ(c.size(), 4u);
}

TEST(Samplers, TopP) {
  Candidates c = from_probs({0.1f, 0.2f, 0.3f, 0.4f});
  top_p(c, 0.0f, 1);
  expect_probs(c, {1.0f});
  c = from_probs({0.1f, 0.2f, 0.3f, 0.4f});
  top_p(c, 0.65f, 1);
  expect_probs(c, {4 / 7.0f, 3 / 7.0f});
  c = from_probs({0.1f, 0.2f, 0.3f, 0.4f});
  top_p(c, 0.8f, 1);
  expect_probs(c, {4 / 9.0f, 3 / 9.0f, 2 / 9.0f});
  c = from_probs({0.1f, 0.2f, 0.3f, 0.4f});
  top_p(c, 1.0f, 1);
  EXPECT_EQ(c.size(), 4u);
  c = from_probs({0.1f, 0.2f, 0.3f, 0.4f});
  top_p(c, 0.0f, 3);  // min_keep wins
  EXPECT_EQ(c.size(), 3u);
}

TEST(Samplers, MinP) {
  Candidates c = from_probs({0.1f, 0.2f, 0.3f, 0.4f});
  min_p(c, 0.76f, 1);  // keeps p >= 0.304
  expect_probs(c, {1.0f});
  c = from_probs({0.1f, 0.2f, 0.3f, 0.4f});
  min_p(c, 0.5f, 1);  // keeps p >= 0.2
  expect_probs(c, {4 / 9.0f, 3 / 9.0f, 2 / 9.0f});
  c = from_probs({0.1f, 0.2f, 0.3f, 0.4f});
  min_p(c, 0.0f, 1);
  EXPECT_EQ(c.size(), 4u);
  c = from_probs({0.1f, 0.2f, 0.3f, 0.4f});
  min_p(c, 1.0f, 2);  // min_keep 2 falls back to the sorted path
  expect_probs(c, {4 / 7.0f, 3 / 7.0f});
}

TEST(Samplers, Typical) {
  Candidates c = from_probs({0.97f, 0.01f, 0.01f, 0.01f});
  typical(c, 0.5f, 1);
  expect_probs(c, {1.0f});
  EXPECT_EQ(c.data[0].id, 0);
  // Entropy 1.332 nats; -ln 0.2 = 1.609 is closer than -ln 0.4 = 0.916, so the three 0.2s go first.
  c = from_probs({0.4f, 0.2f, 0.2f, 0.2f});
  typical(c, 0.5f, 1);
  expect_probs(c, {1 / 3.0f, 1 / 3.0f, 1 / 3.0f});
  for (const TokenData& t : c.data) EXPECT_NE(t.id, 0);
}

TEST(Samplers, Xtc) {
  Rng rng(1);
  Candidates c = from_probs({0.4f, 0.3f, 0.2f, 0.1f});
  xtc(c, 1.0f, 0.25f, 1, rng);  // 0.4 and 0.3 pass the threshold: all but the last of them go
  expect_probs(c, {0.5f, 2 / 6.0f, 1 / 6.0f});
  EXPECT_EQ(c.data[0].id, 1);
  c = from_probs({0.4f, 0.3f, 0.2f, 0.1f});
  xtc(c, 1.0f, 0.35f, 1, rng);  // only one passes: nothing removed
  EXPECT_EQ(c.size(), 4u);
  c = from_probs({0.4f, 0.3f, 0.2f, 0.1f});
  xtc(c, 0.0f, 0.1f, 1, rng);  // off
  EXPECT_EQ(c.size(), 4u);
  // With probability 0.5 about half of the calls remove the head.
  int removed = 0;
  for (int i = 0; i < 4000; ++i) {
    c = from_probs({0.4f, 0.3f, 0.2f, 0.1f});
    xtc(c, 0.5f, 0.25f, 1, rng);
    removed += c.size() == 3 ? 1 : 0;
  }
  EXPECT_NEAR(removed / 4000.0, 0.5, 0.03);
}

TEST(Samplers, Temperature) {
  Candidates c = from_probs({0.1f, 0.2f, 0.3f, 0.4f});
  temperature(c, 0.0f);
  expect_probs(c, {1.0f, 0.0f, 0.0f, 0.0f});
  c = from_probs({0.1f, 0.2f, 0.3f, 0.4f});
  temperature(c, 0.5f);  // p^2 renormalised
  expect_probs(c, {0.16f / 0.30f, 0.09f / 0.30f, 0.04f / 0.30f, 0.01f / 0.30f});
}

TEST(Samplers, Penalties) {
  Candidates c;
  c.data = {{0, 2.0f, 0}, {1, -1.0f, 0}, {2, 3.0f, 0}};
  Penalties rep(64, 2.0f, 0.0f, 0.0f);
  rep.accept(0);
  rep.accept(1);
  rep.apply(c);
  EXPECT_FLOAT_EQ(c.data[0].logit, 1.0f);   // positive: divided
  EXPECT_FLOAT_EQ(c.data[1].logit, -2.0f);  // negative: multiplied
  EXPECT_FLOAT_EQ(c.data[2].logit, 3.0f);

  c.data = {{0, 2.0f, 0}, {1, -1.0f, 0}, {2, 3.0f, 0}};
  Penalties fp(64, 1.0f, 0.5f, 1.0f);
  for (int32_t t : {0, 0, 1}) fp.accept(t);
  fp.apply(c);
  EXPECT_FLOAT_EQ(c.data[0].logit, 2.0f - 2 * 0.5f - 1.0f);
  EXPECT_FLOAT_EQ(c.data[1].logit, -1.0f - 0.5f - 1.0f);
  EXPECT_FLOAT_EQ(c.data[2].logit, 3.0f);

  // Window of 2: the first token falls out.
  c.data = {{0, 2.0f, 0}, {1, -1.0f, 0}, {2, 3.0f, 0}};
  Penalties win(2, 1.0f, 0.0f, 1.0f);
  for (int32_t t : {0, 1, 2}) win.accept(t);
  win.apply(c);
  EXPECT_FLOAT_EQ(c.data[0].logit, 2.0f);
  EXPECT_FLOAT_EQ(c.data[1].logit, -2.0f);
  EXPECT_FLOAT_EQ(c.data[2].logit, 2.0f);
  EXPECT_FALSE(Penalties(64, 1.0f, 0.0f, 0.0f).active());
  EXPECT_FALSE(Penalties(0, 2.0f, 0.0f, 0.0f).active());
}

VocabView letters_vocab() {
  VocabView v;
  v.token_bytes = {"a", "b", "c", "d", "x", "b:"};
  return v;
}

Candidates flat(int n) {
  Candidates c;
  for (int i = 0; i < n; ++i) c.data.push_back({i, 0.0f, 0.0f});
  return c;
}

TEST(Samplers, DryPenalisesTheTokenThatExtendsARepeat) {
  const VocabView vocab = letters_vocab();
  SamplerConfig cfg;
  cfg.dry_multiplier = 1.0f;
  cfg.dry_base = 2.0f;
  cfg.dry_allowed_length = 2;
  Dry dry(cfg, vocab);
  for (int32_t t : {0, 1, 2, 3, 0, 1, 2}) dry.accept(t);  // a b c d a b c
  Candidates c = flat(6);
  dry.apply(c);
  // "a b c" (3 tokens) was followed by d: d would extend a repeat of length 3 -> 1 * 2^(3-2).
  EXPECT_FLOAT_EQ(c.data[3].logit, -2.0f);
  for (int i : {0, 1, 2, 4, 5}) EXPECT_FLOAT_EQ(c.data[static_cast<size_t>(i)].logit, 0.0f) << i;

  // Exactly allowed_length: multiplier * base^0.
  Dry dry2(cfg, vocab);
  for (int32_t t : {0, 1, 4, 0, 1}) dry2.accept(t);  // a b x a b
  c = flat(6);
  dry2.apply(c);
  EXPECT_FLOAT_EQ(c.data[4].logit, -1.0f);
  EXPECT_FLOAT_EQ(c.data[0].logit, 0.0f);
}

TEST(Samplers, DrySequenceBreakerLimitsTheLookback) {
  const VocabView vocab = letters_vocab();
  SamplerConfig cfg;
  cfg.dry_multiplier = 1.0f;
  cfg.dry_base = 2.0f;
  cfg.dry_allowed_length = 2;
  // Token 5 "b:" contains the default breaker ":".
  Dry dry(cfg, vocab);
  for (int32_t t : {0, 5, 2, 3, 0, 5, 2}) dry.accept(t);
  Candidates c = flat(6);
  dry.apply(c);
  for (const TokenData& t : c.data) EXPECT_FLOAT_EQ(t.logit, 0.0f);  // limit 1 < allowed length
  cfg.dry_sequence_breakers.clear();
  Dry no_breakers(cfg, vocab);
  for (int32_t t : {0, 5, 2, 3, 0, 5, 2}) no_breakers.accept(t);
  c = flat(6);
  no_breakers.apply(c);
  EXPECT_FLOAT_EQ(c.data[3].logit, -2.0f);
}

TEST(Samplers, DryBreakerSpanningTwoTokensNeedsTheTokenizer) {
  // Breaker "yz" starts inside token 4 "xy" and ends with token 5 "z" (llama.cpp's head + tail form).
  VocabView vocab;
  vocab.token_bytes = {"a", "b", "c", "d", "xy", "z"};
  SamplerConfig cfg;
  cfg.dry_multiplier = 1.0f;
  cfg.dry_base = 2.0f;
  cfg.dry_allowed_length = 2;
  cfg.dry_sequence_breakers = {"yz"};
  const std::vector<int32_t> history = {4, 5, 2, 3, 4, 5, 2};  // xy z c d xy z c
  {
    Dry dry(cfg, vocab);  // no tokenize: the breaker is invisible, d extends "xy z c"
    for (int32_t t : history) dry.accept(t);
    Candidates c = flat(6);
    dry.apply(c);
    EXPECT_FLOAT_EQ(c.data[3].logit, -2.0f);
  }
  vocab.tokenize = [](std::string_view text) {
    return text == "z" ? std::vector<int32_t>{5} : std::vector<int32_t>{};
  };
  Dry dry(cfg, vocab);  // the recent "xy z" restarts: limit 1 < allowed length, no penalty
  for (int32_t t : history) dry.accept(t);
  Candidates c = flat(6);
  dry.apply(c);
  for (const TokenData& t : c.data) EXPECT_FLOAT_EQ(t.logit, 0.0f);
}

TEST(Samplers, MirostatV2TruncatesBySurpriseAndAdaptsMu) {
  // Surprises (bits): 1, 2, 3, 3. tau 1 -> mu 2 keeps the first two: 2/3 and 1/3.
  int first = 0;
  const int n = 6000;
  for (int seed = 0; seed < n; ++seed) {
    Rng rng(static_cast<uint64_t>(seed));
    Mirostat m(2, 1.0f, 0.1f, 100, 4);
    Candidates c = from_probs({0.5f, 0.25f, 0.125f, 0.125f});
    const size_t idx = m.sample(c, rng);
    ASSERT_LT(c.data[idx].id, 2);
    if (c.data[idx].id == 0) {
      ++first;
      EXPECT_NEAR(m.mu(), 2.0f - 0.1f * (-std::log2(2 / 3.0f) - 1.0f), 1e-5f);
    } else {
      EXPECT_NEAR(m.mu(), 2.0f - 0.1f * (-std::log2(1 / 3.0f) - 1.0f), 1e-5f);
    }
  }
  EXPECT_NEAR(first / static_cast<double>(n), 2 / 3.0, 0.02);
}

TEST(Samplers, MirostatV1KeepsTheTopOfAPeakedDistribution) {
  Rng rng(3);
  Mirostat m(1, 0.5f, 0.1f, 100, 4);
  Candidates c = from_probs({0.001f, 0.001f, 0.001f, 0.997f});
  const size_t idx = m.sample(c, rng);
  EXPECT_EQ(c.data[idx].id, 3);
  EXPECT_LT(m.mu(), 1.0f + 0.06f);  // surprise ~0 < tau: mu grows by eta * tau at most
  EXPECT_GT(m.mu(), 1.0f);
}

TEST(Samplers, DrawMatchesTheDistribution) {
  Rng rng(42);
  const std::vector<float> p = {0.1f, 0.2f, 0.3f, 0.4f};
  std::vector<int> counts(4, 0);
  const int n = 40000;
  for (int i = 0; i < n; ++i) {
    Candidates c = from_probs(p);
    ++counts[static_cast<size_t>(c.data[draw_index(c, rng)].id)];
  }
  for (size_t i = 0; i < 4; ++i) EXPECT_NEAR(counts[i] / static_cast<double>(n), p[i], 0.01) << i;
}

TEST(Samplers, DrawNeverPicksMinusInfinity) {
  Rng rng(7);
  for (int i = 0; i < 1000; ++i) {
    Candidates c;
    c.data = {{0, -INFINITY, 0}, {1, 0.0f, 0}, {2, -INFINITY, 0}};
    EXPECT_EQ(c.data[draw_index(c, rng)].id, 1);
  }
}

}  // namespace
}  // namespace minfer::sampling
