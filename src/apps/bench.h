// llama-bench-style measurements on an engine::Engine: pp<P> (prompt processing from an empty cache) and
// tg<T> (token-by-token generation), optionally after a prefilled depth, with warm-up and repetitions.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine/speculative.h"

namespace minfer::apps {

struct BenchTest {
  int32_t n_prompt = 0;      // pp test when > 0
  int32_t n_gen = 0;         // tg test when > 0
  int32_t depth = 0;         // tokens already in the cache before the timed part
  std::string name() const;  // "pp512", "tg128", "pp512 @ d2048"
};

struct BenchResult {
  BenchTest test;
  std::vector<double> seconds;  // one per repetition
  double avg_ts() const;        // mean tokens per second
  double stddev_ts() const;     // sample standard deviation of tokens per second
  std::vector<double> samples_ts() const;
};

// Runs one untimed warm-up, then `reps` timed repetitions, each from an empty cache (the model is not
// reloaded). Token ids are fixed pseudo-random ids, as llama-bench uses.
Result<BenchResult> run_bench(engine::Engine& engine, const BenchTest& test, int reps);

// Greedy generation of `n_gen` tokens after a prompt (`prompt_ids`, or a fixed self-repeating one; end of
// generation forbidden), timed without and with speculation through `drafter`: tg tok/s for both and the
// speculation stats. Each repetition starts from empty caches.
struct SpecBenchResult {
  BenchResult plain, speculative;  // test.n_gen set; seconds of generation only (no prompt)
  engine::SpecStats stats;         // over the timed repetitions
};
Result<SpecBenchResult> run_spec_bench(engine::Engine& target, engine::Drafter& drafter, int32_t n_gen,
                                       const engine::SpecOptions& spec, int reps,
                                       std::span<const int32_t> prompt_ids = {});

// The cost C(nt) of one verify step: nt tokens of one sequence, every row's logits wanted, at a fixed KV
// depth (what a speculative round with nt - 1 drafted tokens costs the target).
struct VerifyCost {
  int32_t nt = 0;
  std::vector<double> ms;  // one per timed repetition
  double median_ms() const;
};

// Prefills `depth` tokens once, then for each nt runs 3 untimed and `reps` timed verify steps, removing the
// step's rows after each so the depth stays fixed.
Result<std::vector<VerifyCost>> run_verify_bench(engine::Engine& engine, int32_t depth,
                                                 const std::vector<int32_t>& nts, int reps);

}  // namespace minfer::apps
