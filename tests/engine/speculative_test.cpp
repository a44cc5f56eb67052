// Speculative decoding: greedy output identical to generate() with any drafter (the target itself, other
// weights, prompt lookup), stop rules crossing a round, the cache holding exactly the accepted tokens, a
// vocabulary mismatch refused by name, and sampled output following the target's distribution (chi-square).
#include <gtest/gtest.h>

#include <map>

#include <nlohmann/json.hpp>

#include "engine/speculative.h"
#include "tiny_model.h"

namespace minfer::engine {
namespace {

EngineOptions opts() {
  EngineOptions o;
  o.n_ctx = 256;
  o.n_threads = 1;
  return o;
}

std::string model_with_seed(uint64_t seed) {
  tools::SyntheticOptions options;
  options.shape = *tools::synthetic_preset("tiny-qwen2");
  options.seed = seed;
  auto writer = tools::make_synthetic_model(options);
  EXPECT_TRUE(writer.ok());
  const std::string path = test::temp_dir() + "/spec-tiny-" + std::to_string(seed) + ".gguf";
  EXPECT_TRUE(writer->write(path).ok());
  return path;
}

std::unique_ptr<Engine> load(const std::string& path) {
  auto e = Engine::load(path, opts());
  EXPECT_TRUE(e.ok()) << e.status().message();
  return std::move(*e);
}

GenerateOptions greedy(int32_t n) {
  GenerateOptions g;
  g.n_predict = n;
  g.sampling.temp = 0.0f;
  return g;
}

std::unique_ptr<Drafter> model_drafter(const std::string& path, Engine& target) {
  auto d = ModelDrafter::create(load(path), target);
  EXPECT_TRUE(d.ok()) << d.status().message();
  return std::move(d).value();
}

const std::vector<int32_t> kPrompt = {12, 40, 77, 5, 91, 33, 12, 40, 77, 5};

GenerateResult plain(const std::string& path, const std::vector<int32_t>& prompt, const GenerateOptions& g,
                     int32_t* cache_max = nullptr) {
  auto e = load(path);
  auto r = generate(*e, prompt, g);
  EXPECT_TRUE(r.ok()) << r.status().message();
  if (cache_max != nullptr) *cache_max = e->kv().seq_pos_max(0);
  return *r;
}

TEST(Speculative, GreedyOutputEqualsPlainDecodingForEveryDrafter) {
  const std::string target_path = model_with_seed(7), other_path = model_with_seed(99);
  int32_t plain_cache = -1;
  const GenerateResult want = plain(target_path, kPrompt, greedy(40), &plain_cache);
  struct Case {
    const char* name;
    std::function<std::unique_ptr<Drafter>(Engine&)> make;
    double min_rate, max_rate;
  };
  const std::vector<Case> cases = {
      {"self", [&](Engine& t) { return model_drafter(target_path, t); }, 0.999, 1.0},
      {"other weights", [&](Engine& t) { return model_drafter(other_path, t); }, 0.0, 0.9},
      {"lookup", [](Engine&) -> std::unique_ptr<Drafter> { return std::make_unique<LookupDrafter>(); }, 0.0,
       1.0},
  };
  for (const Case& c : cases) {
    for (const SpecOptions spec : {SpecOptions{.draft_n = 1}, SpecOptions{.draft_n = 4},
                                   SpecOptions{.draft_n = 8, .adaptive = true}}) {
      auto target = load(target_path);
      auto drafter = c.make(*target);
      SpecStats stats;
      auto got = generate_speculative(*target, *drafter, kPrompt, greedy(40), spec, &stats);
      ASSERT_TRUE(got.ok()) << c.name << ": " << got.status().message();
      EXPECT_EQ(got->generated_ids, want.generated_ids) << c.name << " depth " << spec.draft_n;
      EXPECT_EQ(got->text, want.text) << c.name;
      EXPECT_EQ(got->stop_reason, want.stop_reason) << c.name;
      EXPECT_GE(stats.acceptance_rate(), c.min_rate) << c.name << ": " << stats.summary();
      EXPECT_LE(stats.acceptance_rate(), c.max_rate) << c.name << ": " << stats.summary();
      // The cache holds exactly the evaluated accepted tokens, as after plain decoding.
      EXPECT_EQ(target->kv().seq_pos_max(0), plain_cache) << c.name;
      EXPECT_EQ(static_cast<int32_t>(target->kv().seq_cells(0).size()), plain_cache + 1) << c.name;
      EXPECT_EQ(target->kv().used_cells(), plain_cache + 1)
          << c.name << ": rejected rows must leave the cache";
    }
  }
}

// Acceptance by draft position counts a position only in rounds that reached it (every earlier drafted
// token accepted), so position i's rate is conditional on the ones before it.
TEST(Speculative, StatsCountAcceptanceByDraftPosition) {
  SpecStats st;
  st.record(4, 4);  // all four accepted
  st.record(4, 1);  // first accepted, second refused: positions 3 and 4 never judged
  st.record(2, 0);  // first refused
  EXPECT_EQ(st.rounds, 3);
  EXPECT_EQ(st.drafted, 10);
  EXPECT_EQ(st.accepted, 5);
  EXPECT_EQ(st.reached_at[0], 3);
  EXPECT_EQ(st.accepted_at[0], 2);
  EXPECT_EQ(st.reached_at[1], 2);
  EXPECT_EQ(st.accepted_at[1], 1);
  EXPECT_EQ(st.reached_at[2], 1);
  EXPECT_EQ(st.accepted_at[2], 1);
  EXPECT_EQ(st.reached_at[3], 1);
  EXPECT_EQ(st.reached_at[4], 0);
  EXPECT_EQ(st.by_position(), "1: 67% (3), 2: 50% (2), 3: 100% (1), 4: 100% (1)");
  SpecStats sum;
  sum.add(st);
  sum.add(st);
  EXPECT_EQ(sum.reached_at[0], 6);
  EXPECT_EQ(sum.accepted, 10);
  EXPECT_NE(sum.summary().find("by position 1: 67% (6)"), std::string::npos) << sum.summary();
}

// Wraps a drafter and checks, at the start of every round, that the target's cache holds exactly the
// accepted history (every token but the last, which the round evaluates) and nothing else.
class CacheCheckingDrafter : public Drafter {
 public:
  CacheCheckingDrafter(Engine& target, std::unique_ptr<Drafter> inner)
      : target_(target), inner_(std::move(inner)) {}
  Status begin(std::span<const int32_t> prompt, const sampling::SamplerConfig& sampling) override {
    return inner_->begin(prompt, sampling);
  }
  Result<Draft> propose(std::span<const int32_t> history, int32_t n) override {
    ++rounds;
    const auto held = static_cast<int32_t>(history.size()) - 1;
    if (target_.kv().seq_pos_max(0) + 1 != held || target_.kv().used_cells() != held) ++mismatches;
    return inner_->propose(history, n);
  }
  int rounds = 0, mismatches = 0;

 private:
  Engine& target_;
  std::unique_ptr<Drafter> inner_;
};

TEST(Speculative, TheCacheHoldsExactlyTheAcceptedTokensAfterEveryRound) {
  const std::string target_path = model_with_seed(7), other_path = model_with_seed(99);
  auto target = load(target_path);
  CacheCheckingDrafter drafter(*target, model_drafter(other_path, *target));
  SpecStats stats;
  auto r = generate_speculative(*target, drafter, kPrompt, greedy(40), {.draft_n = 4}, &stats);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_GT(drafter.rounds, 5);
  EXPECT_LT(stats.accepted, stats.drafted) << "some proposals must be refused for this to test rollback";
  EXPECT_EQ(drafter.mismatches, 0) << "of " << drafter.rounds << " rounds";
}

TEST(Speculative, StopStringsAndTokenLimitsInsideARound) {
  const std::string path = model_with_seed(7);
  const GenerateResult full = plain(path, kPrompt, greedy(40));
  ASSERT_GE(full.generated_ids.size(), 12u);
  for (int32_t limit : {1, 2, 5, 7, 13}) {
    auto target = load(path);
    auto drafter = ModelDrafter::create(load(path), *target);
    ASSERT_TRUE(drafter.ok());
    auto got = generate_speculative(*target, **drafter, kPrompt, greedy(limit), {.draft_n = 4}, nullptr);
    ASSERT_TRUE(got.ok());
    EXPECT_EQ(got->generated_ids, plain(path, kPrompt, greedy(limit)).generated_ids) << "limit " << limit;
  }
  // A stop string taken from the middle of the output ends the text exactly where plain decoding does.
  // One whole UTF-8 character from the middle of the text.
  size_t at = full.text.size() / 2;
  while (at < full.text.size() && (static_cast<uint8_t>(full.text[at]) & 0xC0) == 0x80) ++at;
  ASSERT_LT(at, full.text.size());
  const auto lead = static_cast<uint8_t>(full.text[at]);
  const size_t len = lead < 0x80 ? 1 : lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : 2;
  const std::string stop = full.text.substr(at, len);
  GenerateOptions g = greedy(40);
  g.stop = {stop};
  const GenerateResult want = plain(path, kPrompt, g);
  auto target = load(path);
  auto drafter = ModelDrafter::create(load(path), *target);
  ASSERT_TRUE(drafter.ok());
  auto got = generate_speculative(*target, **drafter, kPrompt, g, {.draft_n = 6}, nullptr);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->stop_reason, "stop");
  EXPECT_EQ(got->text, want.text);
  EXPECT_EQ(got->generated_ids, want.generated_ids);
}

TEST(Speculative, RefusesAnotherVocabularyAndMirostat) {
  auto target = load(model_with_seed(7));
  tools::SyntheticOptions options;
  options.shape = *tools::synthetic_preset("tiny-qwen2");
  auto writer = tools::make_synthetic_model(options);
  ASSERT_TRUE(writer.ok()) << writer.status().message();
  // Same size, two special tokens swapped: the first difference must be named.
  std::vector<std::string> tokens = *writer->metadata().get_string_array("tokenizer.ggml.tokens");
  std::swap(tokens[tokens.size() - 1], tokens[tokens.size() - 2]);
  writer->metadata().set("tokenizer.ggml.tokens", gguf::Value::array(gguf::Array::of_strings(tokens)));
  const std::string path = test::temp_dir() + "/spec-other-vocab.gguf";
  ASSERT_TRUE(writer->write(path).ok());
  auto bad = ModelDrafter::create(load(path), *target);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find(fmt::format("at token {}", tokens.size() - 2)), std::string::npos)
      << bad.status().message();
  LookupDrafter lookup;
  GenerateOptions g = greedy(4);
  g.sampling.mirostat = 2;
  auto r = generate_speculative(*target, lookup, kPrompt, g, {}, nullptr);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("mirostat"), std::string::npos);
}

// The draft's sampler carries the grammar too (advanced per proposal, taken back each round), so proposals
// stay in the language and get accepted; the target's sampler enforces it. Sampled, many seeds.
TEST(Speculative, GrammarOutputStaysInTheLanguageAndProposalsAreAccepted) {
  const std::string target_path = model_with_seed(7), other_path = model_with_seed(99);
  for (const std::string& draft_path : {target_path, other_path}) {
    auto target = load(target_path);
    GenerateOptions g;
    g.n_predict = 200;
    g.sampling.temp = 1.0f;
    g.sampling.json_schema = R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"boolean"}},
                                 "required":["a","b"],"additionalProperties":false})";
    auto drafter = ModelDrafter::create(load(draft_path), *target);
    ASSERT_TRUE(drafter.ok()) << drafter.status().message();
    SpecStats stats;
    for (uint64_t seed = 1; seed <= 8; ++seed) {
      target->kv().clear();
      g.sampling.seed = seed;
      auto r = generate_speculative(*target, **drafter, {10, 20, 30}, g, {.draft_n = 4}, &stats);
      ASSERT_TRUE(r.ok()) << r.status().message();
      SCOPED_TRACE(r->text);
      EXPECT_EQ(r->stop_reason, "eog");
      const auto j = nlohmann::json::parse(r->text, nullptr, /*allow_exceptions=*/false);
      ASSERT_TRUE(j.is_object());
      EXPECT_TRUE(j.contains("a") && j["a"].is_number_integer());
      EXPECT_TRUE(j.contains("b") && j["b"].is_boolean());
    }
    if (draft_path == target_path) {
      // Same weights, same pipeline: p == q wherever both allow the token, so nearly all are accepted.
      EXPECT_GT(stats.acceptance_rate(), 0.9) << stats.summary();
    }
  }
}

// The adaptive depth: a short first round and a plain step (both ends of the verify cost measured), then
// deep when proposals are cheap and accepted, none (a plain step, with a one-token probe every kProbeEvery
// rounds) when they are refused, and back up when they are accepted again.
TEST(Speculative, DepthPlannerFollowsAcceptanceAndCosts) {
  // Verify batches cost 10 ms + 2 ms per token; a draft token 1 ms.
  auto verify_ms = [](int32_t n) { return 10.0 + 2.0 * n; };
  DepthPlanner p(8);
  EXPECT_EQ(p.choose(), DepthPlanner::kFirstDepth) << "nothing measured: a short round first";
  p.record(2, 2, 2.0, verify_ms(3));
  EXPECT_EQ(p.choose(), 0) << "then a plain step, for C(1)";
  p.record(0, 0, 0.0, verify_ms(1));
  for (int i = 0; i < 50; ++i) {
    const int32_t d = p.choose();
    p.record(d, d, d * 1.0, verify_ms(d + 1));
  }
  EXPECT_EQ(p.choose(), 8) << "everything accepted and cheap: the deepest";
  DepthPlanner q(8);
  for (int i = 0; i < 60; ++i) {
    const int32_t d = q.choose();
    q.record(d, 0, d * 1.0, verify_ms(d + 1));
  }
  // Refused proposals: plain steps, with one-token probes whose interval doubles with each refusal
  // (kProbeEvery, then 2x, 4x, ... capped at kProbeMax).
  std::vector<int> probes;
  for (int i = 0; i < 400; ++i) {
    const int32_t d = q.choose();
    EXPECT_LE(d, 1);
    if (d == 1) probes.push_back(i);
    q.record(d, 0, d * 1.0, verify_ms(d + 1));
  }
  ASSERT_GE(probes.size(), 5u);
  for (size_t j = 2; j < probes.size(); ++j) {
    EXPECT_EQ(probes[j] - probes[j - 1],
              std::min(2 * (probes[j - 1] - probes[j - 2]), DepthPlanner::kProbeMax))
        << "probe " << j;
  }
  EXPECT_EQ(probes.back() - probes[probes.size() - 2], DepthPlanner::kProbeMax) << "refused probes: rarest";
  for (int i = 0; i < 200; ++i) {
    const int32_t d = q.choose();
    q.record(d, d, d * 1.0, verify_ms(d + 1));
  }
  EXPECT_GE(q.choose(), 4) << "accepted again: deeper";
}

// Drafts that are accepted half the time but cost 0.6 of a plain step, with a verify slope of 20% per
// token (a compute-bound CPU): no depth pays, so after the two measuring rounds and a few refusals the
// planner settles on plain steps instead of exploring the cap.
TEST(Speculative, DepthPlannerStopsDraftingWhenItCannotPay) {
  auto verify_ms = [](int32_t n) { return 10.0 * (1.0 + 0.2 * (n - 1)); };
  DepthPlanner p(8);
  int32_t drafted = 0, first_plain_after = -1;
  for (int round = 0; round < 40; ++round) {
    const int32_t d = p.choose();
    if (round >= 2 && d == 0 && first_plain_after < 0) first_plain_after = round;
    EXPECT_LE(d, 2) << "round " << round << ": never deeper than the first round";
    drafted += d;
    p.record(d, d > 0 && round % 2 == 0 ? 1 : 0, 6.0 * d, verify_ms(d + 1));
  }
  EXPECT_GE(first_plain_after, 2);
  EXPECT_LE(first_plain_after, 6);
  EXPECT_LE(drafted, 2 + 6 + 40 / DepthPlanner::kProbeEvery) << "drafting stopped";
}

TEST(Speculative, LookupProposesWhatFollowedTheLatestMatch) {
  LookupDrafter d(3, 1);
  const std::vector<int32_t> h = {1, 2, 3, 9, 1, 2, 3, 7, 8, 5, 1, 2, 3};
  auto p = d.propose(h, 3);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->tokens, (std::vector<int32_t>{7, 8, 5}));  // the most recent earlier "1 2 3"
  auto none = d.propose(std::vector<int32_t>{4, 5, 6}, 3);
  EXPECT_TRUE(none->tokens.empty());
}

// Sampled speculation draws the second token through Sampler::verify; the joint distribution of the first
// two tokens must equal the target's, computed exactly from its logits. Seeds are fixed: deterministic.
TEST(Speculative, SampledOutputFollowsTheTargetDistribution) {
  const std::string target_path = model_with_seed(7), draft_path = model_with_seed(99);
  sampling::SamplerConfig cfg;
  cfg.temp = 0.8f;
  cfg.top_k = 3;
  cfg.top_p = 1.0f;
  auto target = load(target_path);
  // Exact P(x1, x2) from the target's logits through the same pipeline.
  std::map<std::pair<int32_t, int32_t>, double> expected;
  {
    auto dist_after = [&](const std::vector<int32_t>& ids) {
      target->kv().clear();
      Batch b;
      for (size_t i = 0; i < ids.size(); ++i) b.add(ids[i], static_cast<int32_t>(i), 0, i + 1 == ids.size());
      std::vector<float> logits = *target->decode(b);
      auto s = sampling::Sampler::create(cfg, target->sampling_vocab());
      return *s->distribution(logits);
    };
    for (const sampling::TokenData& a : dist_after(kPrompt)) {
      std::vector<int32_t> ids = kPrompt;
      ids.push_back(a.id);
      for (const sampling::TokenData& b : dist_after(ids))
        expected[{a.id, b.id}] = static_cast<double>(a.p) * b.p;
    }
    target->kv().clear();
  }
  auto drafter = ModelDrafter::create(load(draft_path), *target);
  ASSERT_TRUE(drafter.ok());
  const int kRuns = 1500;
  std::map<std::pair<int32_t, int32_t>, int> seen;
  SpecStats stats;
  for (int run = 0; run < kRuns; ++run) {
    target->kv().clear();
    GenerateOptions g;
    g.n_predict = 3;  // the second token goes through one verified round
    g.sampling = cfg;
    g.sampling.seed = 1000 + static_cast<uint64_t>(run);
    auto r = generate_speculative(*target, **drafter, kPrompt, g, {.draft_n = 2}, &stats);
    ASSERT_TRUE(r.ok()) << r.status().message();
    ASSERT_GE(r->generated_ids.size(), 2u);
    ++seen[{r->generated_ids[0], r->generated_ids[1]}];
  }
  EXPECT_GT(stats.drafted, 0);
  double chi2 = 0.0;
  for (const auto& [pair, p] : expected) {
    const double e = p * kRuns;
    const double o = seen.count(pair) ? seen[pair] : 0;
    chi2 += (o - e) * (o - e) / e;
  }
  for (const auto& [pair, n] : seen) EXPECT_TRUE(expected.count(pair)) << "a pair the target cannot produce";
  // 9 cells, 8 degrees of freedom: the 0.1% critical value is 26.1.
  EXPECT_LT(chi2, 26.1) << "chi-square " << chi2 << " over " << expected.size() << " cells; "
                        << stats.summary();
}

}  // namespace
}  // namespace minfer::engine
