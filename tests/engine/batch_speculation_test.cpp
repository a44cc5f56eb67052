// Speculative decoding inside the batcher: concurrent greedy requests (one with a chunked prompt next to
// decoding streams) give the same tokens as solo runs without speculation for every drafter and depth; each
// slot's cache holds exactly its evaluated tokens afterwards; grammars hold; mirostat is refused by name.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <set>

#include "engine/batcher.h"
#include "engine/generate.h"
#include "tiny_model.h"

namespace minfer::engine {
namespace {

using std::chrono::milliseconds;

EngineOptions options(int32_t n_ctx = 1024, int32_t n_batch = 32) {
  EngineOptions o;
  o.n_ctx = n_ctx;
  o.n_threads = 2;
  o.n_batch = n_batch;
  return o;
}

std::unique_ptr<Engine> load(const std::string& path, const EngineOptions& o = options()) {
  auto e = Engine::load(path, o);
  EXPECT_TRUE(e.ok()) << e.status().message();
  return std::move(*e);
}

using test::prompt_of;

// A prompt whose continuation tends to repeat it, so prompt lookup has matches.
std::vector<int32_t> repetitive(int32_t salt) {
  std::vector<int32_t> p;
  for (int32_t r = 0; r < 4; ++r) {
    for (int32_t i = 0; i < 6; ++i) p.push_back(20 + (i * 11 + salt * 5) % 90);
  }
  return p;
}

struct Outcome {
  std::vector<int32_t> tokens;
  std::string text;
  std::string reason;
  Status error;
};

Outcome collect(RequestHandle& h) {
  Outcome o;
  for (;;) {
    auto ev = h.next(milliseconds(60000));
    if (!ev) {
      ADD_FAILURE() << "no event within 60 s";
      return o;
    }
    if (ev->kind == BatchEvent::Kind::kToken) {
      o.tokens.push_back(ev->token);
      o.text += ev->text;
    } else if (ev->kind == BatchEvent::Kind::kDone) {
      o.reason = ev->finish_reason;
      o.text += ev->text;
    } else if (ev->kind == BatchEvent::Kind::kError) {
      o.error = ev->error;
    } else {
      return o;
    }
  }
}

BatchRequest greedy(std::vector<int32_t> prompt, int32_t n_predict, Engine& e) {
  BatchRequest r;
  r.prompt = std::move(prompt);
  r.n_predict = n_predict;
  r.sampling.temp = 0.0f;
  // No end of generation: every run goes to its limit, so the cache contents are known.
  for (int32_t id : e.sampling_vocab()->eog_ids) r.sampling.logit_bias.push_back({id, -100.0f});
  return r;
}

std::vector<int32_t> solo(const std::string& path, const BatchRequest& req) {
  auto e = load(path);
  GenerateOptions g;
  g.n_predict = req.n_predict;
  g.sampling = req.sampling;
  g.stop = req.stop;
  auto r = generate(*e, req.prompt, g);
  EXPECT_TRUE(r.ok()) << r.status().message();
  return r->generated_ids;
}

TEST(BatchSpeculation, GreedyRequestsEqualSoloRunsForEveryDrafterAndDepth) {
  const std::string target_path = test::write_tiny_model("tiny-qwen2", DType::F32, 7);
  // Another model with the same vocabulary but other weights: most proposals are refused.
  const std::string other_weights = [] {
    tools::SyntheticOptions o;
    o.shape = *tools::synthetic_preset("tiny-qwen2");
    o.seed = 99;
    auto w = tools::make_synthetic_model(o);
    const std::string path = test::temp_dir() + "/batch-spec-other.gguf";
    EXPECT_TRUE(w->write(path).ok());
    return path;
  }();
  auto probe = load(target_path);
  // One prompt is longer than a step's batch, so its prefill is chunked next to speculating streams.
  std::vector<BatchRequest> reqs = {greedy(prompt_of(5, 1), 30, *probe), greedy(prompt_of(90, 2), 25, *probe),
                                    greedy(repetitive(3), 40, *probe), greedy(prompt_of(40, 4), 33, *probe)};
  std::vector<std::vector<int32_t>> want;
  for (const BatchRequest& r : reqs) want.push_back(solo(target_path, r));

  struct Case {
    const char* name;
    std::string draft;  // empty: prompt lookup
    double min_rate, max_rate;
  };
  // Depth 1 and the adaptive cap exercise the extremes; the others one middle depth (each case costs a
  // batcher run, and the asan and NEON-under-qemu tiers run this test too).
  for (const Case& c : {Case{"self", target_path, 0.999, 1.0}, Case{"other weights", other_weights, 0.0, 0.9},
                        Case{"lookup", "", 0.0, 1.0}}) {
    const std::vector<SpecOptions> depths =
        std::string(c.name) == "self"
            ? std::vector<SpecOptions>{SpecOptions{.draft_n = 1}, SpecOptions{.draft_n = 8, .adaptive = true}}
            : std::vector<SpecOptions>{SpecOptions{.draft_n = 4}};
    for (const SpecOptions spec : depths) {
      SCOPED_TRACE(std::string(c.name) + " depth " + std::to_string(spec.draft_n));
      auto target = load(target_path);
      std::unique_ptr<Engine> draft = c.draft.empty() ? nullptr : load(c.draft);
      auto b = Batcher::create(
          *target,
          {.n_slots = 4, .queue_depth = 4, .speculate = true, .draft_model = draft.get(), .spec = spec});
      ASSERT_TRUE(b.ok()) << b.status().message();
      std::vector<std::shared_ptr<RequestHandle>> handles;
      for (const BatchRequest& r : reqs) {
        auto h = (*b)->submit(r);
        ASSERT_TRUE(h.ok()) << h.status().message();
        handles.push_back(*h);
      }
      std::multiset<int32_t> expected_rows, cached_rows;
      for (size_t i = 0; i < reqs.size(); ++i) {
        const Outcome o = collect(*handles[i]);
        ASSERT_TRUE(o.error.ok()) << o.error.message();
        EXPECT_EQ(o.tokens, want[i]) << "request " << i;
        EXPECT_EQ(o.reason, "length");
        // Evaluated: the prompt and every generated token but the last.
        expected_rows.insert(static_cast<int32_t>(reqs[i].prompt.size() + want[i].size() - 1));
      }
      const BatcherStats s = (*b)->stats();
      EXPECT_GT(s.spec_rounds, 0);
      const double rate = static_cast<double>(s.spec_accepted) / static_cast<double>(s.spec_drafted);
      EXPECT_GE(rate, c.min_rate) << s.spec_accepted << " of " << s.spec_drafted;
      EXPECT_LE(rate, c.max_rate) << s.spec_accepted << " of " << s.spec_drafted;
      // Each slot's sequence holds exactly its evaluated tokens: no row of a refused proposal remains.
      b->reset();
      for (kv::SeqId seq = 0; seq < 4; ++seq) {
        const auto cells = static_cast<int32_t>(target->kv().seq_cells(seq).size());
        EXPECT_EQ(cells, target->kv().seq_pos_max(seq) + 1) << "seq " << seq;
        cached_rows.insert(cells);
      }
      EXPECT_EQ(cached_rows, expected_rows);
    }
  }
}

// Prefix reuse with a draft model: the draft cache must mirror the target's sharing (a wrong draft row
// would make the model's proposals for itself differ from its own choices), so a self-draft keeps
// accepting everything while requests reuse each other's prefixes.
TEST(BatchSpeculation, TheDraftCacheFollowsPrefixSharing) {
  const std::string path = test::write_tiny_model("tiny-qwen2", DType::F32, 7);
  auto target = load(path);
  auto draft = load(path);
  auto b = Batcher::create(*target, {.n_slots = 3,
                                     .queue_depth = 4,
                                     .speculate = true,
                                     .draft_model = draft.get(),
                                     .spec = {.draft_n = 3}});
  ASSERT_TRUE(b.ok()) << b.status().message();
  const std::vector<int32_t> base = prompt_of(60, 5);
  auto with_tail = [&](size_t keep, int32_t salt) {
    std::vector<int32_t> p(base.begin(), base.begin() + static_cast<std::ptrdiff_t>(keep));
    const std::vector<int32_t> tail = prompt_of(12, salt);
    p.insert(p.end(), tail.begin(), tail.end());
    return p;
  };
  int32_t cached = 0;
  for (const auto& round : {std::vector<std::vector<int32_t>>{base},
                            std::vector<std::vector<int32_t>>{with_tail(60, 1), with_tail(40, 2)},
                            std::vector<std::vector<int32_t>>{with_tail(50, 3), base}}) {
    std::vector<BatchRequest> reqs;
    std::vector<std::shared_ptr<RequestHandle>> handles;
    for (const auto& p : round) {
      reqs.push_back(greedy(p, 16, *target));
      auto h = (*b)->submit(reqs.back());
      ASSERT_TRUE(h.ok()) << h.status().message();
      handles.push_back(*h);
    }
    for (size_t i = 0; i < handles.size(); ++i) {
      const Outcome o = collect(*handles[i]);
      ASSERT_TRUE(o.error.ok()) << o.error.message();
      EXPECT_EQ(o.tokens, solo(path, reqs[i]));
    }
    cached = static_cast<int32_t>((*b)->stats().cached_prompt_tokens);
  }
  const BatcherStats s = (*b)->stats();
  EXPECT_GT(cached, 100) << "the rounds must reuse prefixes for this to test anything";
  EXPECT_EQ(s.spec_accepted, s.spec_drafted) << "a self-draft refused: its cache disagreed with the target's";
  EXPECT_GT(s.spec_drafted, 0);
}

TEST(BatchSpeculation, GrammarOutputStaysInTheLanguage) {
  const std::string path = test::write_tiny_model("tiny-qwen2", DType::F32, 7);
  auto target = load(path, options(512, 64));
  auto draft = load(path, options(512, 64));
  auto b = Batcher::create(*target, {.n_slots = 2,
                                     .queue_depth = 8,
                                     .speculate = true,
                                     .draft_model = draft.get(),
                                     .spec = {.draft_n = 4}});
  ASSERT_TRUE(b.ok()) << b.status().message();
  for (uint64_t seed = 1; seed <= 6; ++seed) {
    BatchRequest r;
    r.prompt = {10, 20, 30};
    r.n_predict = 200;
    r.sampling.temp = 1.0f;
    r.sampling.seed = seed;
    r.sampling.json_schema =
        R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"boolean"}},
            "required":["a","b"],"additionalProperties":false})";
    auto h = (*b)->submit(r);
    ASSERT_TRUE(h.ok()) << h.status().message();
    const Outcome o = collect(**h);
    ASSERT_TRUE(o.error.ok()) << o.error.message();
    SCOPED_TRACE(o.text);
    EXPECT_EQ(o.reason, "stop");
    const auto j = nlohmann::json::parse(o.text, nullptr, /*allow_exceptions=*/false);
    ASSERT_TRUE(j.is_object());
    EXPECT_TRUE(j.contains("a") && j["a"].is_number_integer());
    EXPECT_TRUE(j.contains("b") && j["b"].is_boolean());
  }
  const BatcherStats s = (*b)->stats();
  // Same weights, same pipeline (the grammar included): nearly every proposal is accepted.
  EXPECT_GT(static_cast<double>(s.spec_accepted) / static_cast<double>(s.spec_drafted), 0.9)
      << s.spec_accepted << " of " << s.spec_drafted;
}

TEST(BatchSpeculation, RefusesMirostatAndAnotherVocabulary) {
  const std::string path = test::write_tiny_model("tiny-qwen2", DType::F32, 7);
  auto target = load(path);
  auto b = Batcher::create(*target, {.n_slots = 1, .speculate = true, .spec = {.draft_n = 2}});
  ASSERT_TRUE(b.ok());
  BatchRequest r;
  r.prompt = {1, 2, 3};
  r.sampling.mirostat = 2;
  auto h = (*b)->submit(r);
  ASSERT_FALSE(h.ok());
  EXPECT_NE(h.status().message().find("mirostat"), std::string::npos) << h.status().message();

  // Same size, two special tokens swapped: the first difference is named.
  tools::SyntheticOptions o;
  o.shape = *tools::synthetic_preset("tiny-qwen2");
  auto writer = tools::make_synthetic_model(o);
  ASSERT_TRUE(writer.ok());
  std::vector<std::string> tokens = *writer->metadata().get_string_array("tokenizer.ggml.tokens");
  std::swap(tokens[tokens.size() - 1], tokens[tokens.size() - 2]);
  writer->metadata().set("tokenizer.ggml.tokens", gguf::Value::array(gguf::Array::of_strings(tokens)));
  const std::string other_path = test::temp_dir() + "/batch-spec-other-vocab.gguf";
  ASSERT_TRUE(writer->write(other_path).ok());
  auto other = load(other_path);
  auto refused = Batcher::create(*target, {.n_slots = 1, .speculate = true, .draft_model = other.get()});
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find(fmt::format("at token {}", tokens.size() - 2)), std::string::npos)
      << refused.status().message();
}

}  // namespace
}  // namespace minfer::engine
