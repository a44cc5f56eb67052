// Continuous batching without sockets: batched results equal solo runs token for token, prefixes are reused,
// the queue is bounded, cancellation and failed forwards free their slots, drain and the slots file work.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <filesystem>
#include <thread>

#include "engine/batcher.h"
#include "engine/generate.h"
#include "tiny_model.h"

namespace minfer::engine {
namespace {

using std::chrono::milliseconds;

struct Collected {
  std::vector<std::vector<int32_t>> tokens;
  std::vector<std::string> text;
  std::vector<std::string> reasons;
  std::vector<BatchEvent> events;
  BatchUsage usage;
  Status error;
  bool finished = false;
};

Collected collect(RequestHandle& h, int32_t n_choices = 1) {
  Collected c;
  c.tokens.resize(static_cast<size_t>(n_choices));
  c.text.resize(static_cast<size_t>(n_choices));
  c.reasons.resize(static_cast<size_t>(n_choices));
  for (;;) {
    auto ev = h.next(milliseconds(60000));
    if (!ev) {
      ADD_FAILURE() << "no event within 60 s";
      return c;
    }
    c.events.push_back(*ev);
    const auto ch = static_cast<size_t>(ev->choice);
    switch (ev->kind) {
      case BatchEvent::Kind::kToken:
        c.tokens[ch].push_back(ev->token);
        c.text[ch] += ev->text;
        break;
      case BatchEvent::Kind::kDone:
        c.reasons[ch] = ev->finish_reason;
        c.text[ch] += ev->text;
        break;
      case BatchEvent::Kind::kError:
        c.error = ev->error;
        break;
      case BatchEvent::Kind::kFinished:
        c.usage = ev->usage;
        c.finished = true;
        return c;
    }
  }
}

EngineOptions engine_options(int32_t n_ctx = 512, int32_t n_batch = 64) {
  EngineOptions o;
  o.n_ctx = n_ctx;
  o.n_threads = 2;
  o.n_batch = n_batch;
  return o;
}

std::unique_ptr<Engine> load(const EngineOptions& o, const std::string& preset = "tiny-qwen2") {
  auto e = Engine::load(test::write_tiny_model(preset), o);
  EXPECT_TRUE(e.ok()) << e.status().message();
  return std::move(*e);
}

using test::prompt_of;

BatchRequest greedy(std::vector<int32_t> prompt, int32_t n_predict) {
  BatchRequest r;
  r.prompt = std::move(prompt);
  r.n_predict = n_predict;
  r.sampling.temp = 0.0f;
  return r;
}

// Forbids end-of-generation so a request runs to its token limit.
BatchRequest endless(BatchRequest r, Engine& e) {
  for (int32_t id : e.sampling_vocab()->eog_ids) r.sampling.logit_bias.push_back({id, -100.0f});
  return r;
}

// The reference: the single-sequence generate() loop on a fresh engine.
std::vector<int32_t> solo(const EngineOptions& o, const std::vector<int32_t>& prompt, int32_t n_predict) {
  auto e = load(o);
  GenerateOptions g;
  g.n_predict = n_predict;
  g.sampling.temp = 0.0f;
  auto r = generate(*e, prompt, g);
  EXPECT_TRUE(r.ok()) << r.status().message();
  return r->generated_ids;
}

TEST(Batcher, ConcurrentGreedyRequestsEqualSoloRuns) {
  const EngineOptions o = engine_options(1024, 32);
  // One prompt is longer than a step's batch, so its prefill is chunked next to the others' decoding.
  const std::vector<std::vector<int32_t>> prompts = {prompt_of(5, 1), prompt_of(90, 2), prompt_of(17, 3),
                                                     prompt_of(40, 4)};
  std::vector<std::vector<int32_t>> expected;
  for (const auto& p : prompts) expected.push_back(solo(o, p, 24));

  auto e = load(o);
  auto b = Batcher::create(*e, {.n_slots = 4, .queue_depth = 4});
  ASSERT_TRUE(b.ok()) << b.status().message();
  std::vector<std::shared_ptr<RequestHandle>> handles;
  for (const auto& p : prompts) {
    auto h = (*b)->submit(greedy(p, 24));
    ASSERT_TRUE(h.ok()) << h.status().message();
    handles.push_back(*h);
  }
  for (size_t i = 0; i < prompts.size(); ++i) {
    Collected c = collect(*handles[i]);
    ASSERT_TRUE(c.error.ok()) << c.error.message();
    EXPECT_EQ(c.tokens[0], expected[i]) << "request " << i;
    EXPECT_EQ(c.usage.prompt_tokens, static_cast<int32_t>(prompts[i].size()));
    EXPECT_EQ(c.usage.completion_tokens, static_cast<int32_t>(expected[i].size()));
  }
  const BatcherStats s = (*b)->stats();
  EXPECT_EQ(s.requests_completed, 4);
  EXPECT_EQ(s.slots_busy, 0);
  // Mixed steps: fewer forwards than the requests would need one after another.
  int64_t sequential = 0;
  for (size_t i = 0; i < prompts.size(); ++i)
    sequential += static_cast<int64_t>((prompts[i].size() + 31) / 32 + expected[i].size());
  EXPECT_LT(s.steps, sequential);
}

TEST(Batcher, ReusesTheLongestCachedPrefix) {
  const EngineOptions o = engine_options();
  auto e = load(o);
  auto b = Batcher::create(*e, {.n_slots = 2});
  ASSERT_TRUE(b.ok());
  const std::vector<int32_t> system = prompt_of(60, 9);
  std::vector<int32_t> first = system, second = system;
  first.insert(first.end(), {5, 6, 7});
  second.insert(second.end(), {8, 9});

  Collected a = collect(**(*b)->submit(greedy(first, 6)));
  EXPECT_EQ(a.usage.cached_tokens, 0);
  Collected c = collect(**(*b)->submit(greedy(second, 6)));
  EXPECT_EQ(c.usage.cached_tokens, 60);
  EXPECT_EQ(c.tokens[0], solo(o, second, 6)) << "a reused prefix must not change the output";
  // The same prompt again: everything but the last token comes from the cache.
  Collected d = collect(**(*b)->submit(greedy(second, 6)));
  EXPECT_EQ(d.usage.cached_tokens, static_cast<int32_t>(second.size()) - 1);
  EXPECT_EQ(d.tokens[0], c.tokens[0]);
  EXPECT_EQ((*b)->stats().cached_prompt_tokens, 60 + static_cast<int64_t>(second.size()) - 1);
}

TEST(Batcher, SharesAPrefixHeldByABusySlot) {
  const EngineOptions o = engine_options();
  auto e = load(o);
  auto b = Batcher::create(*e, {.n_slots = 2});
  ASSERT_TRUE(b.ok());
  const std::vector<int32_t> p = prompt_of(50, 4);
  auto first = (*b)->submit(greedy(p, 40));
  ASSERT_TRUE(first.ok());
  ASSERT_TRUE((*first)->next(milliseconds(30000)).has_value());  // its prompt is in the cache now
  std::vector<int32_t> q = p;
  q.push_back(11);
  Collected c = collect(**(*b)->submit(greedy(q, 5)));
  EXPECT_EQ(c.usage.cached_tokens, 50);
  EXPECT_EQ(c.tokens[0], solo(o, q, 5));
  Collected a = collect(**first);
  EXPECT_TRUE(a.error.ok());
}

TEST(Batcher, BoundedQueueRefusesBeyondItsDepth) {
  auto e = load(engine_options());
  {
    auto b = Batcher::create(*e, {.n_slots = 1, .queue_depth = 1});
    ASSERT_TRUE(b.ok());
    auto h1 = (*b)->submit(endless(greedy(prompt_of(8, 1), 100), *e));
    auto h2 = (*b)->submit(endless(greedy(prompt_of(8, 2), 100), *e));
    auto h3 = (*b)->submit(greedy(prompt_of(8, 3), 100));
    ASSERT_TRUE(h1.ok());
    ASSERT_TRUE(h2.ok());
    ASSERT_FALSE(h3.ok());
    EXPECT_EQ(h3.status().code(), StatusCode::kUnavailable);
    EXPECT_EQ(h3.status().message(), "queue full");
    EXPECT_EQ((*b)->stats().requests_rejected, 1);
    Collected c1 = collect(**h1), c2 = collect(**h2);  // the queued one runs after the first, FIFO
    EXPECT_TRUE(c1.error.ok());
    EXPECT_TRUE(c2.error.ok());
    EXPECT_FALSE(c2.tokens[0].empty());
  }
  {
    auto b = Batcher::create(*e, {.n_slots = 1, .queue_depth = 0});
    ASSERT_TRUE(b.ok());
    auto h1 = (*b)->submit(greedy(prompt_of(8, 1), 50));
    auto h2 = (*b)->submit(greedy(prompt_of(8, 2), 50));
    ASSERT_TRUE(h1.ok());
    ASSERT_FALSE(h2.ok());
    EXPECT_EQ(h2.status().message(), "no idle slot");
    collect(**h1);
  }
}

TEST(Batcher, RefusesBadRequestsByName) {
  auto e = load(engine_options(64));
  auto b = Batcher::create(*e, {.n_slots = 2});
  ASSERT_TRUE(b.ok());
  auto too_long = (*b)->submit(greedy(prompt_of(64, 1), 4));
  ASSERT_FALSE(too_long.ok());
  EXPECT_EQ(too_long.status().code(), StatusCode::kOutOfRange);
  EXPECT_NE(too_long.status().message().find("64 tokens"), std::string::npos);
  BatchRequest r = greedy(prompt_of(4, 1), 4);
  r.n_choices = 3;
  EXPECT_FALSE((*b)->submit(r).ok());
  r = greedy({}, 4);
  EXPECT_FALSE((*b)->submit(r).ok());
  r = greedy({1, 100000}, 4);
  EXPECT_NE((*b)->submit(r).status().message().find("100000"), std::string::npos);
  r = greedy(prompt_of(4, 1), 4);
  r.sampling.grammar = "root ::= (";
  EXPECT_EQ((*b)->submit(r).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ((*b)->stats().requests_total, 0);
}

TEST(Batcher, CancelFreesTheSlotWithinAStep) {
  auto e = load(engine_options());
  auto b = Batcher::create(*e, {.n_slots = 1, .queue_depth = 2});
  ASSERT_TRUE(b.ok());
  auto h = (*b)->submit(endless(greedy(prompt_of(10, 1), 400), *e));
  ASSERT_TRUE(h.ok());
  ASSERT_TRUE((*h)->next(milliseconds(30000)).has_value());
  (*h)->cancel();
  // The next request gets the only slot and completes.
  Collected c = collect(**(*b)->submit(greedy(prompt_of(10, 2), 4)));
  EXPECT_TRUE(c.error.ok());
  const BatcherStats s = (*b)->stats();
  EXPECT_EQ(s.requests_cancelled, 1);
  EXPECT_EQ(s.requests_completed, 1);
  EXPECT_EQ(s.completion_tokens, c.usage.completion_tokens)
      << "cancelled tokens are never counted as delivered";
}

TEST(Batcher, AFailedForwardAnswersItsBatchAndTheWorkerGoesOn) {
  auto e = load(engine_options());
  std::atomic<bool> armed{false};
  BatcherOptions opt{.n_slots = 2};
  opt.fault_injector = [&armed](int64_t) {
    return armed.exchange(false) ? Status(StatusCode::kInternal, "injected fault") : Status();
  };
  auto b = Batcher::create(*e, opt);
  ASSERT_TRUE(b.ok());
  auto h1 = (*b)->submit(endless(greedy(prompt_of(6, 1), 200), *e));
  auto h2 = (*b)->submit(endless(greedy(prompt_of(6, 2), 200), *e));
  // Both are decoding once each has a token; the next forward carries both and fails.
  ASSERT_TRUE((*h1)->next(milliseconds(30000)).has_value());
  ASSERT_TRUE((*h2)->next(milliseconds(30000)).has_value());
  armed = true;
  Collected c1 = collect(**h1), c2 = collect(**h2);
  EXPECT_EQ(c1.error.message(), "injected fault");
  EXPECT_EQ(c2.error.message(), "injected fault");
  const BatcherStats s = (*b)->stats();
  EXPECT_EQ(s.requests_failed, 2);
  EXPECT_EQ(s.slots_busy, 0);
  Collected c3 = collect(**(*b)->submit(greedy(prompt_of(6, 1), 5)));
  EXPECT_TRUE(c3.error.ok());
  EXPECT_EQ(c3.usage.cached_tokens, 0) << "a failed slot's cache is dropped";
}

// A wedged step (the test hook makes steps run nothing) trips the stall guard after kStallStepLimit steps:
// the live request and the queued one are answered once with an internal error, their slots come back
// empty, the stall is counted, and the worker serves the next request.
TEST(Batcher, AStallAnswersEveryOpenRequestOnceAndTheWorkerGoesOn) {
  auto e = load(engine_options());
  std::atomic<bool> wedged{false};
  std::atomic<int> wedged_steps{0};
  BatcherOptions opt{.n_slots = 1, .queue_depth = 4};
  opt.stall_injector = [&] {
    if (!wedged.load()) return false;
    wedged_steps.fetch_add(1);
    return true;
  };
  auto b = Batcher::create(*e, opt);
  ASSERT_TRUE(b.ok());
  auto live = (*b)->submit(endless(greedy(prompt_of(6, 1), 200), *e));
  ASSERT_TRUE(live.ok());
  ASSERT_TRUE((*live)->next(milliseconds(30000)).has_value());  // decoding
  wedged = true;
  auto queued = (*b)->submit(greedy(prompt_of(6, 2), 5));
  ASSERT_TRUE(queued.ok());
  Collected c1 = collect(**live), c2 = collect(**queued);
  for (const Collected* c : {&c1, &c2}) {
    EXPECT_TRUE(c->finished);
    EXPECT_EQ(c->error.code(), StatusCode::kInternal);
    EXPECT_EQ(c->error.message(), "the worker stalled: 64 steps in a row made no progress");
    EXPECT_EQ(std::count_if(c->events.begin(), c->events.end(),
                            [](const BatchEvent& ev) { return ev.kind == BatchEvent::Kind::kError; }),
              1);
  }
  EXPECT_GE(wedged_steps.load(), kStallStepLimit);
  wedged = false;
  BatcherStats s = (*b)->stats();
  EXPECT_EQ(s.worker_stalled, 1);
  EXPECT_EQ(s.requests_failed, 2);
  EXPECT_EQ(s.slots_busy, 0);
  EXPECT_EQ(s.pending_jobs, 0);
  EXPECT_EQ(s.kv_cells_used, 0) << "the wedged requests' rows are dropped";
  Collected c3 = collect(**(*b)->submit(greedy(prompt_of(6, 1), 5)));
  EXPECT_TRUE(c3.error.ok()) << c3.error.message();
  EXPECT_EQ((*b)->stats().worker_stalled, 1);
}

TEST(Batcher, DrainFinishesAcceptedWorkThenRefuses) {
  auto e = load(engine_options());
  auto b = Batcher::create(*e, {.n_slots = 1, .queue_depth = 2});
  ASSERT_TRUE(b.ok());
  auto h = (*b)->submit(greedy(prompt_of(6, 1), 12));
  ASSERT_TRUE(h.ok());
  std::thread drainer([&] { EXPECT_EQ((*b)->drain(milliseconds(60000)), 0); });
  Collected c = collect(**h);
  drainer.join();
  EXPECT_TRUE(c.error.ok());
  auto late = (*b)->submit(greedy(prompt_of(6, 1), 12));
  ASSERT_FALSE(late.ok());
  EXPECT_EQ(late.status().code(), StatusCode::kUnavailable);
  EXPECT_TRUE((*b)->stats().draining);
}

TEST(Batcher, DrainDeadlineAbandonsWhatIsLeft) {
  auto e = load(engine_options(2048));
  auto b = Batcher::create(*e, {.n_slots = 1, .queue_depth = 2});
  ASSERT_TRUE(b.ok());
  auto h1 = (*b)->submit(endless(greedy(prompt_of(6, 1), 1500), *e));
  auto h2 = (*b)->submit(endless(greedy(prompt_of(6, 2), 1500), *e));
  ASSERT_TRUE((*h1)->next(milliseconds(30000)).has_value());
  EXPECT_EQ((*b)->drain(milliseconds(50)), 2);
  Collected c1 = collect(**h1), c2 = collect(**h2);
  EXPECT_EQ(c1.error.code(), StatusCode::kUnavailable);
  EXPECT_EQ(c2.error.code(), StatusCode::kUnavailable);
  EXPECT_EQ((*b)->stats().drain_abandoned, 2);
}

TEST(Batcher, ChoicesShareThePromptAndCountEveryToken) {
  auto e = load(engine_options());
  auto b = Batcher::create(*e, {.n_slots = 3});
  ASSERT_TRUE(b.ok());
  BatchRequest r = greedy(prompt_of(20, 5), 8);
  r.n_choices = 3;
  Collected c = collect(**(*b)->submit(r), 3);
  ASSERT_TRUE(c.error.ok());
  EXPECT_EQ(c.tokens[0], c.tokens[1]);  // greedy: identical choices
  EXPECT_EQ(c.tokens[0], c.tokens[2]);
  EXPECT_EQ(c.usage.completion_tokens, static_cast<int32_t>(c.tokens[0].size() * 3));
  // Sampled choices differ by seed but each is reproducible.
  BatchRequest s = r;
  s.sampling.temp = 1.5f;
  s.sampling.top_k = 0;
  s.sampling.top_p = 1.0f;
  s.sampling.seed = 42;
  Collected x = collect(**(*b)->submit(s), 3), y = collect(**(*b)->submit(s), 3);
  EXPECT_EQ(x.tokens, y.tokens);
  EXPECT_TRUE(x.tokens[0] != x.tokens[1] || x.tokens[1] != x.tokens[2]);
}

TEST(Batcher, LogprobsAreLogSoftmaxOfTheRawLogits) {
  auto e = load(engine_options());
  auto b = Batcher::create(*e, {.n_slots = 1});
  ASSERT_TRUE(b.ok());
  BatchRequest r = greedy(prompt_of(12, 5), 5);
  r.n_top_logprobs = 3;
  Collected c = collect(**(*b)->submit(r));
  ASSERT_FALSE(c.events.empty());
  for (const BatchEvent& ev : c.events) {
    if (ev.kind != BatchEvent::Kind::kToken) continue;
    ASSERT_EQ(ev.top.size(), 3u);
    EXPECT_EQ(ev.top[0].token, ev.token);  // greedy picks the most likely token
    EXPECT_FLOAT_EQ(ev.top[0].logprob, ev.logprob);
    EXPECT_LE(ev.logprob, 0.0f);
    EXPECT_GE(ev.top[0].logprob, ev.top[1].logprob);
    EXPECT_LE(std::exp(ev.top[0].logprob) + std::exp(ev.top[1].logprob) + std::exp(ev.top[2].logprob),
              1.0001f);
  }
}

TEST(Batcher, StopStringsEndTheChoiceAndAreNeverEmitted) {
  const EngineOptions o = engine_options();
  auto e = load(o);
  auto b = Batcher::create(*e, {.n_slots = 1});
  ASSERT_TRUE(b.ok());
  // Find the text a greedy run produces, then stop on a piece from its middle.
  Collected full = collect(**(*b)->submit(greedy(prompt_of(9, 2), 30)));
  ASSERT_GE(full.text[0].size(), 6u);
  const std::string stop = full.text[0].substr(full.text[0].size() / 2, 2);
  BatchRequest r = greedy(prompt_of(9, 2), 30);
  r.stop = {stop};
  Collected c = collect(**(*b)->submit(r));
  EXPECT_EQ(c.reasons[0], "stop");
  EXPECT_EQ(c.text[0], full.text[0].substr(0, full.text[0].find(stop)));
}

TEST(Batcher, SlotsFileRestoresCachesAndRefusesAnotherContextSize) {
  const std::string file = test::temp_dir() + "/slots.bin";
  std::filesystem::remove(file);
  const std::vector<int32_t> p = prompt_of(40, 8);
  std::vector<int32_t> out;
  {
    auto e = load(engine_options());
    BatcherOptions opt{.n_slots = 2};
    opt.slots_file = file;
    auto b = Batcher::create(*e, opt);
    ASSERT_TRUE(b.ok());
    out = collect(**(*b)->submit(greedy(p, 6))).tokens[0];
  }
  ASSERT_TRUE(std::filesystem::exists(file));
  {
    auto e = load(engine_options());
    BatcherOptions opt{.n_slots = 2};
    opt.slots_file = file;
    auto b = Batcher::create(*e, opt);
    ASSERT_TRUE(b.ok());
    EXPECT_GT((*b)->stats().kv_cells_used, 40);
    Collected c = collect(**(*b)->submit(greedy(p, 6)));
    EXPECT_EQ(c.usage.cached_tokens, 39);
    EXPECT_EQ(c.tokens[0], out);
  }
  {
    auto e = load(engine_options(256));
    BatcherOptions opt{.n_slots = 2};
    opt.slots_file = file;
    auto b = Batcher::create(*e, opt);
    ASSERT_TRUE(b.ok());
    EXPECT_EQ((*b)->stats().kv_cells_used, 0) << "a file saved with another n_ctx is refused";
  }
}

TEST(Batcher, OneRequestMayUseTheWholeContextWhenOthersAreIdle) {
  auto e = load(engine_options(128));
  auto b = Batcher::create(*e, {.n_slots = 4});
  ASSERT_TRUE(b.ok());
  for (int i = 0; i < 3; ++i)
    collect(**(*b)->submit(greedy(prompt_of(30, i), 3)));  // idle caches fill the pool
  Collected c = collect(**(*b)->submit(greedy(prompt_of(100, 7), 27)));
  ASSERT_TRUE(c.error.ok()) << c.error.message();
  EXPECT_EQ(c.reasons[0] == "length" || c.reasons[0] == "stop", true);
  if (c.reasons[0] == "length") {
    EXPECT_EQ(c.tokens[0].size(), 27u);
  }
}

}  // namespace
}  // namespace minfer::engine
