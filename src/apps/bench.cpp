#include "apps/bench.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "core/rng.h"
#include "engine/generate.h"

namespace minfer::apps {
namespace {

std::vector<int32_t> bench_tokens(int32_t n, int32_t n_vocab, uint64_t seed) {
  Rng rng(seed);
  std::vector<int32_t> ids(static_cast<size_t>(n));
  for (int32_t& id : ids) id = static_cast<int32_t>(rng.below(static_cast<uint64_t>(n_vocab)));
  return ids;
}

// Prefills `ids` at positions [start, start + n) in chunks of n_batch with logits for each chunk's last
// token.
Status prefill(engine::Engine& engine, const std::vector<int32_t>& ids, int32_t start) {
  const auto step = static_cast<size_t>(engine.options().n_batch);
  for (size_t begin = 0; begin < ids.size(); begin += step) {
    const size_t end = std::min(ids.size(), begin + step);
    engine::Batch b;
    for (size_t i = begin; i < end; ++i) b.add(ids[i], start + static_cast<int32_t>(i), 0, i + 1 == end);
    MINFER_RETURN_IF_ERROR(engine.decode(b).status());
  }
  return {};
}

Result<double> run_once(engine::Engine& engine, const BenchTest& test) {
  engine.kv().clear();
  const int32_t nv = engine.tokenizer().n_vocab();
  if (test.depth > 0) MINFER_RETURN_IF_ERROR(prefill(engine, bench_tokens(test.depth, nv, 1), 0));
  const auto t0 = std::chrono::steady_clock::now();
  if (test.n_prompt > 0) {
    MINFER_RETURN_IF_ERROR(prefill(engine, bench_tokens(test.n_prompt, nv, 2), test.depth));
  } else {
    const std::vector<int32_t> ids = bench_tokens(test.n_gen, nv, 3);
    engine::Batch b;
    for (int32_t i = 0; i < test.n_gen; ++i) {
      b.clear();
      b.add(ids[static_cast<size_t>(i)], test.depth + i, 0, true);
      MINFER_RETURN_IF_ERROR(engine.decode(b).status());
    }
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

std::string BenchTest::name() const {
  std::string n = n_prompt > 0 ? "pp" + std::to_string(n_prompt) : "tg" + std::to_string(n_gen);
  if (depth > 0) n += " @ d" + std::to_string(depth);
  return n;
}

double BenchResult::avg_ts() const {
  const auto s = samples_ts();
  double sum = 0;
  for (double v : s) sum += v;
  return s.empty() ? 0.0 : sum / static_cast<double>(s.size());
}

double BenchResult::stddev_ts() const {
  const auto s = samples_ts();
  if (s.size() < 2) return 0.0;
  const double mean = avg_ts();
  double acc = 0;
  for (double v : s) acc += (v - mean) * (v - mean);
  return std::sqrt(acc / static_cast<double>(s.size() - 1));
}

std::vector<double> BenchResult::samples_ts() const {
  const double n = test.n_prompt > 0 ? test.n_prompt : test.n_gen;
  std::vector<double> out;
  for (double sec : seconds) out.push_back(sec > 0 ? n / sec : 0.0);
  return out;
}

// What to do about a context too small: raise -c, unless it already is the model's trained length.
static std::string raise_ctx_hint(const engine::Engine& engine) {
  const int32_t n_train = engine.hparams().n_ctx_train;
  if (engine.n_ctx() < n_train) return "raise --n-ctx";
  return fmt::format("the model's trained context length is {}, the most it can hold", n_train);
}

Result<BenchResult> run_bench(engine::Engine& engine, const BenchTest& test, int reps) {
  if ((test.n_prompt > 0) == (test.n_gen > 0)) return invalid_argument("bench: a test is either pp or tg");
  const int64_t need = static_cast<int64_t>(test.depth) + test.n_prompt + test.n_gen;
  if (need > engine.n_ctx()) {
    return invalid_argument("bench: {} needs {} cells but the context holds {} ({})", test.name(), need,
                            engine.n_ctx(), raise_ctx_hint(engine));
  }
  BenchResult result;
  result.test = test;
  MINFER_RETURN_IF_ERROR(run_once(engine, test).status());  // warm-up: builds and allocates the plans
  for (int r = 0; r < reps; ++r) {
    MINFER_ASSIGN_OR_RETURN(double sec, run_once(engine, test));
    result.seconds.push_back(sec);
  }
  engine.kv().clear();
  return result;
}

Result<SpecBenchResult> run_spec_bench(engine::Engine& target, engine::Drafter& drafter, int32_t n_gen,
                                       const engine::SpecOptions& spec, int reps,
                                       std::span<const int32_t> prompt_ids) {
  // Without a given prompt: one that repeats itself, as in an edit or a summary, so prompt lookup has
  // something to find.
  std::vector<int32_t> prompt(prompt_ids.begin(), prompt_ids.end());
  if (prompt.empty()) {
    prompt = bench_tokens(24, target.tokenizer().n_vocab(), 5);
    for (int i = 0; i < 2; ++i) prompt.insert(prompt.end(), prompt.begin(), prompt.begin() + 24);
  }
  if (static_cast<int32_t>(prompt.size()) + n_gen > target.n_ctx()) {
    return invalid_argument("bench: a {}-token prompt and tg{} do not fit a context of {} ({})",
                            prompt.size(), n_gen, target.n_ctx(), raise_ctx_hint(target));
  }
  engine::GenerateOptions g;
  g.n_predict = n_gen;
  g.sampling.temp = 0.0f;
  for (int32_t id : target.sampling_vocab()->eog_ids) g.sampling.logit_bias.push_back({id, -100.0f});
  SpecBenchResult out;
  out.plain.test = out.speculative.test = BenchTest{0, n_gen, 0};
  for (int r = 0; r <= reps; ++r) {  // the first round warms up
    target.kv().clear();
    MINFER_ASSIGN_OR_RETURN(engine::GenerateResult plain, engine::generate(target, prompt, g));
    target.kv().clear();
    engine::SpecStats stats;
    MINFER_ASSIGN_OR_RETURN(engine::GenerateResult fast,
                            engine::generate_speculative(target, drafter, prompt, g, spec, &stats));
    if (fast.generated_ids != plain.generated_ids) {
      return error(StatusCode::kInternal,
                   "bench: speculative greedy output differs from plain decoding at round {}", r);
    }
    if (r == 0) continue;
    out.plain.seconds.push_back(plain.timings.generate_ms / 1e3);
    out.speculative.seconds.push_back(fast.timings.generate_ms / 1e3);
    out.stats.add(stats);
  }
  target.kv().clear();
  return out;
}

double VerifyCost::median_ms() const {
  if (ms.empty()) return 0.0;
  std::vector<double> v = ms;
  std::sort(v.begin(), v.end());
  return v.size() % 2 == 1 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

Result<std::vector<VerifyCost>> run_verify_bench(engine::Engine& engine, int32_t depth,
                                                 const std::vector<int32_t>& nts, int reps) {
  engine.kv().clear();
  const int32_t nv = engine.tokenizer().n_vocab();
  for (int32_t nt : nts) {
    if (nt < 1 || depth + nt > engine.n_ctx()) {
      return invalid_argument("specverify: nt {} at depth {} does not fit a context of {}", nt, depth,
                              engine.n_ctx());
    }
  }
  if (depth > 0) MINFER_RETURN_IF_ERROR(prefill(engine, bench_tokens(depth, nv, 1), 0));
  std::vector<VerifyCost> out;
  for (int32_t nt : nts) {
    const std::vector<int32_t> ids = bench_tokens(nt, nv, 4);
    engine::Batch b;
    for (int32_t i = 0; i < nt; ++i) b.add(ids[static_cast<size_t>(i)], depth + i, 0, true);
    VerifyCost cost;
    cost.nt = nt;
    for (int r = 0; r < reps + 3; ++r) {
      const auto t0 = std::chrono::steady_clock::now();
      MINFER_RETURN_IF_ERROR(engine.decode(b).status());
      const double ms =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      engine.kv().seq_rm(0, depth, -1);
      if (r >= 3) cost.ms.push_back(ms);
    }
    out.push_back(std::move(cost));
  }
  return out;
}

}  // namespace minfer::apps
